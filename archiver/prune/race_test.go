package prune

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/worldbackup/worldbackup/archiver/backup"
	"github.com/worldbackup/worldbackup/archiver/catalog"
	"github.com/worldbackup/worldbackup/archiver/retention"
	"github.com/worldbackup/worldbackup/archiver/store"
	"github.com/worldbackup/worldbackup/jobapi"
)

// These tests run against the real PostgreSQL catalog and a real Local
// store on disk: what a prune does while a backup of the same server runs,
// and what a crash leaves in each order of deleting rows and files.

// diskFixture is a migrated catalog and a Local store in a temp folder.
type diskFixture struct {
	db     *catalog.DB
	st     *store.Local
	insert func(t *testing.T, r catalog.Record) // fixture.insert
}

func newDiskFixture(t *testing.T) diskFixture {
	t.Helper()
	f := newFixture(t)
	st, err := store.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return diskFixture{db: f.db, st: st, insert: f.insert}
}

// seed stores n archives of server s with their rows, run "old<i>"
// finished i days before 2026-11-20 (all past any grace period).
func (f diskFixture) seed(t *testing.T, s string, n int) {
	t.Helper()
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("old%d", i)
		key := s + "/" + id + ".tar.zst"
		size, err := f.st.Put(t.Context(), key, func(w io.Writer) error { _, err := io.WriteString(w, "archive "+id); return err })
		if err != nil {
			t.Fatal(err)
		}
		finished := time.Date(2026, 11, 20, 3, 0, 0, 0, time.UTC).AddDate(0, 0, -i)
		f.insert(t, catalog.Record{RunID: id, Server: s, ArchiveRef: f.st.Ref(key), SizeBytes: size,
			SHA256: strings.Repeat("0", 64), Compression: "zstd", StartedAt: finished.Add(-time.Minute), FinishedAt: finished})
	}
}

// consistent fails t unless every row of server s points at an archive on
// disk; it returns the run IDs of the rows and the names of the archive
// files (temp files left out).
func (f diskFixture) consistent(t *testing.T, s string) (rows, files []string) {
	t.Helper()
	recs, err := f.db.List(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		rows = append(rows, r.RunID)
		if _, err := os.Stat(r.ArchiveRef); err != nil {
			t.Errorf("row %s points at a missing archive: %v", r.RunID, err)
		}
	}
	objs, err := f.st.List(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		files = append(files, path.Base(o.Key))
	}
	slices.Sort(rows)
	return rows, files
}

// pausedCatalog is the backup's catalog: Insert waits for release after
// signalling inserting, so a test can act between the archive's rename into
// place and its row.
type pausedCatalog struct {
	*catalog.DB
	inserting chan<- struct{}
	release   <-chan struct{}
}

func (c pausedCatalog) Insert(ctx context.Context, r catalog.Record) (bool, error) {
	c.inserting <- struct{}{}
	<-c.release
	return c.DB.Insert(ctx, r)
}

// pausedStore is the backup's store: Put waits for release inside the
// write, after signalling writing, while the archive is a temp file.
type pausedStore struct {
	*store.Local
	writing chan<- struct{}
	release <-chan struct{}
}

func (s pausedStore) Put(ctx context.Context, key string, write func(io.Writer) error) (int64, error) {
	return s.Local.Put(ctx, key, func(w io.Writer) error {
		s.writing <- struct{}{}
		<-s.release
		return write(w)
	})
}

