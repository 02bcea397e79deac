package chunked

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/worldbackup/worldbackup/archiver/store"
	"github.com/worldbackup/worldbackup/jobapi"
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

// TestManifestIsTheRunItsKeyNames: the catalog row's checksum says which
// manifest object was recorded, not which run it is, and a sealed body
// authenticates under the server's data key whatever its run. A manifest
// put under another run's key, its checksum in that run's row (one who
// can write to the store and the catalog, replaying an older run in place
// of a newer one, or another server's run), is refused as damage by both
// readers, sealed or in the clear, instead of restoring as that run.
func TestManifestIsTheRunItsKeyNames(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	world := testWorld(t, rng)
	for _, tc := range []struct {
		name   string
		sealed bool
		server string // the run whose key the manifest of survival's run-1 is put under
		runID  string
	}{
		{"an older run of the server, in the clear", false, "survival", "run-2"},
		{"an older run of the server, sealed", true, "survival", "run-2"},
		{"another server's run, in the clear", false, "creative", "run-1"},
		{"another server's run, sealed with the same key", true, "creative", "run-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := store.NewMem()
			var sl *Sealer
			if tc.sealed {
				sl = testSealer(1)
			}
			res := sealedBackup(t, st, world, "survival", "run-1", nil, sl)
			b := objectBytes(t, st, res.ManifestKey)
			key, err := jobapi.ManifestKey(tc.server, tc.runID)
			if err != nil {
				t.Fatal(err)
			}
			put(t, st, key, b)
			for name, open := range map[string]func(context.Context, Store, string, string, *Sealer) (*Manifest, error){
				"OpenSealed": OpenSealed, "OpenStreamSealed": OpenStreamSealed,
			} {
				m, err := open(t.Context(), st, key, res.SHA256, sl)
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "not the run its key names") {
					t.Errorf("%s of %s: %v (opened: %v); want ErrCorrupt saying it is not the run its key names", name, key, err, m != nil)
				}
				if _, err := open(t.Context(), st, res.ManifestKey, res.SHA256, sl); err != nil {
					t.Errorf("%s of the run's own key: %v", name, err)
				}
			}
		})
	}
}

// objectBytes returns the object key of st.
func objectBytes(t *testing.T, st *store.Mem, key string) []byte {
	t.Helper()
	rc, err := st.Open(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCheckManifestSize: a manifest that a restore would refuse to read is
// refused when it is written, so the run fails instead of being recorded
// unrestorable; one at the bounds is written.
func TestCheckManifestSize(t *testing.T) {
	for _, tt := range []struct {
		name         string
		body, object int
		ok           bool
	}{
		{"small", 1 << 10, 200, true},
		{"at the bounds", maxManifestBody, MaxManifest, true},
		{"body over", maxManifestBody + 1, 1 << 20, false},
		{"object over", 1 << 20, MaxManifest + 1, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := checkManifestSize(tt.body, tt.object, 3)
			if (err == nil) != tt.ok {
				t.Fatalf("checkManifestSize(%d, %d) = %v, want ok %t", tt.body, tt.object, err, tt.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "over what a restore reads") {
				t.Errorf("message %q does not say why", err)
			}
		})
	}
}
