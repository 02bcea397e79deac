package prune

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/worldbackup/worldbackup/archiver/backup"
	"github.com/worldbackup/worldbackup/archiver/catalog"
	"github.com/worldbackup/worldbackup/archiver/chunked"
	"github.com/worldbackup/worldbackup/archiver/retention"
	"github.com/worldbackup/worldbackup/archiver/store"
	"github.com/worldbackup/worldbackup/jobapi"
)

// pausedPackStore pauses the backup's Puts of packs, inside the write
// (the pack is registered, its object not committed yet): the first tells
// at, and each waits for release, so that no pack is committed while the
// prune runs (the packs of a run are written on goroutines of their own).
type pausedPackStore struct {
	backup.Store
	at      chan<- struct{}
	release <-chan struct{}
	once    *sync.Once
}

func (s pausedPackStore) Put(ctx context.Context, key string, write func(io.Writer) error) (int64, error) {
	return s.Store.Put(ctx, key, func(w io.Writer) error {
		if strings.HasPrefix(key, jobapi.ChunkedDir+"/packs/") {
			s.once.Do(func() { s.at <- struct{}{} })
			<-s.release
		}
		return write(w)
	})
}

// noForget is a prune's catalog that stops before forgetting the packs it
// removed, as a prune killed there.
type noForget struct{ *catalog.DB }

var errStopped = errors.New("stopped")

func (noForget) ForgetPacks(context.Context, []string) error { return errStopped }

// pausedChunkedCatalog pauses the backup before its row's transaction.
type pausedChunkedCatalog struct {
	*catalog.DB
	root    string // the store's
	at      chan<- struct{}
	release <-chan struct{}
}

func (c pausedChunkedCatalog) InsertChunked(ctx context.Context, r catalog.Record, packs []string) (bool, error) {
	// The run's manifest is written and has no row yet. A real grace
	// period (at least a backup's deadline) keeps it out of the prune's
	// orphans, which would wait for the run's lock this backup holds;
	// this test's grace of 1ns (so that the packs go at once) would not:
	// date the manifest within it.
	key, err := jobapi.ManifestKey(r.Server, r.RunID)
	if err != nil {
		return false, err
	}
	young := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(c.root, filepath.FromSlash(key)), young, young); err != nil {
		return false, err
	}
	c.at <- struct{}{}
	<-c.release
	return c.DB.InsertChunked(ctx, r, packs)
}

// manifestAhead is the store of a prune run while a backup of run is
// paused holding the run's lock, its manifest written and its row not: the
// manifest is listed as written an hour ahead, younger than any grace. Past
// the grace these tests shorten, the manifest is an orphan, and the prune
// would wait for the run's lock, which the backup holds until its row is
// in (it does not wait for the prune).
type manifestAhead struct {
	raceStore
	server, run string
}

func (m manifestAhead) List(ctx context.Context, dir string) ([]store.Object, error) {
	objs, err := m.raceStore.List(ctx, dir)
	key, kerr := jobapi.ManifestKey(m.server, m.run)
	if kerr != nil {
		return nil, kerr
	}
	for i := range objs {
		if objs[i].Key == key {
			objs[i].ModTime = time.Now().Add(time.Hour)
		}
	}
	return objs, err
}

