package catalog

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/worldbackup/worldbackup/internal/pgtest"
	"github.com/worldbackup/worldbackup/jobapi"
)

// TestNamespaces: the runs of a server named survival recorded from the
// namespaces a and b and without one (legacy). The queries a namespace's
// Jobs make see its own runs and those without a namespace; "" sees every
// run; a run ID is looked up whatever namespace recorded it.
func TestNamespaces(t *testing.T) {
	db := migrated(t)
	ctx := t.Context()
	now := time.Now()
	for i, r := range []struct{ id, ns string }{{"legacy", ""}, {"a1", "a"}, {"b1", "b"}, {"a2", "a"}} {
		rec := record(r.id, "survival", now.Add(time.Duration(i-10)*time.Minute))
		rec.Namespace = r.ns
		if _, err := db.InsertChunked(ctx, rec, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		ns           string
		newest       string // NewestRuns, newest first
		latest, base string // Resolve's latest, LatestChunked
	}{
		{ns: "a", newest: "a2 a1 legacy", latest: "a2", base: "a2"},
		{ns: "b", newest: "b1 legacy", latest: "b1", base: "b1"},
		{ns: "c", newest: "legacy", latest: "legacy", base: "legacy"},
		{ns: "", newest: "a2 b1 a1 legacy", latest: "a2", base: "a2"},
	} {
		t.Run(fmt.Sprintf("namespace %q", tt.ns), func(t *testing.T) {
			rs, err := db.NewestRuns(ctx, "survival", tt.ns, 0)
			var ids []string
			for _, r := range rs {
				ids = append(ids, r.RunID)
				if !r.In(tt.ns) {
					t.Errorf("NewestRuns gave %s of namespace %q, which Record.In says %q does not see", r.RunID, r.Namespace, tt.ns)
				}
			}
			if err != nil || strings.Join(ids, " ") != tt.newest {
				t.Errorf("NewestRuns = %v, %v; want %s", ids, err, tt.newest)
			}
			if r, err := db.Resolve(ctx, "survival", tt.ns, jobapi.RunLatest, now); err != nil || r.RunID != tt.latest {
				t.Errorf("Resolve latest = %q, %v; want %s", r.RunID, err, tt.latest)
			}
			if r, err := db.LatestChunked(ctx, "survival", tt.ns, func(Record) bool { return true }); err != nil || r.RunID != tt.base {
				t.Errorf("LatestChunked = %q, %v; want %s", r.RunID, err, tt.base)
			}
			if r, err := db.Resolve(ctx, "survival", tt.ns, "b1", now); err != nil || r.RunID != "b1" || r.Namespace != "b" {
				t.Errorf("Resolve b1 = %+v, %v; want b1 of namespace b, whatever the namespace asking", r, err)
			}
		})
	}
	t.Run("failed attempts", func(t *testing.T) {
		for _, ns := range []string{"a", "b", ""} {
			if err := db.RecordFailure(ctx, Failure{RunID: "f-" + ns, Server: "survival", Namespace: ns, StartedAt: now, FinishedAt: now, Reason: "x"}); err != nil {
				t.Fatal(err)
			}
		}
		for ns, want := range map[string]string{"a": "f- f-a", "b": "f- f-b", "": "f- f-a f-b"} {
			fs, err := db.Failures(ctx, "survival", ns, 0)
			var ids []string
			for _, f := range fs {
				ids = append(ids, f.RunID)
				if f.RunID != "f-"+f.Namespace {
					t.Errorf("failure %s recorded namespace %q", f.RunID, f.Namespace)
				}
			}
			slices.Sort(ids)
			if err != nil || strings.Join(ids, " ") != want {
				t.Errorf("Failures for namespace %q = %v, %v; want %s", ns, ids, err, want)
			}
		}
	})
	t.Run("a namespace without runs", func(t *testing.T) {
		if _, err := db.Resolve(ctx, "other", "a", jobapi.RunLatest, now); !errors.Is(err, ErrNoRun) || !strings.Contains(err.Error(), `namespace "a"`) {
			t.Errorf("Resolve latest of a server without runs = %v, want ErrNoRun naming the namespace", err)
		}
	})
	t.Run("an invalid namespace is refused", func(t *testing.T) {
		rec := record("bad", "survival", now)
		rec.Namespace = "Not_A_Label"
		if _, err := db.Insert(ctx, rec); err == nil || !strings.Contains(err.Error(), "world_backups_namespace_check") {
			t.Errorf("Insert of namespace %q = %v, want the constraint's error", rec.Namespace, err)
		}
	})
}

// TestNamespaceBeforeMigration: an archiver newer than its catalog (the
// exporter, a restore's resolve or a prune before any backup has applied
// migration 0009) reads it, with every run seen by every namespace as a
// run recorded without one; once migrated, the same answers.
func TestNamespaceBeforeMigration(t *testing.T) {
	db := open(t, pgtest.URL(t))
	ctx := t.Context()
	behind := fstest.MapFS{}
	if err := fs.WalkDir(migrationFS, "migrations", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasPrefix(d.Name(), "0009_") {
			return err
		}
		b, err := fs.ReadFile(migrationFS, p)
		behind[p] = &fstest.MapFile{Data: b}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if applied, err := db.migrate(ctx, behind); err != nil || len(applied) != 8 {
		t.Fatalf("migrating up to 0008: %v, %v", applied, err)
	}
	now := time.Now()
	if _, err := db.pool.Exec(ctx, `INSERT INTO world_backups (run_id, server, archive_ref, size_bytes, sha256, compression,
		file_count, started_at, finished_at, format) VALUES ('r1', 'survival', '/backups/survival/r1', 1, $1, 'zstd', 1, $2, $2, 'chunked')`,
		strings.Repeat("ab", 32), now.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	check := func(t *testing.T) {
		t.Helper()
		if r, err := db.Resolve(ctx, "survival", "a", jobapi.RunLatest, now); err != nil || r.RunID != "r1" || r.Namespace != "" {
			t.Errorf("Resolve latest = %+v, %v; want r1 without a namespace", r, err)
		}
		if rs, err := db.NewestRuns(ctx, "survival", "a", 0); err != nil || len(rs) != 1 {
			t.Errorf("NewestRuns = %d runs, %v; want r1", len(rs), err)
		}
		if r, err := db.LatestChunked(ctx, "survival", "a", func(Record) bool { return true }); err != nil || r.RunID != "r1" {
			t.Errorf("LatestChunked = %q, %v; want r1", r.RunID, err)
		}
		if _, err := db.Overview(ctx, now, 5, 5, nil); err != nil {
			t.Errorf("Overview: %v", err)
		}
		if _, err := db.Failures(ctx, "survival", "a", 0); err != nil {
			t.Errorf("Failures: %v", err)
		}
		deleted, err := db.PruneServer(ctx, "survival", func(rs []Record) ([]string, error) { return nil, nil })
		if err != nil || len(deleted) != 0 {
			t.Errorf("PruneServer = %v, %v", deleted, err)
		}
	}
	t.Run("one migration behind", check)
	if applied, err := db.Migrate(ctx); err != nil || fmt.Sprint(applied) != "[0009_run_namespace]" {
		t.Fatalf("Migrate = %v, %v; want [0009_run_namespace]", applied, err)
	}
	t.Run("migrated", check)
}
