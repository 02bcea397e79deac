package prune

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/worldbackup/worldbackup/archiver/backup"
	"github.com/worldbackup/worldbackup/archiver/catalog"
	"github.com/worldbackup/worldbackup/archiver/chunked"
	"github.com/worldbackup/worldbackup/archiver/retention"
	"github.com/worldbackup/worldbackup/archiver/store"
	"github.com/worldbackup/worldbackup/internal/s3test"
	"github.com/worldbackup/worldbackup/jobapi"
)

// pausedManifestStore pauses the backup before it writes its manifest:
// its new packs are written and registered, and it has no row.
type pausedManifestStore struct {
	backup.Store
	at      chan<- struct{}
	release <-chan struct{}
}

func (s pausedManifestStore) Put(ctx context.Context, key string, write func(io.Writer) error) (int64, error) {
	if _, _, ok := jobapi.SplitManifestKey(key); ok {
		s.at <- struct{}{}
		<-s.release
	}
	return s.Store.Put(ctx, key, write)
}

// TestPruneOrphanPacks: packs in the store without a row in the catalog
// (one whose row was lost; one a prune condemned and forgot while a backup
// was still writing it, the backup then killed before it could remove it)
// are removed by a prune once older than the grace period, in the folder
// store and in S3; a pack a live backup is about to record (its row there)
// and the packs of recorded runs stay, and so does a key below the pack
// folder that is not a pack's.
func TestPruneOrphanPacks(t *testing.T) {
	stores := []struct {
		name string
		new  func(t *testing.T, db *catalog.DB) raceStore
	}{
		{"folder", func(t *testing.T, _ *catalog.DB) raceStore {
			st, err := store.NewLocal(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return st
		}},
		{"s3", func(t *testing.T, db *catalog.DB) raceStore {
			srv := s3test.New(t)
			st, err := store.NewS3(store.S3Options{
				URL: "s3://" + srv.NewBucket(t) + "/p", Endpoint: srv.Endpoint, Region: s3test.Region, PathStyle: true,
				AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey, Locker: lockerFunc(db.LockArchive),
			})
			if err != nil {
				t.Fatal(err)
			}
			return st
		}},
	}
	const server = "s"
	for _, sc := range stores {
		t.Run(sc.name, func(t *testing.T) {
			db := newFixture(t).db
			st := sc.new(t, db)
			ctx := t.Context()
			rng := rand.New(rand.NewPCG(3, 4))
			world := t.TempDir()
			writeRandom(t, filepath.Join(world, "big.dat"), 1<<20, rng)
			writeRandom(t, filepath.Join(world, "level.dat"), 3000, rng)
			run := func(st backup.Store, id string) error {
				_, err := backup.New(st, db, hclog.NewNullLogger()).Run(ctx,
					backup.Params{Server: server, RunID: id, World: world, Format: jobapi.FormatChunked, ProgressInterval: time.Hour})
				return err
			}
			if err := run(st, "c1"); err != nil {
				t.Fatal(err)
			}
			putPack := func(id string) string {
				t.Helper()
				key, err := jobapi.PackKey(id)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := st.Put(ctx, key, func(w io.Writer) error { _, err := io.WriteString(w, "WBPK orphan "+id); return err }); err != nil {
					t.Fatal(err)
				}
				return key
			}
			// The row lost with the catalog.
			lost := putPack(newPackID(t))
			// The row forgotten under a backup: registered, condemned and
			// forgotten by a prune (its object not there yet: a prune
			// whose horizon, here 0, the registration outlived), then the
			// backup's write of the pack committed and the backup killed.
			forgottenID := newPackID(t)
			if err := db.RegisterPack(ctx, forgottenID, ""); err != nil {
				t.Fatal(err)
			}
			if ids, err := db.CondemnPacks(ctx, 0, 0, "", nil); err != nil || !slices.Contains(ids, forgottenID) {
				t.Fatalf("CondemnPacks = %v, %v; want %s among them", ids, err, forgottenID)
			}
			if err := db.ForgetPacks(ctx, []string{forgottenID}); err != nil {
				t.Fatal(err)
			}
			forgotten := putPack(forgottenID)
			// Not a pack's key: left alone.
			other := jobapi.PacksDir + "/zz/notes"
			if _, err := st.Put(ctx, other, func(w io.Writer) error { _, err := io.WriteString(w, "x"); return err }); err != nil {
				t.Fatal(err)
			}

			prune := func(now time.Time, dry bool) Report {
				t.Helper()
				rep, err := Prune(ctx, db, manifestAhead{st, server, "c2"}, Options{Server: server, Policy: retention.Policy{Last: 5, MinKeep: 1},
					Grace: time.Hour, Now: func() time.Time { return now }, DryRun: dry}, hclog.NewNullLogger())
				if err != nil {
					t.Fatalf("Prune: %v", err)
				}
				return rep
			}
			exists := func(key string) bool {
				t.Helper()
				rc, err := st.Open(ctx, key)
				if err == nil {
					rc.Close()
				}
				return err == nil
			}
			// Within the grace period: kept.
			if rep := prune(time.Now(), false); rep.OrphanPacks != 0 || !exists(lost) || !exists(forgotten) {
				t.Errorf("a prune within the grace period: %d orphan packs, lost kept %v, forgotten kept %v; want 0, both kept",
					rep.OrphanPacks, exists(lost), exists(forgotten))
			}
			// A dry run past it reports them and removes nothing.
			if rep := prune(later(), true); rep.OrphanPacks != 2 || !exists(lost) || !exists(forgotten) {
				t.Errorf("a dry run: %d orphan packs, lost kept %v, forgotten kept %v; want 2, both kept",
					rep.OrphanPacks, exists(lost), exists(forgotten))
			}

			// A backup paused before its manifest and its row: its new
			// pack has a row (registered before it was written), so a
			// prune whose clock puts every object past the grace period
			// leaves it. (Paused after its manifest, the prune would wait
			// for the run's lock to judge that manifest, an orphan by this
			// clock: a grace period of at least a backup's deadline keeps
			// a running backup's manifest out of the orphans.)
			writeRandom(t, filepath.Join(world, "level.dat"), 3000, rng)
			at, release := make(chan struct{}), make(chan struct{})
			done := make(chan error, 1)
			go func() { done <- run(pausedManifestStore{Store: st, at: at, release: release}, "c2") }()
			select {
			case <-at:
			case err := <-done:
				t.Fatalf("the backup ended before the pause: %v", err)
			}
			rep := prune(later(), false)
			close(release)
			if err := <-done; err != nil {
				t.Fatalf("the paused backup: %v", err)
			}
			if rep.OrphanPacks != 2 || exists(lost) || exists(forgotten) {
				t.Errorf("a prune past the grace period: %d orphan packs, lost kept %v, forgotten kept %v; want 2, both removed",
					rep.OrphanPacks, exists(lost), exists(forgotten))
			}
			if !exists(other) {
				t.Errorf("%s, not a pack, was removed", other)
			}
			// Every run verifies, blob by blob.
			for _, id := range []string{"c1", "c2"} {
				rec, err := db.Lookup(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				key, _ := jobapi.ManifestKey(server, id)
				m, err := chunked.Open(ctx, st, key, rec.SHA256)
				if err == nil {
					_, err = chunked.Verify(ctx, st, m, 1, 0)
				}
				if err != nil {
					t.Errorf("run %s does not verify: %v", id, err)
				}
			}
			// Nothing left to collect.
			if rep := prune(later(), false); rep.OrphanPacks != 0 {
				t.Errorf("a second prune found %d orphan packs, want 0", rep.OrphanPacks)
			}
		})
	}
}

// TestPruneOrphanPacksPaged: the pack folder is walked a page at a time
// (more packs than a page), each orphan removed once.
func TestPruneOrphanPacksPaged(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	n := store.WalkPage + 7
	var keys []string
	for i := range n {
		key, _ := jobapi.PackKey(newPackID(t))
		if _, err := f.st.Put(ctx, key, func(w io.Writer) error { _, err := io.WriteString(w, "p"); return err }); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 { // half have rows: not orphans
			id, _ := jobapi.PackIDOfKey(key)
			if err := f.db.RegisterPack(ctx, id, store.PacksRef(f.st)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		keys = append(keys, key)
	}
	pages := 0
	st := countWalks{Mem: f.st, pages: &pages}
	rep, err := Prune(ctx, f.db, st, Options{Server: "s", Policy: retention.Policy{Last: 1, MinKeep: 1},
		Grace: time.Hour, Now: later}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	if rep.OrphanPacks != len(keys) || pages < 2 {
		t.Errorf("%d orphan packs in %d pages, want %d in 2 or more", rep.OrphanPacks, pages, len(keys))
	}
	for _, key := range keys {
		if _, ok := f.st.Bytes(key); ok {
			t.Errorf("orphan %s kept", key)
		}
	}
	if left := len(f.st.Keys()); left != n-len(keys) {
		t.Errorf("%d packs left, want the %d with rows", left, n-len(keys))
	}
}

// countWalks counts the pages a Mem store's Walk hands over.
type countWalks struct {
	*store.Mem
	pages *int
}

func (c countWalks) Walk(ctx context.Context, dir string, fn func([]store.Object) error) error {
	return c.Mem.Walk(ctx, dir, func(p []store.Object) error { *c.pages++; return fn(p) })
}

func newPackID(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := crand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// TestPruneKeepsOrphansOfALostCatalog: archives and packs without a row
// past the grace period go while they are few or fewer than the recorded
// ones (killed and failed runs); when they outnumber the recorded ones, a
// catalog that lost its rows (an older dump restored, an empty or wrong
// database) is the likelier cause, and the prune keeps them and fails
// saying so, unless RemoveOrphans. The rules still apply meanwhile.
func TestPruneKeepsOrphansOfALostCatalog(t *testing.T) {
	for _, tt := range []struct {
		name              string
		orphans, recorded int
		remove            bool
		wantKept          bool
	}{
		{"a few orphans of an empty catalog go", MinOrphans, 0, false, false},
		{"fewer orphans than recorded go", MinOrphans + 4, MinOrphans + 5, false, false},
		{"an empty catalog keeps them", MinOrphans + 1, 0, false, true},
		{"a catalog that lost most rows keeps them", 20, 3, false, true},
		{"RemoveOrphans removes them", 20, 3, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			ctx := t.Context()
			st := memRef{f.st}
			var orphanKeys []string
			for i := range tt.orphans {
				f.put(t, "s", fmt.Sprintf("lost%02d", i), later().Add(-24*time.Hour), false)
				orphanKeys = append(orphanKeys, fmt.Sprintf("s/lost%02d.tar.zst", i))
				key, _ := jobapi.PackKey(newPackID(t))
				if _, err := f.st.Put(ctx, key, func(w io.Writer) error { _, err := io.WriteString(w, "p"); return err }); err != nil {
					t.Fatal(err)
				}
				orphanKeys = append(orphanKeys, key)
			}
			for i := range tt.recorded {
				f.put(t, "s", fmt.Sprintf("kept%02d", i), time.Now().Add(-time.Duration(i)*time.Minute), true)
				key, _ := jobapi.PackKey(newPackID(t))
				if _, err := f.st.Put(ctx, key, func(w io.Writer) error { _, err := io.WriteString(w, "p"); return err }); err != nil {
					t.Fatal(err)
				}
				id, _ := jobapi.PackIDOfKey(key)
				if err := f.db.RegisterPack(ctx, id, store.PacksRef(st)); err != nil {
					t.Fatal(err)
				}
			}
			rep, err := Prune(ctx, f.db, st, Options{Server: "s", Policy: retention.Policy{Last: 100, MinKeep: 1},
				Grace: time.Hour, Now: later, RemoveOrphans: tt.remove}, hclog.NewNullLogger())
			if tt.wantKept != (err != nil) || (err != nil && !strings.Contains(err.Error(), "--remove-orphans")) {
				t.Fatalf("Prune = %+v, %v; want an error naming --remove-orphans: %t", rep, err, tt.wantKept)
			}
			for _, key := range orphanKeys {
				if _, held := f.st.Bytes(key); held != tt.wantKept {
					t.Errorf("orphan %s held %t, want %t", key, held, tt.wantKept)
				}
			}
			if rows, _ := f.state(t, "s"); len(rows) != tt.recorded {
				t.Errorf("rows %v, want the %d recorded", rows, tt.recorded)
			}
		})
	}
}