func writeRandom(t *testing.T, p string, n int, rng *rand.Rand) {
	t.Helper()
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// verifyAll checks every blob of every chunked run of server s.
func (f diskFixture) verifyAll(t *testing.T, s string) []string {
	t.Helper()
	recs, err := f.db.List(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	var runs []string
	for _, r := range recs {
		if r.Format != jobapi.FormatChunked {
			continue
		}
		runs = append(runs, r.RunID)
		key, _ := jobapi.ManifestKey(r.Server, r.RunID)
		m, err := chunked.Open(t.Context(), f.st, key, r.SHA256)
		if err == nil {
			_, err = chunked.Verify(t.Context(), f.st, m, 1, 0)
		}
		if err != nil {
			t.Errorf("run %s does not verify: %v", r.RunID, err)
		}
	}
	return runs
}

// TestChunkedPruneRace: a chunked backup reuses the blobs of the server's
// previous chunked run while a prune removes that run and collects the
// packs nothing references. Paused at each step, the backup either fails
// (retryable: a pack it needs was condemned) or records a run whose every
// blob is there; never a run that references a missing blob.
func TestChunkedPruneRace(t *testing.T) {
	const server = "s"
	policy := retention.Policy{Last: 1, MinKeep: 1}
	tests := []struct {
		name string
		// pause returns the backup's store and catalog, stopping at the
		// step under test (nil: not paused, the prune runs after it).
		pause    func(f diskFixture, at chan<- struct{}, release <-chan struct{}) (backup.Store, backup.Catalog)
		wantFail bool
		// stopBeforeForget: the prune dies after removing the condemned
		// packs' objects, before forgetting their rows.
		stopBeforeForget bool
	}{
		{"while a new pack is written", func(f diskFixture, at chan<- struct{}, release <-chan struct{}) (backup.Store, backup.Catalog) {
			return pausedPackStore{Store: f.st, at: at, release: release, once: new(sync.Once)}, f.db
		}, true, false},
		{"before the row's transaction", func(f diskFixture, at chan<- struct{}, release <-chan struct{}) (backup.Store, backup.Catalog) {
			return f.st, pausedChunkedCatalog{DB: f.db, root: f.st.Root(), at: at, release: release}
		}, true, false},
		{"before the row's transaction, the prune stopped before forgetting the packs", func(f diskFixture, at chan<- struct{}, release <-chan struct{}) (backup.Store, backup.Catalog) {
			return f.st, pausedChunkedCatalog{DB: f.db, root: f.st.Root(), at: at, release: release}
		}, true, true},
		{"after the row (the prune follows)", nil, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newDiskFixture(t)
			rng := rand.New(rand.NewPCG(1, 2))
			world := t.TempDir()
			writeRandom(t, filepath.Join(world, "big.dat"), 3<<20, rng)
			writeRandom(t, filepath.Join(world, "level.dat"), 3000, rng)
			run := func(st backup.Store, cat backup.Catalog, id, format string) error {
				_, err := backup.New(st, cat, hclog.NewNullLogger()).Run(t.Context(),
					backup.Params{Server: server, RunID: id, World: world, Format: format, ProgressInterval: time.Hour})
				return err
			}
			if err := run(f.st, f.db, "c1", jobapi.FormatChunked); err != nil {
				t.Fatal(err)
			}
			if err := run(f.st, f.db, "t2", jobapi.FormatTar); err != nil {
				t.Fatal(err)
			}
			writeRandom(t, filepath.Join(world, "level.dat"), 3000, rng) // c2 writes a pack, reuses big.dat
			prune := func() Report {
				var cat Catalog = f.db
				if tt.stopBeforeForget {
					cat = noForget{f.db}
				}
				rep, err := Prune(t.Context(), cat, manifestAhead{f.st, server, "c2"}, Options{Server: server, Policy: policy,
					Grace: time.Nanosecond}, hclog.NewNullLogger())
				if err != nil && !(tt.stopBeforeForget && errors.Is(err, errStopped)) {
					t.Fatalf("Prune: %v", err)
				}
				return rep
			}

			var err error
			if tt.pause == nil {
				err = run(f.st, f.db, "c2", jobapi.FormatChunked)
				rep := prune()
				if rep.RowsDeleted != 2 {
					t.Errorf("prune deleted %d rows, want c1 and t2", rep.RowsDeleted)
				}
			} else {
				at, release := make(chan struct{}), make(chan struct{})
				st, cat := tt.pause(f, at, release)
				done := make(chan error, 1)
				go func() { done <- run(st, cat, "c2", jobapi.FormatChunked) }()
				select {
				case <-at:
				case err := <-done:
					t.Fatalf("the backup ended before the pause: %v", err)
				}
				packs := filepath.Join(f.st.Root(), "_chunked/packs/*/*")
				before, _ := filepath.Glob(packs)
				prune() // removes c1, then every pack (c1's, and c2's registered one)
				after, _ := filepath.Glob(packs)
				// A pack c2 began on another goroutine while the prune
				// ran is not the prune's to have seen.
				if left := slices.DeleteFunc(after, func(p string) bool { return !slices.Contains(before, p) }); len(left) != 0 {
					t.Errorf("packs left after the prune: %v", left)
				}
				tt.stopBeforeForget = false
				close(release)
				err = <-done
			}
			if tt.wantFail {
				// Condemned before its row, or its pack's temp file
				// removed under it.
				if !errors.Is(err, catalog.ErrPackCondemned) && !errors.Is(err, store.ErrDiscarded) {
					t.Fatalf("backup: %v, want ErrPackCondemned or ErrDiscarded", err)
				}
				if _, err := f.db.Lookup(t.Context(), "c2"); !errors.Is(err, catalog.ErrNotFound) {
					t.Errorf("the failed run has a row: %v", err)
				}
				// The retry writes the run again and records it whole.
				if err := run(f.st, f.db, "c2", jobapi.FormatChunked); err != nil {
					t.Fatalf("retry: %v", err)
				}
			} else if err != nil {
				t.Fatalf("backup: %v", err)
			}
			if runs := f.verifyAll(t, server); len(runs) != 1 || runs[0] != "c2" {
				t.Errorf("chunked runs %v, want [c2]", runs)
			}
			// A second prune keeps every pack c2 needs.
			prune()
			f.verifyAll(t, server)
		})
	}
}
