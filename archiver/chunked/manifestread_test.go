package chunked

import (
	"context"
	"errors"
	"io"
	"runtime"
	"testing"

	"github.com/worldbackup/worldbackup/archiver/store"
)

// junkManifest is a store whose manifest object is size bytes of zeros,
// generated as it is read (the test holds none of it).
type junkManifest struct {
	*store.Mem
	key  string
	size int64
}

func (j junkManifest) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	if key == j.key {
		return io.NopCloser(io.LimitReader(zeros{}, j.size)), nil
	}
	return j.Mem.Open(ctx, key)
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestReplacedManifestIsNotHeld: a manifest object replaced by up to
// MaxManifest of anything is refused as corrupt (its checksum) without
// being read into memory: a restore in a small memory limit exits 3
// instead of being killed.
func TestReplacedManifestIsNotHeld(t *testing.T) {
	const size = 200 << 20
	st := junkManifest{Mem: store.NewMem(), key: "_chunked/runs/s/r.manifest", size: size}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := OpenSealed(t.Context(), st, st.key, Sum([]byte("the real manifest")), nil)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("OpenSealed = %v, want ErrCorrupt", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 16<<20 {
		t.Errorf("reading a %d MiB junk manifest allocated %d MiB", size>>20, grew>>20)
	}
}
