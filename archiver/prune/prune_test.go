package prune

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/worldbackup/worldbackup/archiver/catalog"
	"github.com/worldbackup/worldbackup/archiver/retention"
	"github.com/worldbackup/worldbackup/archiver/store"
	"github.com/worldbackup/worldbackup/internal/pgtest"
	"github.com/worldbackup/worldbackup/jobapi"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// fixture is a migrated catalog and a store holding runs of server "s".
type fixture struct {
	db   *catalog.DB
	pool *pgxpool.Pool // the same database, for what catalog.DB does not do
	st   *store.Mem
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	u := pgtest.URL(t)
	db, err := catalog.Open(t.Context(), u, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	if _, err := db.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return fixture{db: db, pool: pool, st: store.NewMem()}
}

// insert records r as a backup that finished at r.FinishedAt does: its row
// is created then, not now (a run in the past recorded now is one of a
// node whose clock was behind, catalog.Record.ClockBehind).
func (f fixture) insert(t *testing.T, r catalog.Record) {
	t.Helper()
	if _, err := f.db.Insert(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	at := r.FinishedAt
	if now := time.Now(); at.After(now) {
		at = now // a run in the future is one of a node whose clock is ahead
	}
	f.createdAt(t, r.RunID, at)
}

// createdAt sets the created_at of run id's row, when the database recorded
// it, to at.
func (f fixture) createdAt(t *testing.T, id string, at time.Time) {
	t.Helper()
	if _, err := f.pool.Exec(t.Context(), `UPDATE world_backups SET created_at = $2 WHERE run_id = $1`, id, at); err != nil {
		t.Fatal(err)
	}
}

// put stores an archive for run id of server s and, when row, its row,
// finished at finished.
func (f fixture) put(t *testing.T, server, id string, finished time.Time, row bool) {
	t.Helper()
	key := server + "/" + id + ".tar.zst"
	size, err := f.st.Put(t.Context(), key, func(w io.Writer) error { _, err := io.WriteString(w, "archive "+id); return err })
	if err != nil {
		t.Fatal(err)
	}
	if !row {
		return
	}
	f.insert(t, catalog.Record{RunID: id, Server: server, ArchiveRef: "/" + key, SizeBytes: size,
		SHA256: strings.Repeat("0", 64), Compression: "zstd", StartedAt: finished.Add(-time.Minute), FinishedAt: finished})
}

// putManifest stores the manifest of chunked run id of server and, when
// row, its row, finished at finished.
func (f fixture) putManifest(t *testing.T, server, id string, finished time.Time, row bool) {
	t.Helper()
	key, err := jobapi.ManifestKey(server, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.Put(t.Context(), key, func(w io.Writer) error { _, err := io.WriteString(w, "manifest "+id); return err }); err != nil {
		t.Fatal(err)
	}
	if row {
		f.insertManifestRow(t, server, id, finished)
	}
}

// insertManifestRow records chunked run id of server, finished at
// finished, whose manifest putManifest stored.
func (f fixture) insertManifestRow(t *testing.T, server, id string, finished time.Time) {
	t.Helper()
	key, err := jobapi.ManifestKey(server, id)
	if err != nil {
		t.Fatal(err)
	}
	added := int64(len("manifest " + id))
	f.insert(t, catalog.Record{RunID: id, Server: server, ArchiveRef: "/" + key, SizeBytes: 1000,
		SHA256: strings.Repeat("0", 64), Compression: "zstd", StartedAt: finished.Add(-time.Minute), FinishedAt: finished,
		Format: jobapi.FormatChunked, AddedBytes: &added})
}

// manifests returns the names of the files in server's manifest folder.
func (f fixture) manifests(t *testing.T, server string) []string {
	t.Helper()
	dir, err := jobapi.ManifestDir(server)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := f.st.List(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range objs {
		names = append(names, path.Base(o.Key))
	}
	return names
}

// putElsewhere records run id of server, finished at finished, whose
// archive is in another store sharing the catalog (a bucket): a row only.
func (f fixture) putElsewhere(t *testing.T, server, id string, finished time.Time) {
	t.Helper()
	f.insert(t, catalog.Record{RunID: id, Server: server,
		ArchiveRef: "s3://offsite/" + server + "/" + id + ".tar.zst", SizeBytes: 1, SHA256: strings.Repeat("0", 64),
		Compression: "zstd", StartedAt: finished.Add(-time.Minute), FinishedAt: finished})
}

// memRef makes the Mem store's refs match the rows' absolute paths.
type memRef struct{ *store.Mem }

func (m memRef) Ref(key string) string { return "/" + key }

func (f fixture) state(t *testing.T, server string) (rows, files []string) {
	t.Helper()
	recs, err := f.db.List(t.Context(), server)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		rows = append(rows, r.RunID)
	}
	objs, err := f.st.List(t.Context(), server)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		files = append(files, strings.TrimPrefix(o.Key, server+"/"))
	}
	dir, err := jobapi.ManifestDir(server)
	if err != nil {
		t.Fatal(err)
	}
	manifests, err := f.st.List(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range manifests {
		files = append(files, strings.TrimPrefix(o.Key, dir+"/"))
	}
	return rows, files
}

// later is a clock two hours ahead, so archives just written are past the
// default grace period.
func later() time.Time { return time.Now().Add(2 * time.Hour) }

func TestPrune(t *testing.T) {
	day := func(n int) time.Time { return time.Date(2026, 11, n, 3, 0, 0, 0, time.UTC) }
	tests := []struct {
		name       string
		setup      func(t *testing.T, f fixture)
		opts       Options
		store      func(t *testing.T, f fixture) Store
		wantErr    string
		wantRows   string
		wantFiles  string
		wantReport func(t *testing.T, r Report)
		// wantManifests, when set, is the files in the server's manifest
		// folder after the prune.
		wantManifests string
	}{
		{
			name: "keep-last deletes the older rows, then their files",
			setup: func(t *testing.T, f fixture) {
				for i := 1; i <= 5; i++ {
					f.put(t, "s", fmt.Sprintf("r%d", i), day(i), true)
				}
				f.put(t, "other", "o1", day(1), true)
			},
			opts:      Options{Policy: retention.Policy{Last: 2, MinKeep: 1}},
			wantRows:  "[r4 r5]",
			wantFiles: "[r4.tar.zst r5.tar.zst]",
			wantReport: func(t *testing.T, r Report) {
				if r.RowsDeleted != 3 || r.FilesRemoved != 3 || r.BytesFreed != 3*int64(len("archive r1")) {
					t.Errorf("report %+v: want 3 rows, 3 files, %d bytes", r, 3*len("archive r1"))
				}
				if len(r.Runs) != 5 || r.Runs[0].RunID != "r5" || !r.Runs[0].Keep || r.Runs[4].Keep {
					t.Errorf("runs %+v: want newest first, r5 kept, r1 not", r.Runs)
				}
			},
		},
		{
			name: "min-keep is a floor",
			setup: func(t *testing.T, f fixture) {
				for i := 1; i <= 4; i++ {
					f.put(t, "s", fmt.Sprintf("r%d", i), day(i), true)
				}
			},
			opts:      Options{Policy: retention.Policy{Last: 1, MinKeep: 3}},
			wantRows:  "[r2 r3 r4]",
			wantFiles: "[r2.tar.zst r3.tar.zst r4.tar.zst]",
		},
		{
			name: "runs within the grace period stay",
			setup: func(t *testing.T, f fixture) {
				f.put(t, "s", "old", day(1), true)
				f.put(t, "s", "recent1", time.Now().Add(-10*time.Minute), true)
				f.put(t, "s", "recent2", time.Now().Add(-5*time.Minute), true)
			},
			opts:      Options{Policy: retention.Policy{Last: 1, MinKeep: 1}, Now: time.Now},
			wantRows:  "[recent1 recent2]",
			wantFiles: "[recent1.tar.zst recent2.tar.zst]",
			wantReport: func(t *testing.T, r Report) {
				if !strings.Contains(strings.Join(r.Runs[1].Reasons, ","), "grace") {
					t.Errorf("recent1's reasons %v: want the grace period", r.Runs[1].Reasons)
				}
			},
		},
		{
			name: "orphans past the grace period go, young ones and other files stay",
			setup: func(t *testing.T, f fixture) {
				f.put(t, "s", "r1", day(1), true)
				f.put(t, "s", "orphan", day(1), false)
				if _, err := f.st.Put(t.Context(), "s/notes.txt", func(w io.Writer) error { return nil }); err != nil {
					t.Fatal(err)
				}
			},
			opts:      Options{Policy: retention.Policy{Last: 5, MinKeep: 1}},
			wantRows:  "[r1]",
			wantFiles: "[notes.txt r1.tar.zst]",
			wantReport: func(t *testing.T, r Report) {
				if r.OrphansFound != 1 || !r.Orphans[0].Removed || r.BytesFreed != int64(len("archive orphan")) {
					t.Errorf("report %+v: want one orphan removed", r)
				}
			},
		},
		{
			// A chunked run whose insert failed and whose lookup could not
			// say whether its row exists keeps its manifest: this removes it.
			name: "an orphan manifest past the grace period goes, recorded and young ones stay",
			setup: func(t *testing.T, f fixture) {
				f.putManifest(t, "s", "c1", day(1), true)
				f.putManifest(t, "s", "orphan", day(1), false)
				f.put(t, "s", "r2", day(2), true)
			},
			opts:      Options{Policy: retention.Policy{Last: 5, MinKeep: 1}},
			wantRows:  "[c1 r2]",
			wantFiles: "[r2.tar.zst c1.manifest]",
			wantReport: func(t *testing.T, r Report) {
				if r.OrphansFound != 1 || !r.Orphans[0].Removed || r.Orphans[0].Ref != "/_chunked/runs/s/orphan.manifest" ||
					r.FilesRemoved != 1 || r.BytesFreed != int64(len("manifest orphan")) {
					t.Errorf("report %+v: want the orphan manifest removed", r)
				}
			},
		},
		{
			name: "a young orphan manifest stays: its run may be inserting the row",
			setup: func(t *testing.T, f fixture) {
				f.putManifest(t, "s", "c1", day(1), true)
				f.putManifest(t, "s", "inflight", day(1), false)
			},
			opts:      Options{Policy: retention.Policy{Last: 5, MinKeep: 1}, Now: time.Now},
			wantRows:  "[c1]",
			wantFiles: "[c1.manifest inflight.manifest]",
			wantReport: func(t *testing.T, r Report) {
				if r.OrphansFound != 1 || r.Orphans[0].Removed || !strings.Contains(r.Orphans[0].Reason, "a run may be recording it") {
					t.Errorf("orphans %+v: want one kept with its reason", r.Orphans)
				}
			},
		},
		{
			name: "a young orphan stays: its run may be inserting the row",
			setup: func(t *testing.T, f fixture) {
				f.put(t, "s", "r1", day(1), true)
				f.put(t, "s", "inflight", day(1), false)
			},
			opts:      Options{Policy: retention.Policy{Last: 5, MinKeep: 1}, Now: time.Now},
			wantRows:  "[r1]",
			wantFiles: "[inflight.tar.zst r1.tar.zst]",
			wantReport: func(t *testing.T, r Report) {
				if r.OrphansFound != 1 || r.Orphans[0].Removed || !strings.Contains(r.Orphans[0].Reason, "a run may be recording it") {
					t.Errorf("orphans %+v: want one kept with its reason", r.Orphans)
				}
			},
		},
		{
			name: "orphan manifests past the grace period go, other files in their folder stay",
			setup: func(t *testing.T, f fixture) {
				f.putManifest(t, "s", "c1", day(1), true)
				f.putManifest(t, "s", "lost", day(1), false) // killed between its manifest and its row
				f.putManifest(t, "other", "o1", day(1), false)
				if _, err := f.st.Put(t.Context(), "_chunked/runs/s/notes.txt", func(w io.Writer) error { return nil }); err != nil {
					t.Fatal(err)
				}
			},
			opts:          Options{Policy: retention.Policy{Last: 5, MinKeep: 1}},
			wantRows:      "[c1]",
			wantFiles:     "[c1.manifest notes.txt]",
			wantManifests: "[c1.manifest notes.txt]",
			wantReport: func(t *testing.T, r Report) {
				if r.OrphansFound != 1 || !r.Orphans[0].Removed || r.Orphans[0].Ref != "/_chunked/runs/s/lost.manifest" ||
					r.FilesRemoved != 1 || r.BytesFreed != int64(len("manifest lost")) {
					t.Errorf("report %+v: want lost.manifest removed as an orphan", r)
				}
			},
		},
		{
			// The prune waits for the run's lock, which the backup holds
			// until its row is in.
			name: "an orphan manifest whose run is recorded while the prune waits for its lock stays",
			setup: func(t *testing.T, f fixture) {
				f.putManifest(t, "s", "c1", day(1), true)
				f.putManifest(t, "s", "slow", day(1), false)
			},
			store: func(t *testing.T, f fixture) Store {
				return onLock{memRef: memRef{f.st}, key: jobapi.RunLockKey("s", "slow"), do: func() {
					f.insertManifestRow(t, "s", "slow", day(1))
				}}
			},
			opts:          Options{Policy: retention.Policy{Last: 5, MinKeep: 1}},
			wantRows:      "[c1 slow]",
			wantFiles:     "[c1.manifest slow.manifest]",
			wantManifests: "[c1.manifest slow.manifest]",
			wantReport: func(t *testing.T, r Report) {
				if r.OrphansFound != 1 || r.Orphans[0].Removed || r.Orphans[0].Reason != "recorded by a backup while pruned" {
					t.Errorf("orphans %+v: want slow's manifest kept, recorded while pruned", r.Orphans)
				}
			},
		},
		{
			name: "dry run changes nothing",
			setup: func(t *testing.T, f fixture) {
				for i := 1; i <= 3; i++ {
					f.put(t, "s", fmt.Sprintf("r%d", i), day(i), true)
				}
				f.put(t, "s", "orphan", day(1), false)
			},
			opts:      Options{Policy: retention.Policy{Last: 1, MinKeep: 1}, DryRun: true},
			wantRows:  "[r1 r2 r3]",
			wantFiles: "[orphan.tar.zst r1.tar.zst r2.tar.zst r3.tar.zst]",
			wantReport: func(t *testing.T, r Report) {
				if r.RowsDeleted != 0 || r.FilesRemoved != 0 || r.Runs[1].Keep || r.Runs[2].Keep || r.OrphansFound != 1 {
					t.Errorf("report %+v: want r1, r2 marked to go, nothing done", r)
				}
			},
		},
		{
			name: "a row whose archive is in another store stays",
			setup: func(t *testing.T, f fixture) {
				f.put(t, "s", "r1", day(1), true)
				f.put(t, "s", "r2", day(2), true)
			},
			store:     func(_ *testing.T, f fixture) Store { return otherRoot{f.st} },
			opts:      Options{Policy: retention.Policy{Last: 1, MinKeep: 1}},
			wantRows:  "[r1 r2]",
			wantFiles: "[r1.tar.zst r2.tar.zst]",
		},
		{
			// One server backs up to this store at 03:00 and to another
			// (sharing the catalog) at 23:00, which wins each day's bucket.
			name: "another store's runs take no bucket and no place of the floor",
			setup: func(t *testing.T, f fixture) {
				for i := 1; i <= 7; i++ {
					f.put(t, "s", fmt.Sprintf("here%d", i), day(i), true)
					f.putElsewhere(t, "s", fmt.Sprintf("there%d", i), day(i).Add(20*time.Hour))
				}
			},
			opts:      Options{Policy: retention.Policy{Daily: 3, MinKeep: 2}},
			wantRows:  "[there1 there2 there3 there4 here5 there5 here6 there6 here7 there7]",
			wantFiles: "[here5.tar.zst here6.tar.zst here7.tar.zst]",
			wantReport: func(t *testing.T, r Report) {
				for _, run := range r.Runs {
					if strings.HasPrefix(run.RunID, "there") && (!run.Keep || !slices.Equal(run.Reasons, []string{"archive is not in this store: not judged here"})) {
						t.Errorf("%s kept %v for %v: want kept, not judged here", run.RunID, run.Keep, run.Reasons)
					}
				}
			},
		},
		{
			// The newest two are gone (a lifecycle rule, a volume rolled
			// back): the floor and the rules count the archives left.
			name: "rows whose archives are gone stay and take no place of the rules or the floor",
			setup: func(t *testing.T, f fixture) {
				for i := 1; i <= 4; i++ {
					f.put(t, "s", fmt.Sprintf("r%d", i), day(i), true)
				}
				for _, id := range []string{"r3", "r4"} {
					if err := f.st.Remove(t.Context(), "s/"+id+".tar.zst"); err != nil {
						t.Fatal(err)
					}
				}
			},
			opts:      Options{Policy: retention.Policy{Last: 1, MinKeep: 1}},
			wantRows:  "[r2 r3 r4]",
			wantFiles: "[r2.tar.zst]",
			wantReport: func(t *testing.T, r Report) {
				if r.ArchivesMissing != 2 || r.RowsDeleted != 1 || r.FilesRemoved != 1 || r.FilesMissing != 0 {
					t.Errorf("report %+v: want 2 archives missing, r1's row and file removed", r)
				}
				for _, run := range r.Runs {
					want := map[string]string{"r4": "archive is missing from the store: not judged",
						"r3": "archive is missing from the store: not judged", "r2": "newest run"}[run.RunID]
					if want != "" && (!run.Keep || !slices.Contains(run.Reasons, want)) {
						t.Errorf("%s kept %v for %v: want kept for %q", run.RunID, run.Keep, run.Reasons, want)
					}
				}
			},
		},
		{
			// A backup's retry that found its row (its first attempt lost
			// the commit's answer and removed its archive) prunes at once.
			name: "a row within the grace period whose archive is gone takes no place of the floor",
			setup: func(t *testing.T, f fixture) {
				f.put(t, "s", "r1", day(1), true)
				f.put(t, "s", "r2", day(2), true)
				f.put(t, "s", "fresh", time.Now().Add(-time.Minute), true)
				if err := f.st.Remove(t.Context(), "s/fresh.tar.zst"); err != nil {
					t.Fatal(err)
				}
			},
			opts:      Options{Policy: retention.Policy{Last: 1, MinKeep: 1}, Now: time.Now},
			wantRows:  "[r2 fresh]",
			wantFiles: "[r2.tar.zst]",
			wantReport: func(t *testing.T, r Report) {
				if r.ArchivesMissing != 1 || r.RowsDeleted != 1 {
					t.Errorf("report %+v: want 1 archive missing, 1 row deleted", r)
				}
			},
		},
		{
			name: "archives gone after the prune listed them: rows deleted, files reported missing, nothing freed",
			setup: func(t *testing.T, f fixture) {
				for i := 1; i <= 4; i++ {
					f.put(t, "s", fmt.Sprintf("r%d", i), day(i), true)
				}
			},
			store: func(t *testing.T, f fixture) Store {
				return &afterListing{memRef: memRef{f.st}, dir: "s", t: t, do: func(t *testing.T) {
					for _, id := range []string{"r1", "r2"} {
						if err := f.st.Remove(t.Context(), "s/"+id+".tar.zst"); err != nil {
							t.Fatal(err)
						}
					}
				}}
			},
			opts:      Options{Policy: retention.Policy{Last: 1, MinKeep: 1}},
			wantRows:  "[r4]",
			wantFiles: "[r4.tar.zst]",
			wantReport: func(t *testing.T, r Report) {
				if r.RowsDeleted != 3 || r.FilesRemoved != 1 || r.FilesMissing != 2 || r.BytesFreed != int64(len("archive r3")) ||
					r.ArchivesMissing != 0 {
					t.Errorf("report %+v: want 3 rows deleted, 1 file removed (r3), 2 missing, %d bytes freed", r, len("archive r3"))
				}
			},
		},
		{
			name: "bytes freed are the removed files' sizes, not the rows'",
			setup: func(t *testing.T, f fixture) {
				f.put(t, "s", "r1", day(1), true)
				f.put(t, "s", "r2", day(2), true)
				// r1's file was replaced by a shorter one.
				if _, err := f.st.Put(t.Context(), "s/r1.tar.zst", func(w io.Writer) error { _, err := io.WriteString(w, "x"); return err }); err != nil {
					t.Fatal(err)
				}
			},
			opts:      Options{Policy: retention.Policy{Last: 1, MinKeep: 1}},
			wantRows:  "[r2]",
			wantFiles: "[r2.tar.zst]",
			wantReport: func(t *testing.T, r Report) {
				if r.FilesRemoved != 1 || r.FilesMissing != 0 || r.BytesFreed != 1 {
					t.Errorf("report %+v: want 1 file of 1 byte removed", r)
				}
			},
		},
		{
			name:    "an invalid policy is refused",
			opts:    Options{Policy: retention.Policy{MinKeep: 1}},
			wantErr: "no keep rule",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			if tt.setup != nil {
				tt.setup(t, f)
			}
			var st Store = memRef{f.st}
			if tt.store != nil {
				st = tt.store(t, f)
			}
			opts := tt.opts
			opts.Server = "s"
			if opts.Now == nil {
				opts.Now = later
			}
			rep, err := Prune(t.Context(), f.db, st, opts, hclog.NewNullLogger())
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Prune: %v", err)
			}
			rows, files := f.state(t, "s")
			if fmt.Sprint(rows) != tt.wantRows || fmt.Sprint(files) != tt.wantFiles {
				t.Fatalf("after prune rows %v files %v; want rows %s files %s", rows, files, tt.wantRows, tt.wantFiles)
			}
			if got := fmt.Sprint(f.manifests(t, "s")); tt.wantManifests != "" && got != tt.wantManifests {
				t.Fatalf("after prune manifests %s; want %s", got, tt.wantManifests)
			}
			if tt.wantReport != nil {
				tt.wantReport(t, rep)
			}
			// A prune that ran for real is recorded with what it did; a
			// dry run is not.
			evs, err := f.db.PrunesAfter(t.Context(), 0, 10)
			switch {
			case err != nil:
				t.Fatal(err)
			case opts.DryRun && len(evs) != 0:
				t.Errorf("a dry run recorded %+v", evs)
			case !opts.DryRun && (len(evs) != 1 || evs[0].Server != "s" || evs[0].RunsDeleted != int64(rep.RowsDeleted) || evs[0].BytesFreed != rep.BytesFreed):
				t.Errorf("recorded prunes %+v, want one of s with the report's %d runs and %d bytes", evs, rep.RowsDeleted, rep.BytesFreed)
			}
		})
	}
}

// onLock is a store that runs do when the lock key is asked for, before it
// is taken: a backup holding the lock that records its run meanwhile.
type onLock struct {
	memRef
	key string
	do  func()
}

func (o onLock) Lock(ctx context.Context, key string) (func(), error) {
	if key == o.key {
		o.do()
	}
	return o.memRef.Lock(ctx, key)
}

// afterListing is a store that runs do once, right after its first listing
// of dir: what happens between the prune's listing and its reading the rows.
type afterListing struct {
	memRef
	dir  string
	do   func(t *testing.T)
	t    *testing.T
	done bool
}

func (a *afterListing) List(ctx context.Context, dir string) ([]store.Object, error) {
	objs, err := a.memRef.List(ctx, dir)
	if dir == a.dir && !a.done {
		a.done = true
		a.do(a.t)
	}
	return objs, err
}

// TestPruneRunRecordedAfterTheListing: a backup commits its archive after
// the prune listed the store and records its row before the prune reads
// the rows. Its run is judged as any other, the newest, and is not
// reported missing.
func TestPruneRunRecordedAfterTheListing(t *testing.T) {
	f := newFixture(t)
	for i := 1; i <= 3; i++ {
		f.put(t, "s", fmt.Sprintf("r%d", i), time.Now().AddDate(0, 0, -i), true)
	}
	st := &afterListing{memRef: memRef{f.st}, dir: "s", t: t, do: func(t *testing.T) {
		f.put(t, "s", "late", time.Now(), true)
	}}
	rep, err := Prune(t.Context(), f.db, st, Options{Server: "s", Policy: retention.Policy{Last: 1, MinKeep: 1}},
		hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	if !st.done {
		t.Fatal("the store was never listed")
	}
	rows, files := f.state(t, "s")
	if fmt.Sprint(rows) != "[late]" || fmt.Sprint(files) != "[late.tar.zst]" {
		t.Errorf("rows %v, files %v: want only late's (the newest run; r1 to r3 gone)", rows, files)
	}
	if rep.ArchivesMissing != 0 || len(rep.Runs) == 0 || rep.Runs[0].RunID != "late" || !slices.Contains(rep.Runs[0].Reasons, "newest run") {
		var got []string
		for _, r := range rep.Runs {
			got = append(got, fmt.Sprintf("%s %v", r.RunID, r.Reasons))
		}
		t.Errorf("runs %v, %d archives missing: want late judged the newest run, none missing", got, rep.ArchivesMissing)
	}
}

// otherRoot is the store seen under another root: no row's ref is its.
type otherRoot struct{ *store.Mem }

func (o otherRoot) Ref(key string) string { return "/elsewhere/" + key }

// failingRemove fails every Remove, as a crash after the rows' commit
// would leave the files.
type failingRemove struct{ memRef }

func (failingRemove) Remove(context.Context, string) error { return errors.New("disk gone") }

func TestPruneCrashBetweenRowsAndFiles(t *testing.T) {
	f := newFixture(t)
	for i := 1; i <= 3; i++ {
		f.put(t, "s", fmt.Sprintf("r%d", i), time.Date(2026, 11, i, 0, 0, 0, 0, time.UTC), true)
	}
	opts := Options{Server: "s", Policy: retention.Policy{Last: 1, MinKeep: 1}, Now: later}
	rep, err := Prune(t.Context(), f.db, failingRemove{memRef{f.st}}, opts, hclog.NewNullLogger())
	if err == nil || !strings.Contains(err.Error(), "could not be removed") || rep.RowsDeleted != 2 {
		t.Fatalf("Prune = %+v, %v; want 2 rows deleted and an error about the files", rep, err)
	}
	rows, files := f.state(t, "s")
	if fmt.Sprint(rows) != "[r3]" || len(files) != 3 {
		t.Fatalf("rows %v files %v: want [r3] and the 3 files (rows first, then files)", rows, files)
	}
	rep, err = Prune(t.Context(), f.db, memRef{f.st}, opts, hclog.NewNullLogger())
	if err != nil || rep.OrphansFound != 2 || rep.FilesRemoved != 2 {
		t.Fatalf("second Prune = %+v, %v; want the 2 orphans removed", rep, err)
	}
	if rows, files := f.state(t, "s"); fmt.Sprint(rows) != "[r3]" || fmt.Sprint(files) != "[r3.tar.zst]" {
		t.Fatalf("after the second prune rows %v files %v", rows, files)
	}
}

// TestPruneChunkedRuns: an expired chunked run loses its row and its
// manifest; the packs its blobs are in stay (later runs share them).
func TestPruneChunkedRuns(t *testing.T) {
	f := newFixture(t)
	st := memRef{f.st}
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	pack := "_chunked/packs/ab/" + strings.Repeat("ab", 32)
	if _, err := f.st.Put(t.Context(), pack, func(w io.Writer) error { _, err := io.WriteString(w, "pack"); return err }); err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"c1", "c2", "c3"} {
		key := "_chunked/runs/s/" + id + ".manifest"
		if _, err := f.st.Put(t.Context(), key, func(w io.Writer) error { _, err := io.WriteString(w, id); return err }); err != nil {
			t.Fatal(err)
		}
		added := int64(4)
		fin := now.Add(time.Duration(i-3) * 24 * time.Hour)
		f.insert(t, catalog.Record{RunID: id, Server: "s", ArchiveRef: "/" + key, SizeBytes: 1000,
			SHA256: strings.Repeat("0", 64), Compression: "zstd", StartedAt: fin.Add(-time.Minute), FinishedAt: fin,
			Format: "chunked", AddedBytes: &added})
	}
	rep, err := Prune(t.Context(), f.db, st, Options{Server: "s", Policy: retention.Policy{MinKeep: 1, Last: 1},
		Now: func() time.Time { return now }}, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	if rep.RowsDeleted != 2 || rep.FilesRemoved != 2 {
		t.Errorf("report %+v: want 2 rows and 2 manifests removed", rep)
	}
	if rows, _ := f.state(t, "s"); len(rows) != 1 || rows[0] != "c3" {
		t.Errorf("rows %v, want [c3]", rows)
	}
	for key, want := range map[string]bool{"_chunked/runs/s/c1.manifest": false, "_chunked/runs/s/c2.manifest": false,
		"_chunked/runs/s/c3.manifest": true, pack: true} {
		if _, ok := f.st.Bytes(key); ok != want {
			t.Errorf("%s present %v, want %v", key, ok, want)
		}
	}
}