func TestPruneRacingABackup(t *testing.T) {
	const server = "s"
	policy := retention.Policy{Last: 2, MinKeep: 2}
	tests := []struct {
		name string
		// pause makes the backup's store and catalog stop at the moment
		// under test; it returns them and the channels.
		pause func(f diskFixture, at chan<- struct{}, release <-chan struct{}) (backup.Store, backup.Catalog)
		// wantOrphan: the prune sees the run's archive as a file without a
		// row (and keeps it).
		wantOrphan bool
	}{
		{
			name: "while the archive is written (a temp file)",
			pause: func(f diskFixture, at chan<- struct{}, release <-chan struct{}) (backup.Store, backup.Catalog) {
				return pausedStore{Local: f.st, writing: at, release: release}, f.db
			},
		},
		{
			name: "between the archive's rename and its row",
			pause: func(f diskFixture, at chan<- struct{}, release <-chan struct{}) (backup.Store, backup.Catalog) {
				return f.st, pausedCatalog{DB: f.db, inserting: at, release: release}
			},
			wantOrphan: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newDiskFixture(t)
			f.seed(t, server, 5)
			world := t.TempDir()
			if err := os.WriteFile(filepath.Join(world, "level.dat"), []byte("level"), 0o644); err != nil {
				t.Fatal(err)
			}
			at, release := make(chan struct{}), make(chan struct{})
			st, cat := tt.pause(f, at, release)
			done := make(chan error, 1)
			go func() {
				_, err := backup.New(st, cat, hclog.NewNullLogger()).Run(t.Context(),
					backup.Params{Server: server, RunID: "running", World: world, Format: jobapi.FormatTar, ProgressInterval: time.Hour})
				done <- err
			}()
			select {
			case <-at:
			case err := <-done:
				t.Fatalf("the backup ended before the pause: %v", err)
			}

			// The prune runs with the real clock and the default grace.
			rep, err := Prune(t.Context(), f.db, f.st, Options{Server: server, Policy: policy}, hclog.NewNullLogger())
			if err != nil {
				t.Fatalf("Prune: %v", err)
			}
			for _, r := range rep.Runs {
				if r.RunID == "running" {
					t.Errorf("the running backup's run was a candidate: %+v", r)
				}
			}
			var orphans []string
			for _, o := range rep.Orphans {
				orphans = append(orphans, path.Base(o.Ref))
				if o.Removed {
					t.Errorf("orphan %s removed while its run records it", o.Ref)
				}
			}
			if want := tt.wantOrphan; want != slices.Contains(orphans, "running.tar.zst") {
				t.Errorf("orphans %v: want running.tar.zst among them: %v", orphans, want)
			}
			if rows, _ := f.consistent(t, server); fmt.Sprint(rows) != "[old1 old2]" {
				t.Errorf("rows during the backup %v: want the policy's [old1 old2]", rows)
			}

			close(release)
			if err := <-done; err != nil {
				t.Fatalf("the backup failed after the prune: %v", err)
			}
			rows, files := f.consistent(t, server)
			if fmt.Sprint(rows) != "[old1 old2 running]" || fmt.Sprint(files) != "[old1.tar.zst old2.tar.zst running.tar.zst]" {
				t.Fatalf("after the backup rows %v files %v: want old1, old2 and running, each with its archive", rows, files)
			}

			// The next prune counts the new run among the policy's two.
			if _, err := Prune(t.Context(), f.db, f.st, Options{Server: server, Policy: policy}, hclog.NewNullLogger()); err != nil {
				t.Fatal(err)
			}
			if rows, files := f.consistent(t, server); fmt.Sprint(rows) != "[old1 running]" || len(files) != 2 {
				t.Fatalf("after a second prune rows %v files %v: want [old1 running], each with its archive", rows, files)
			}
		})
	}
}

// TestPruneConcurrentWithBackups runs prunes and backups of one server at
// once, unpaused, and checks the invariants after each step: no row without
// its archive, every backup recorded, the floor kept.
func TestPruneConcurrentWithBackups(t *testing.T) {
	const server, backups, prunes = "s", 6, 6
	f := newDiskFixture(t)
	f.seed(t, server, 8)
	world := t.TempDir()
	if err := os.WriteFile(filepath.Join(world, "level.dat"), []byte("level"), 0o644); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, backups+prunes)
	for i := range backups {
		go func() {
			_, err := backup.New(f.st, f.db, hclog.NewNullLogger()).Run(t.Context(),
				backup.Params{Server: server, RunID: fmt.Sprintf("new%d", i), World: world, Format: jobapi.FormatTar, ProgressInterval: time.Hour})
			errs <- err
		}()
	}
	for range prunes {
		go func() {
			_, err := Prune(t.Context(), f.db, f.st, Options{Server: server, Policy: retention.Policy{Last: 1, MinKeep: 3}},
				hclog.NewNullLogger())
			errs <- err
		}()
	}
	for range backups + prunes {
		if err := <-errs; err != nil {
			t.Errorf("run: %v", err)
		}
	}
	rows, files := f.consistent(t, server)
	for i := range backups {
		if id := fmt.Sprintf("new%d", i); !slices.Contains(rows, id) {
			t.Errorf("rows %v: backup %s lost", rows, id)
		}
	}
	// Every old run is past the grace period and outside the policy, but
	// whether the new runs were recorded yet when a prune decided varies:
	// at least the floor's three stay, and every file has its row.
	if len(rows) < 3 || len(files) != len(rows) {
		t.Fatalf("rows %v files %v: want at least 3 rows and one archive per row", rows, files)
	}
}

