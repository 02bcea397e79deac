package prune

import (
	"context"
	"fmt"
	"io"
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
	"github.com/worldbackup/worldbackup/archiver/retention"
	"github.com/worldbackup/worldbackup/archiver/store"
	"github.com/worldbackup/worldbackup/internal/s3test"
	"github.com/worldbackup/worldbackup/jobapi"
)

// raceStore is a store both a backup and a prune use.
type raceStore interface {
	backup.Store
	Store
}

// pruneThenWait is the prune's catalog: PruneServer deletes the rows, then
// signals pruned and waits for release before the prune removes any file.
type pruneThenWait struct {
	*catalog.DB
	pruned  chan<- struct{}
	release <-chan struct{}
}

func (c pruneThenWait) PruneServer(ctx context.Context, server string, decide func([]catalog.Record) ([]string, error)) ([]catalog.Record, error) {
	deleted, err := c.DB.PruneServer(ctx, server, decide)
	c.pruned <- struct{}{}
	<-c.release
	return deleted, err
}

// lockSignal is the prune's store: Lock of lockKey signals locking (once)
// before it waits for the lock.
type lockSignal struct {
	raceStore
	lockKey string
	locking chan<- struct{}
	once    *sync.Once
}

func (s lockSignal) Lock(ctx context.Context, key string) (func(), error) {
	if key == s.lockKey {
		s.once.Do(func() { close(s.locking) })
	}
	return s.raceStore.Lock(ctx, key)
}

// rerunPause makes the backup's store and catalog stop at one point: its
// first Lookup (before the run lock), its Put (while the archive is a temp
// file) or its Insert (after the rename, before the row).
type rerunPause struct {
	raceStore
	cat     backup.Catalog
	at      string // "lookup", "put", "insert" or "" (no pause)
	paused  chan<- struct{}
	release <-chan struct{}
	lookups *int
}

func (p rerunPause) stop(point string) {
	if p.at == point {
		p.paused <- struct{}{}
		<-p.release
	}
}

func (p rerunPause) Lookup(ctx context.Context, runID string) (catalog.Record, error) {
	r, err := p.cat.Lookup(ctx, runID)
	if *p.lookups++; *p.lookups == 1 {
		p.stop("lookup")
	}
	return r, err
}

func (p rerunPause) LookupSettled(ctx context.Context, runID string) (catalog.Record, error) {
	return p.cat.LookupSettled(ctx, runID)
}

func (p rerunPause) Insert(ctx context.Context, r catalog.Record) (bool, error) {
	p.stop("insert")
	return p.cat.Insert(ctx, r)
}

func (p rerunPause) LatestChunked(ctx context.Context, server, namespace string, in func(catalog.Record) bool) (catalog.Record, error) {
	return p.cat.LatestChunked(ctx, server, namespace, in)
}

func (p rerunPause) NewestRuns(ctx context.Context, server, namespace string, limit int) ([]catalog.Record, error) {
	return p.cat.NewestRuns(ctx, server, namespace, limit)
}

func (p rerunPause) RegisterPack(ctx context.Context, id, storeRef string) error {
	return p.cat.RegisterPack(ctx, id, storeRef)
}

func (p rerunPause) InsertChunked(ctx context.Context, r catalog.Record, packs []string) (bool, error) {
	p.stop("insert")
	return p.cat.InsertChunked(ctx, r, packs)
}

func (p rerunPause) Put(ctx context.Context, key string, write func(io.Writer) error) (int64, error) {
	return p.raceStore.Put(ctx, key, func(w io.Writer) error {
		p.stop("put")
		return write(w)
	})
}

// checkRowsHaveArchives fails t unless every row of server has its archive
// in st, and returns the rows' run IDs.
func checkRowsHaveArchives(t *testing.T, db *catalog.DB, st raceStore, server string) []string {
	t.Helper()
	recs, err := db.List(t.Context(), server)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := st.List(t.Context(), server)
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, r := range recs {
		rows = append(rows, r.RunID)
		if !slices.ContainsFunc(objs, func(o store.Object) bool { return st.Ref(o.Key) == r.ArchiveRef }) {
			t.Errorf("row %s points at a missing archive %s", r.RunID, r.ArchiveRef)
		}
	}
	slices.Sort(rows)
	return rows
}

