package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/worldbackup/worldbackup/internal/pgtest"
)

// TestBackupRunIDOfAnotherServer: a run ID recorded for another server can
// never be recorded for this one: exit 2, naming the server that has it.
func TestBackupRunIDOfAnotherServer(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateWorld(t, e.world)
	if r := archiver(t, e.backupArgs("shared-1")...); r.code != 0 {
		t.Fatalf("backup: exit %d: %s", r.code, r.stderr)
	}
	args := e.backupArgs("shared-1")
	args[slices.Index(args, "survival")] = "creative"
	r := archiver(t, args...)
	if r.code != 2 || !strings.Contains(r.stderr, `already recorded for server \"survival\"`) {
		t.Fatalf("backup of another server: exit %d, stderr %s; want 2 naming server survival", r.code, r.stderr)
	}
	if s := summary(t, e.tlog); s["status"] != "failed" {
		t.Fatalf("termination message %v: want failed", s)
	}
}

// shiftRun moves run runID's times by d (forward when positive), as a node
// with a wrong clock records them.
func shiftRun(t *testing.T, url, runID string, d time.Duration) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	tag, err := conn.Exec(t.Context(), `UPDATE world_backups SET started_at = started_at + $2::interval,
		finished_at = finished_at + $2::interval WHERE run_id = $1`, runID, fmt.Sprintf("%d seconds", int(d.Seconds())))
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("shifting run %s: %v, %d rows", runID, err, tag.RowsAffected())
	}
}

// TestStatusEmptyCatalog: a catalog without runs is stale, asked about no
// server in particular or about named ones; its JSON is an array.
func TestStatusEmptyCatalog(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	if r := archiver(t, "migrate", "--config", e.config); r.code != 0 {
		t.Fatalf("migrate: exit %d: %s", r.code, r.stderr)
	}
	status := func(extra ...string) result {
		return archiver(t, append([]string{"status", "--config", e.config, "--log-format", "json", "--max-age", "26h"}, extra...)...)
	}
	if r := status(); r.code != 1 || !strings.Contains(r.stdout, "STALE: the catalog holds no run") {
		t.Errorf("empty catalog: exit %d\nstdout:\n%s\nstderr:\n%s\nwant 1 and a line saying no server has a run", r.code, r.stdout, r.stderr)
	}
	if r := status("--json"); r.code != 1 || strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("empty catalog, --json: exit %d, stdout %q; want 1 and []", r.code, r.stdout)
	}
	r := status("--json", "--server", "lobby", "--server", "survival")
	var st []serverStatus
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || r.code != 1 || len(st) != 2 || st[0].OK || st[1].OK {
		t.Errorf("named servers on an empty catalog: exit %d, %+v, %v; want 1 and both stale", r.code, st, err)
	}
}

// TestStatusRunFinishedInTheFuture: a row finished a year ahead (a node
// with a wrong clock) is not fresh: the newest real run is judged, and the
// log names the anomalous run.
func TestStatusRunFinishedInTheFuture(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateWorld(t, e.world)
	for _, id := range []string{"real", "skewed"} {
		if r := archiver(t, e.backupArgs(id)...); r.code != 0 {
			t.Fatalf("backup %s: exit %d: %s", id, r.code, r.stderr)
		}
	}
	shiftRun(t, e.url, "real", -30*time.Hour)
	shiftRun(t, e.url, "skewed", 365*24*time.Hour)
	r := archiver(t, "status", "--config", e.config, "--log-format", "json", "--max-age", "26h", "--json")
	var st []serverStatus
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || len(st) != 1 {
		t.Fatalf("status: exit %d, stdout %s, %v", r.code, r.stdout, err)
	}
	if r.code != 1 || st[0].OK || st[0].NewestRun != "real" || st[0].AgeSeconds < 29*3600 {
		t.Errorf("status exit %d, %+v: want 1, stale, judged by run real, 30h old", r.code, st[0])
	}
	if !strings.Contains(r.stderr, "skewed") || !strings.Contains(r.stderr, "future") {
		t.Errorf("log %s: want a warning naming run skewed as finished in the future", r.stderr)
	}
	// Only the skewed run: no real run, stale.
	shiftRun(t, e.url, "real", 365*24*time.Hour)
	r = archiver(t, "status", "--config", e.config, "--log-format", "json", "--max-age", "26h")
	if r.code != 1 || !strings.Contains(r.stdout, "STALE") {
		t.Errorf("only runs in the future: exit %d\n%s%s\nwant 1, stale", r.code, r.stdout, r.stderr)
	}
}

