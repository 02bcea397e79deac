package backup

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/worldbackup/worldbackup/archiver/catalog"
	"github.com/worldbackup/worldbackup/archiver/store"
	"github.com/worldbackup/worldbackup/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// otherServerFirst is the real catalog where another server records the
// same run ID just before this run's insert.
type otherServerFirst struct{ *catalog.DB }

func (c otherServerFirst) Insert(ctx context.Context, r catalog.Record) (bool, error) {
	other := r
	other.Server, other.ArchiveRef = "creative", "/elsewhere/creative/"+r.RunID+".tar.zst"
	if _, err := c.DB.Insert(ctx, other); err != nil {
		return false, err
	}
	return c.DB.Insert(ctx, r)
}

// TestRunIDTakenWhileRunning: another server's row for the run ID appears
// between the lookup and the insert: the run fails with ErrRunIDTaken (exit
// 2: no retry can record it) and removes its archive.
func TestRunIDTakenWhileRunning(t *testing.T) {
	db, err := catalog.Open(t.Context(), pgtest.URL(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if _, err := db.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	st, err := store.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := params(makeWorld(t))
	p.ProgressInterval = time.Hour
	_, err = New(st, otherServerFirst{db}, nil).Run(t.Context(), p)
	if !errors.Is(err, ErrRunIDTaken) || !strings.Contains(err.Error(), `already recorded for server "creative"`) {
		t.Fatalf("Run: %v; want ErrRunIDTaken naming server creative", err)
	}
	if objs, err := st.List(t.Context(), p.Server); err != nil || len(objs) != 0 {
		t.Errorf("store holds %v (%v): want the unrecordable archive removed", objs, err)
	}
}
