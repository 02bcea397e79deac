package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/worldbackup/worldbackup/internal/pgtest"
)

// backdate moves every row's times (when the run started and finished, and
// when the catalog recorded it) and every archive's mtime back by age, each
// run a day older than the next, so they are past the grace period.
func backdate(t *testing.T, e *env, runIDs []string, age time.Duration) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), e.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for i, id := range runIDs {
		d := age + time.Duration(len(runIDs)-i)*24*time.Hour
		if _, err := conn.Exec(t.Context(), `UPDATE world_backups SET started_at = started_at - $2::interval,
			finished_at = finished_at - $2::interval, created_at = created_at - $2::interval WHERE run_id = $1`,
			id, fmt.Sprintf("%d seconds", int(d.Seconds()))); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-d)
		if err := os.Chtimes(e.archivePath(id, ".tar.zst"), old, old); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPrune(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateWorld(t, e.world)
	ids := []string{"r1", "r2", "r3", "r4"}
	e.tarBackups(t, ids...)
	backdate(t, e, ids, 2*time.Hour)
	// An orphan: an archive file with no row, as a crash after a prune's
	// commit leaves it; and a file that is not an archive.
	orphan := e.archivePath("orphan", ".tar.zst")
	if err := os.Link(e.archivePath("r1", ".tar.zst"), orphan); err != nil {
		t.Fatal(err)
	}
	notes := filepath.Join(e.root, "survival", "notes.txt")
	if err := os.WriteFile(notes, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	prune := func(extra ...string) result {
		return archiver(t, append([]string{"prune", "--server", "survival", "--config", e.config, "--archive-root", e.root,
			"--log-format", "json", "--termination-log", e.tlog, "--keep-last", "2", "--min-keep", "1"}, extra...)...)
	}
	dir := filepath.Join(e.root, "survival")
	before := files(t, dir)

	r := prune("--dry-run")
	if r.code != 0 || !strings.Contains(r.stdout, "would remove (dry run) 2 of 4 runs") {
		t.Fatalf("dry run: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if got := files(t, dir); !slices.Equal(got, before) || len(rows(t, e.url)) != 4 {
		t.Fatalf("dry run changed something: files %v (before %v), %d rows", got, before, len(rows(t, e.url)))
	}

	r = prune("--json")
	if r.code != 0 {
		t.Fatalf("prune: exit %d: %s", r.code, r.stderr)
	}
	var rep struct {
		BytesFreed int64 `json:"bytes_freed"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("report %q: %v", r.stdout, err)
	}
	var got []string
	for _, row := range rows(t, e.url) {
		got = append(got, row.RunID)
	}
	if fmt.Sprint(got) != "[r3 r4]" {
		t.Fatalf("rows after prune: %v, want [r3 r4]", got)
	}
	if got, want := files(t, dir), []string{"notes.txt", "r3.tar.zst", "r4.tar.zst"}; !slices.Equal(got, want) {
		t.Fatalf("files after prune: %v, want %v (old runs and the orphan gone, other files kept)", got, want)
	}
	s := summary(t, e.tlog)
	if s["status"] != "done" || s["rows_deleted"] != 2.0 || s["files_removed"] != 3.0 || s["bytes_freed"].(float64) <= 0 {
		t.Fatalf("termination message %v: want done, 2 rows, 3 files (2 runs and the orphan), bytes freed", s)
	}
	if rep.BytesFreed != int64(s["bytes_freed"].(float64)) {
		t.Fatalf("report frees %d bytes, termination message %v", rep.BytesFreed, s["bytes_freed"])
	}

	// Nothing left to do: a second prune removes nothing.
	if r := prune(); r.code != 0 || !strings.Contains(r.stdout, "removed 0 runs and 0 files") {
		t.Fatalf("second prune: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}

// TestPruneKeepsRowsWhoseArchivesAreMissing: rows whose archives are gone
// from the store are kept, take no place of the rules, and are reported in
// the text, the log (each by its run ID) and the termination message.
func TestPruneKeepsRowsWhoseArchivesAreMissing(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateWorld(t, e.world)
	ids := []string{"r1", "r2", "r3"}
	e.tarBackups(t, ids...)
	backdate(t, e, ids, 2*time.Hour)
	for _, id := range []string{"r2", "r3"} {
		if err := os.Remove(e.archivePath(id, ".tar.zst")); err != nil {
			t.Fatal(err)
		}
	}
	r := archiver(t, "prune", "--server", "survival", "--config", e.config, "--archive-root", e.root,
		"--log-format", "json", "--termination-log", e.tlog, "--keep-last", "1", "--min-keep", "1")
	if r.code != 0 || !strings.Contains(r.stdout, "removed 0 runs and 0 files, 0 bytes freed; 0 archives were already missing; "+
		"2 runs kept whose archives are not in the store") {
		t.Fatalf("prune: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	var got []string
	for _, row := range rows(t, e.url) {
		got = append(got, row.RunID)
	}
	if fmt.Sprint(got) != "[r1 r2 r3]" {
		t.Errorf("rows %v: want every row kept (r1 the newest archive, r2 and r3 missing)", got)
	}
	for _, id := range []string{"r2", "r3"} {
		if !strings.Contains(r.stderr, `"run_id":"`+id+`"`) || !strings.Contains(r.stderr, "not in the store") {
			t.Errorf("log %s: want a warning naming %s's missing archive", r.stderr, id)
		}
	}
	s := summary(t, e.tlog)
	if s["rows_deleted"] != 0.0 || s["files_missing"] != 0.0 || s["archives_missing"] != 2.0 {
		t.Fatalf("termination message %v: want 0 rows deleted, 2 archives missing", s)
	}
}

func TestPruneUsageErrors(t *testing.T) {
	e := newEnv(t, "postgres://nobody@127.0.0.1:1/none")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{name: "no min-keep", args: []string{"--server", "s", "--keep-last", "3"}, want: "--min-keep is required"},
		{name: "no rule", args: []string{"--server", "s", "--min-keep", "2"}, want: "no keep rule"},
		{name: "bad server", args: []string{"--server", "S!", "--min-keep", "2", "--keep-last", "1"}, want: "server name"},
		{name: "bad within", args: []string{"--server", "s", "--min-keep", "2", "--keep-within", "3 days"}, want: "--keep-within"},
		{name: "negative rule", args: []string{"--server", "s", "--min-keep", "2", "--keep-daily", "-1"}, want: "keep-daily is -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := archiver(t, append([]string{"prune", "--config", e.config, "--archive-root", e.root, "--termination-log", e.tlog}, tt.args...)...)
			if r.code != 2 || !strings.Contains(r.stderr, tt.want) {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", r.code, r.stderr, tt.want)
			}
			if s := summary(t, e.tlog); s["status"] != "failed" {
				t.Fatalf("termination message %v, want failed", s)
			}
		})
	}
}

// TestBackupThenPrune: a backup with a retention policy prunes after the
// run, in the same process, and says so in its termination message.
func TestBackupThenPrune(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateWorld(t, e.world)
	old := []string{"r1", "r2", "r3"}
	e.tarBackups(t, old...)
	backdate(t, e, old, 2*time.Hour)

	r := archiver(t, e.tarBackupArgs("r4", "--keep-last", "2", "--min-keep", "1")...)
	if r.code != 0 {
		t.Fatalf("backup with retention: exit %d: %s", r.code, r.stderr)
	}
	var got []string
	for _, row := range rows(t, e.url) {
		got = append(got, row.RunID)
	}
	if fmt.Sprint(got) != "[r3 r4]" {
		t.Fatalf("rows %v, want [r3 r4]", got)
	}
	if got, want := files(t, filepath.Join(e.root, "survival")), []string{"r3.tar.zst", "r4.tar.zst"}; !slices.Equal(got, want) {
		t.Fatalf("files %v, want %v", got, want)
	}
	s := summary(t, e.tlog)
	p, _ := s["prune"].(map[string]any)
	if s["status"] != "done" || p == nil || p["status"] != "done" || p["rows_deleted"] != 2.0 {
		t.Fatalf("termination message %v: want the run done and 2 rows pruned", s)
	}

	// A policy without --min-keep is a usage error before anything runs.
	if r := archiver(t, e.tarBackupArgs("r5", "--keep-last", "2")...); r.code != 2 || !strings.Contains(r.stderr, "--min-keep is required") {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if len(rows(t, e.url)) != 2 {
		t.Fatal("a refused backup ran")
	}
}

func TestStatus(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateWorld(t, e.world)
	if r := archiver(t, e.tarBackupArgs("old")...); r.code != 0 {
		t.Fatalf("backup: %s", r.stderr)
	}
	backdate(t, e, []string{"old"}, 30*time.Hour)
	status := func(extra ...string) result {
		return archiver(t, append([]string{"status", "--config", e.config, "--log-format", "json"}, extra...)...)
	}
	if r := status("--max-age", "26h"); r.code != 1 || !strings.Contains(r.stdout, "STALE: older than 26h0m0s") {
		t.Fatalf("a 54h old archive: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := status("--max-age", "100h"); r.code != 0 || !strings.Contains(r.stdout, "survival") || !strings.Contains(r.stdout, " ok") {
		t.Fatalf("within 100h: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := status("--max-age", "100h", "--server", "survival", "--server", "lobby"); r.code != 1 || !strings.Contains(r.stdout, "STALE: no archive") {
		t.Fatalf("a server without archives: exit %d\n%s", r.code, r.stdout)
	}
	if r := archiver(t, e.tarBackupArgs("new")...); r.code != 0 {
		t.Fatalf("backup: %s", r.stderr)
	}
	r := status("--max-age", "26h", "--json")
	var st []serverStatus
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || r.code != 0 || len(st) != 1 || st[0].NewestRun != "new" || st[0].Runs != 2 || !st[0].OK {
		t.Fatalf("after a new backup: exit %d, %+v, %v", r.code, st, err)
	}
	if r := status(); r.code != 2 || !strings.Contains(r.stderr, "--max-age is required") {
		t.Fatalf("without --max-age: exit %d %s", r.code, r.stderr)
	}
}
