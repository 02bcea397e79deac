package main

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/worldbackup/worldbackup/internal/pgtest"
	"github.com/worldbackup/worldbackup/jobapi"
)

// logField returns field of the log line whose message is msg in a JSON
// log, failing the test when no line or several have that message.
func logField(t *testing.T, stderr, msg, field string) any {
	t.Helper()
	var found []any
	for line := range strings.SplitSeq(stderr, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil || m["@message"] != msg {
			continue
		}
		found = append(found, m[field])
	}
	if len(found) != 1 {
		t.Fatalf("the log has %d lines %q, want one:\n%s", len(found), msg, stderr)
	}
	return found[0]
}

// namespaces returns each run's recorded namespace ("" for NULL).
func namespaces(t *testing.T, url string) map[string]string {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rs, _ := conn.Query(t.Context(), `SELECT run_id, coalesce(namespace, '') FROM world_backups`)
	out := map[string]string{}
	var id, ns string
	if _, err := pgx.ForEachRow(rs, []any{&id, &ns}, func() error { out[id] = ns; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestNamespacesShareACatalog: two servers named survival, in the
// namespaces a and b, record into one catalog and write into one store (a
// bucket both use; here one folder). A run's row carries its namespace. Each
// server's prune judges its own runs only, its restore of latest finds its
// own newest run, and its chunked runs build on its own previous run; a run
// ID one of them recorded is refused to the other (exit 2) without touching
// the store, where it used to be taken as already done. A run recorded
// without --namespace (by hand, or before migration 0009) is every
// namespace's. Without the namespace, b's prune deletes a's runs and a's
// latest is b's world.
func TestNamespacesShareACatalog(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateWorld(t, e.world)
	worldB := filepath.Join(t.TempDir(), "world")
	generateWorld(t, worldB)
	if err := os.WriteFile(filepath.Join(worldB, "only-in-b.txt"), []byte("b"), 0o644); err != nil {
		t.Fatal(err)
	}
	backup := func(ns, runID string, extra ...string) result {
		world := e.world
		if ns == "b" {
			world = worldB
		}
		args := e.backupArgs(runID, append([]string{"--world", world}, extra...)...)
		if ns != "" {
			args = append(args, "--namespace", ns)
		}
		return archiver(t, args...)
	}
	mustBackup := func(ns, runID string, extra ...string) result {
		t.Helper()
		r := backup(ns, runID, extra...)
		if r.code != 0 {
			t.Fatalf("backup %s in namespace %q: exit %d: %s", runID, ns, r.code, r.stderr)
		}
		return r
	}
	mustBackup("", "old", "--format", "tar") // recorded without a namespace
	for _, run := range []struct{ ns, id string }{{"a", "a1"}, {"a", "a2"}, {"b", "b1"}, {"b", "b2"}} {
		mustBackup(run.ns, run.id, "--format", "tar")
	}
	ids := []string{"old", "a1", "a2", "b1", "b2"}
	backdate(t, e, ids, 2*time.Hour)
	if got, want := namespaces(t, e.url), map[string]string{"old": "", "a1": "a", "a2": "a", "b1": "b", "b2": "b"}; !maps.Equal(got, want) {
		t.Fatalf("recorded namespaces %v, want %v", got, want)
	}

	t.Run("a run ID of the other namespace is refused", func(t *testing.T) {
		before := files(t, filepath.Join(e.root, "survival"))
		a2, err := os.ReadFile(e.archivePath("a2", ".tar.zst"))
		if err != nil {
			t.Fatal(err)
		}
		r := backup("b", "a2", "--format", "tar")
		said := strings.ReplaceAll(r.stderr, `\"`, `"`) // the JSON log's quotes
		if r.code != exitUsage || !strings.Contains(said, `already recorded for server "survival" of namespace "a", not of namespace "b"`) {
			t.Fatalf("b's backup of a's run ID: exit %d, want %d naming both namespaces:\n%s", r.code, exitUsage, r.stderr)
		}
		after, err := os.ReadFile(e.archivePath("a2", ".tar.zst"))
		if err != nil || string(after) != string(a2) || !slices.Equal(files(t, filepath.Join(e.root, "survival")), before) {
			t.Fatalf("the refused run changed the store (err %v)", err)
		}
		if r := backup("a", "a2", "--format", "tar"); r.code != 0 || summary(t, e.tlog)["status"] != "already-recorded" {
			t.Fatalf("a's rerun of its run: exit %d, %v: %s", r.code, summary(t, e.tlog), r.stderr)
		}
		if r := backup("b", "old", "--format", "tar"); r.code != 0 || summary(t, e.tlog)["status"] != "already-recorded" {
			t.Fatalf("a run recorded without a namespace is every namespace's: exit %d, %v: %s", r.code, summary(t, e.tlog), r.stderr)
		}
	})

	t.Run("latest is the namespace's own newest run", func(t *testing.T) {
		for _, tt := range []struct{ ns, want string }{{"a", "a2"}, {"b", "b2"}, {"c", "old"}, {"", "b2"}} {
			args := []string{"resolve", "--server", "survival", "--from-run", jobapi.RunLatest, "--config", e.config}
			if tt.ns != "" {
				args = append(args, "--namespace", tt.ns)
			}
			r := archiver(t, args...)
			var got jobapi.ResolvedRun
			if r.code != 0 || json.Unmarshal([]byte(r.stdout), &got) != nil || got.RunID != tt.want {
				t.Errorf("latest for namespace %q: exit %d, %q, want %s:\n%s", tt.ns, r.code, r.stdout, tt.want, r.stderr)
			}
		}
		// A run ID is found whatever namespace recorded it (a fleet move).
		r := archiver(t, "resolve", "--server", "survival", "--from-run", "a1", "--namespace", "b", "--config", e.config)
		if r.code != 0 || !strings.Contains(r.stdout, `"run_id":"a1"`) {
			t.Errorf("a's run by its ID from namespace b: exit %d, %q:\n%s", r.code, r.stdout, r.stderr)
		}
		if r := archiver(t, "resolve", "--server", "survival", "--from-run", "latest", "--namespace", "B", "--config", e.config); r.code != exitUsage ||
			!strings.Contains(r.stderr, "namespace") {
			t.Errorf("an invalid namespace: exit %d, want %d naming it:\n%s", r.code, exitUsage, r.stderr)
		}
	})

	t.Run("a prune judges its namespace's runs", func(t *testing.T) {
		r := archiver(t, "prune", "--server", "survival", "--namespace", "b", "--config", e.config, "--archive-root", e.root,
			"--log-format", "json", "--termination-log", e.tlog, "--keep-last", "1", "--min-keep", "1", "--json")
		if r.code != 0 {
			t.Fatalf("b's prune: exit %d:\n%s", r.code, r.stderr)
		}
		var rep struct {
			OrphansFound int `json:"orphans_found"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || rep.OrphansFound != 0 {
			t.Errorf("b's prune found %d orphans (err %v), want 0: a's archives have rows", rep.OrphansFound, err)
		}
		var got []string
		for _, row := range rows(t, e.url) {
			got = append(got, row.RunID)
		}
		// b keeps its newest; old, a run without a namespace, is b's too
		// and goes with b1.
		if want := []string{"a1", "a2", "b2"}; !slices.Equal(got, want) {
			t.Fatalf("rows after b's prune: %v, want %v", got, want)
		}
		if want := []string{"a1.tar.zst", "a2.tar.zst", "b2.tar.zst"}; !slices.Equal(files(t, filepath.Join(e.root, "survival")), want) {
			t.Fatalf("archives after b's prune: %v, want %v", files(t, filepath.Join(e.root, "survival")), want)
		}
	})

	t.Run("list names each run's and attempt's namespace", func(t *testing.T) {
		for _, tt := range []struct{ ns, want string }{
			{"a", "a2 a1"},
			{"b", "b2 a2:failed"}, // b's refused attempt of a2
			{"", "b2 a2 a1 a2:failed"},
		} {
			args := []string{"list", "--server", "survival", "--config", e.config, "--json"}
			if tt.ns != "" {
				args = append(args, "--namespace", tt.ns)
			}
			r := archiver(t, args...)
			var entries []struct {
				RunID     string `json:"run_id"`
				Namespace string `json:"namespace"`
				Status    string `json:"status"`
			}
			if r.code != 0 || json.Unmarshal([]byte(r.stdout), &entries) != nil {
				t.Fatalf("list for namespace %q: exit %d, %q:\n%s", tt.ns, r.code, r.stdout, r.stderr)
			}
			var got []string
			for _, en := range entries {
				want := map[string]string{"a1": "a", "a2": "a", "b2": "b"}[en.RunID]
				if en.Status == "failed" {
					want = "b"
					en.RunID += ":failed"
				}
				if en.Namespace != want {
					t.Errorf("list for namespace %q: %s of namespace %q, want %q", tt.ns, en.RunID, en.Namespace, want)
				}
				got = append(got, en.RunID)
			}
			slices.Sort(got)
			want := strings.Fields(tt.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("list for namespace %q: %v, want %v", tt.ns, got, want)
			}
		}
	})

	t.Run("a chunked run builds on its namespace's previous run", func(t *testing.T) {
		first := mustBackup("a", "ca1")
		if got := logField(t, first.stderr, "backup started", "previous_run"); got != "" {
			t.Errorf("a's first chunked run builds on %v, want nothing", got)
		}
		for _, tt := range []struct{ ns, id, want string }{{"b", "cb1", ""}, {"a", "ca2", "ca1"}, {"b", "cb2", "cb1"}} {
			r := mustBackup(tt.ns, tt.id)
			if got := logField(t, r.stderr, "backup started", "previous_run"); got != tt.want {
				t.Errorf("%s in namespace %s builds on %q, want %q", tt.id, tt.ns, got, tt.want)
			}
		}
	})
}
