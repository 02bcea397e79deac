package store_test

import (
	"testing"

	"github.com/worldbackup/worldbackup/archiver/store"
	"github.com/worldbackup/worldbackup/archiver/store/storetest"
)

// Every store runs the same conformance suite (an external test package,
// because the suite names store.Object and store.ErrDiscarded).
var (
	_ storetest.Store = (*store.Local)(nil)
	_ storetest.Store = (*store.Mem)(nil)
)

func TestLocalConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store {
		l, err := store.NewLocal(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return l
	})
}

func TestMemConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store { return store.NewMem() })
}