// testPruneRacingARerun: a prune deletes the row of old3 (outside the
// policy), and before it removes old3's archive a backup re-runs old3,
// paused at each point of its run. Whatever the order, every row ends with
// its archive: the prune never removes the archive of a run that is being
// recorded again.
func testPruneRacingARerun(t *testing.T, newStore func(t *testing.T, db *catalog.DB) raceStore) {
	const server, rerun = "s", "old3"
	for _, at := range []struct{ name, point string }{
		{"before the backup takes the run lock", "lookup"},
		{"while the archive is written", "put"},
		{"between the archive and its row", "insert"},
		{"after the row", ""},
	} {
		t.Run(at.name, func(t *testing.T) {
			f := newFixture(t)
			st := newStore(t, f.db)
			seedStore(t, f, st, server, 5)
			world := t.TempDir()
			if err := os.WriteFile(filepath.Join(world, "level.dat"), []byte("level"), 0o644); err != nil {
				t.Fatal(err)
			}

			pruned, releasePrune := make(chan struct{}), make(chan struct{})
			locking := make(chan struct{})
			pruneDone := make(chan error, 1)
			go func() {
				_, err := Prune(t.Context(), pruneThenWait{DB: f.db, pruned: pruned, release: releasePrune},
					lockSignal{raceStore: st, lockKey: server + "/" + rerun, locking: locking, once: new(sync.Once)},
					Options{Server: server, Policy: retention.Policy{Last: 2, MinKeep: 2}}, hclog.NewNullLogger())
				pruneDone <- err
			}()
			<-pruned // old3..old5's rows are gone; their archives are not yet

			paused, releaseBackup := make(chan struct{}), make(chan struct{})
			bst := rerunPause{raceStore: st, cat: f.db, at: at.point, paused: paused, release: releaseBackup, lookups: new(int)}
			backupDone := make(chan error, 1)
			go func() {
				_, err := backup.New(bst, bst, hclog.NewNullLogger()).Run(t.Context(),
					backup.Params{Server: server, RunID: rerun, World: world, Format: jobapi.FormatTar, ProgressInterval: time.Hour})
				backupDone <- err
			}()
			var backupErr error
			if at.point == "" {
				backupErr = <-backupDone
			} else {
				select {
				case <-paused:
				case err := <-backupDone:
					t.Fatalf("the backup ended before its pause: %v", err)
				}
			}

			// The prune goes on: it either ends or waits for the run's lock.
			close(releasePrune)
			var pruneErr error
			pruneEnded := false
			select {
			case pruneErr = <-pruneDone:
				pruneEnded = true
			case <-locking:
			}
			close(releaseBackup)
			if at.point != "" {
				backupErr = <-backupDone
			}
			if !pruneEnded {
				pruneErr = <-pruneDone
			}
			if backupErr != nil || pruneErr != nil {
				t.Fatalf("backup: %v; prune: %v", backupErr, pruneErr)
			}
			rows := checkRowsHaveArchives(t, f.db, st, server)
			if !slices.Contains(rows, rerun) {
				t.Errorf("rows %v: the re-run %s is not recorded", rows, rerun)
			}
		})
	}
}

// seedStore stores n archives of server in st with their rows, run
// "old<i>" finished i days before 2026-11-20.
func seedStore(t *testing.T, f fixture, st raceStore, server string, n int) {
	t.Helper()
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("old%d", i)
		key := server + "/" + id + ".tar.zst"
		size, err := st.Put(t.Context(), key, func(w io.Writer) error { _, err := io.WriteString(w, "archive "+id); return err })
		if err != nil {
			t.Fatal(err)
		}
		finished := time.Date(2026, 11, 20, 3, 0, 0, 0, time.UTC).AddDate(0, 0, -i)
		f.insert(t, catalog.Record{RunID: id, Server: server, ArchiveRef: st.Ref(key), SizeBytes: size,
			SHA256: strings.Repeat("0", 64), Compression: "zstd", StartedAt: finished.Add(-time.Minute), FinishedAt: finished})
	}
}

func TestPruneRacingARerunLocal(t *testing.T) {
	testPruneRacingARerun(t, func(t *testing.T, _ *catalog.DB) raceStore {
		st, err := store.NewLocal(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}

// lockerFunc adapts the catalog's archive lock to store.Locker.
type lockerFunc func(ctx context.Context, name string) (func(), error)

func (f lockerFunc) Lock(ctx context.Context, name string) (func(), error) { return f(ctx, name) }

// TestPruneRacingARerunS3 is the race on an S3 store (versitygw), whose run
// lock is the catalog's advisory lock: S3 has no locks of its own.
func TestPruneRacingARerunS3(t *testing.T) {
	srv := s3test.New(t)
	testPruneRacingARerun(t, func(t *testing.T, db *catalog.DB) raceStore {
		st, err := store.NewS3(store.S3Options{
			URL: "s3://" + srv.NewBucket(t) + "/p", Endpoint: srv.Endpoint, Region: s3test.Region, PathStyle: true,
			AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey, Locker: lockerFunc(db.LockArchive),
		})
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}