// TestPruneRunFinishedInTheFuture: `prune --keep-within 30d` with one row
// finished a year ahead keeps the real runs of the last days, and warns
// naming the skewed run.
func TestPruneRunFinishedInTheFuture(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateWorld(t, e.world)
	ids := []string{"r1", "r2", "r3", "skewed"}
	e.tarBackups(t, ids...)
	backdate(t, e, ids[:3], 2*time.Hour) // 1 to 3 days old
	shiftRun(t, e.url, "skewed", 365*24*time.Hour)
	r := archiver(t, "prune", "--server", "survival", "--config", e.config, "--archive-root", e.root,
		"--log-format", "json", "--termination-log", e.tlog, "--keep-within", "30d", "--min-keep", "1")
	if r.code != 0 {
		t.Fatalf("prune: exit %d: %s", r.code, r.stderr)
	}
	if n := len(rows(t, e.url)); n != 4 {
		t.Errorf("%d rows after the prune: want all 4 (3 real runs within 30 days, and the skewed one)\n%s", n, r.stdout)
	}
	if !strings.Contains(r.stderr, "skewed") || !strings.Contains(r.stderr, "future") {
		t.Errorf("log %s: want a warning naming run skewed", r.stderr)
	}
}

// TestStatusCountsNoMissingArchive: once a prune found a run's archive gone
// from the store, status judges the newest run it holds (and warns naming
// the missing one), list shows the run as missing, and a server whose every
// archive is gone is stale.
func TestStatusCountsNoMissingArchive(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateWorld(t, e.world)
	e.tarBackups(t, "old", "new")
	shiftRun(t, e.url, "old", -2*time.Hour)
	prune := func(t *testing.T) {
		t.Helper()
		r := archiver(t, "prune", "--server", "survival", "--config", e.config, "--archive-root", e.root,
			"--log-format", "json", "--keep-last", "5", "--min-keep", "1")
		if r.code != 0 {
			t.Fatalf("prune: exit %d: %s", r.code, r.stderr)
		}
	}
	status := func(t *testing.T, extra ...string) (result, []serverStatus) {
		t.Helper()
		r := archiver(t, append([]string{"status", "--config", e.config, "--log-format", "json", "--max-age", "26h"}, extra...)...)
		var st []serverStatus
		if slices.Contains(extra, "--json") {
			if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || len(st) != 1 {
				t.Fatalf("status: exit %d, stdout %s, %v", r.code, r.stdout, err)
			}
		}
		return r, st
	}
	if err := os.Remove(e.archivePath("new", ".tar.zst")); err != nil {
		t.Fatal(err)
	}
	if r, st := status(t, "--json"); r.code != 0 || st[0].NewestRun != "new" || st[0].ArchivesMissing != 0 {
		t.Fatalf("before a prune looked: exit %d, %+v; want 0, new (the catalog does not know yet)", r.code, st[0])
	}
	prune(t)

	t.Run("the newest run held is judged", func(t *testing.T) {
		r, st := status(t, "--json")
		if r.code != 0 || !st[0].OK || st[0].NewestRun != "old" || st[0].ArchivesMissing != 1 || st[0].Runs != 2 {
			t.Errorf("status exit %d, %+v: want 0, ok, judged by old, 1 archive missing of 2 runs", r.code, st[0])
		}
		if !strings.Contains(r.stderr, `"run_id":"new"`) || !strings.Contains(r.stderr, "missing") {
			t.Errorf("log %s: want a warning naming run new as missing", r.stderr)
		}
	})
	t.Run("list shows it missing", func(t *testing.T) {
		r := archiver(t, "list", "--config", e.config, "--json")
		var runs []listedRun
		if err := json.Unmarshal([]byte(r.stdout), &runs); err != nil || r.code != 0 || len(runs) != 2 {
			t.Fatalf("list: exit %d, %s, %v", r.code, r.stdout, err)
		}
		for _, run := range runs {
			missing := run.RunID == "new"
			if (run.Status == listMissing) != missing || (run.MissingSince != nil) != missing {
				t.Errorf("listed %s: status %q, missing_since %v; want missing only for new", run.RunID, run.Status, run.MissingSince)
			}
		}
		if r := archiver(t, "list", "--config", e.config); !regexp.MustCompile(`(?m)^new\s+survival\s+\S+\s+missing\s`).MatchString(r.stdout) {
			t.Errorf("list table:\n%s\nwant new's status missing", r.stdout)
		}
	})
	t.Run("an older run held goes stale", func(t *testing.T) {
		shiftRun(t, e.url, "old", -30*time.Hour)
		if r, st := status(t, "--json"); r.code != 1 || st[0].OK || st[0].NewestRun != "old" {
			t.Errorf("status exit %d, %+v: want 1, stale, judged by old", r.code, st[0])
		}
	})
	t.Run("no archive held", func(t *testing.T) {
		if err := os.Remove(e.archivePath("old", ".tar.zst")); err != nil {
			t.Fatal(err)
		}
		prune(t)
		r, _ := status(t)
		if r.code != 1 || !strings.Contains(r.stdout, "STALE: no run whose archive is in the store (2 missing)") {
			t.Errorf("status exit %d\n%s\nwant 1, stale with both archives missing", r.code, r.stdout)
		}
	})
}