// pruneFilesFirst is the order prune does not use: the archives the policy
// drops are removed first, then their rows. crash stops it between the two.
func pruneFilesFirst(ctx context.Context, db *catalog.DB, st *store.Local, opts Options, crash bool) error {
	opts.DryRun = true
	rep, err := Prune(ctx, db, st, opts, hclog.NewNullLogger())
	if err != nil {
		return err
	}
	var ids []string
	for _, r := range rep.Runs {
		if r.Keep {
			continue
		}
		key, err := jobapi.ArchiveName(opts.Server, r.RunID, "zstd")
		if err != nil {
			return err
		}
		if err := st.Remove(ctx, key); err != nil {
			return err
		}
		ids = append(ids, r.RunID)
	}
	if crash {
		return errors.New("crashed between the files and the rows")
	}
	_, err = db.PruneServer(ctx, opts.Server, func([]catalog.Record) ([]string, error) { return ids, nil })
	return err
}

// crashingRemove is the Local store whose Remove fails: the process died
// after the rows' transaction committed.
type crashingRemove struct{ *store.Local }

func (crashingRemove) Remove(context.Context, string) error { return errors.New("killed") }

// TestPruneCrashOrder crashes a prune between its two steps in both orders
// on a real store: rows then files (prune's order) leaves only orphan
// files, which the next prune removes, and never a row without its archive;
// files then rows (not used) leaves rows pointing at missing archives, runs
// the catalog offers for restore that cannot be restored.
func TestPruneCrashOrder(t *testing.T) {
	const server = "s"
	opts := Options{Server: server, Policy: retention.Policy{Last: 1, MinKeep: 1}, Now: later}

	t.Run("rows then files: orphan files, no row without an archive", func(t *testing.T) {
		f := newDiskFixture(t)
		f.seed(t, server, 3)
		rep, err := Prune(t.Context(), f.db, crashingRemove{f.st}, opts, hclog.NewNullLogger())
		if err == nil || rep.RowsDeleted != 2 {
			t.Fatalf("Prune = %+v, %v; want the rows deleted and the files' removal failed", rep, err)
		}
		rows, files := f.consistent(t, server)
		if fmt.Sprint(rows) != "[old1]" || len(files) != 3 {
			t.Fatalf("after the crash rows %v files %v: want [old1] and 3 files", rows, files)
		}
		if _, err := Prune(t.Context(), f.db, f.st, opts, hclog.NewNullLogger()); err != nil {
			t.Fatal(err)
		}
		if rows, files := f.consistent(t, server); fmt.Sprint(rows) != "[old1]" || fmt.Sprint(files) != "[old1.tar.zst]" {
			t.Fatalf("after the next prune rows %v files %v: want old1 alone", rows, files)
		}
	})

	t.Run("files then rows: rows point at missing archives", func(t *testing.T) {
		f := newDiskFixture(t)
		f.seed(t, server, 3)
		if err := pruneFilesFirst(t.Context(), f.db, f.st, opts, true); err == nil {
			t.Fatal("the crash did not happen")
		}
		recs, err := f.db.List(t.Context(), server)
		if err != nil {
			t.Fatal(err)
		}
		var dangling []string
		for _, r := range recs {
			if _, err := os.Stat(r.ArchiveRef); errors.Is(err, os.ErrNotExist) {
				dangling = append(dangling, r.RunID)
			}
		}
		slices.Sort(dangling)
		if fmt.Sprint(dangling) != "[old2 old3]" {
			t.Fatalf("rows without an archive %v: want [old2 old3], the broken promise that makes prune delete rows first", dangling)
		}
		// Each is a run a restore would pick and fail on.
		if _, err := f.st.Open(t.Context(), server+"/old2.tar.zst"); err == nil {
			t.Fatal("old2's archive opens")
		}
	})
}
