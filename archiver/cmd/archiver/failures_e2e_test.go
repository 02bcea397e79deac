package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/worldbackup/worldbackup/internal/pgtest"
)

// TestFailedAttemptRecordedThenRetried: a backup that fails after it
// reached the catalog (an empty world) records a failed attempt with its
// reason; a retry of the same run ID succeeds; list shows both, newest
// first, the failure never restorable; --limit, --json and --wide.
func TestFailedAttemptRecordedThenRetried(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	if err := os.MkdirAll(e.world, 0o755); err != nil {
		t.Fatal(err)
	}
	r := archiver(t, e.backupArgs("retry-1")...)
	if r.code != 1 {
		t.Fatalf("backup of an empty world: exit %d, want 1: %s", r.code, r.stderr)
	}
	generateWorld(t, e.world)
	if r := archiver(t, e.backupArgs("retry-1")...); r.code != 0 {
		t.Fatalf("retry of the same run ID: exit %d: %s", r.code, r.stderr)
	}

	r = archiver(t, "list", "--config", e.config, "--json")
	var listed []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &listed); err != nil || r.code != 0 || len(listed) != 2 {
		t.Fatalf("list --json: exit %d, %v: %s %s", r.code, err, r.stdout, r.stderr)
	}
	ok, failed := listed[0], listed[1]
	if ok["status"] != "ok" || ok["run_id"] != "retry-1" || len(ok["sha256"].(string)) != 64 {
		t.Errorf("newest entry %v: want the successful retry with its full sha256", ok)
	}
	reason, _ := failed["reason"].(string)
	if failed["status"] != "failed" || failed["run_id"] != "retry-1" || !strings.Contains(reason, "empty") {
		t.Errorf("older entry %v: want the failed attempt with its reason", failed)
	}
	if _, has := failed["archive_ref"]; has {
		t.Errorf("a failed attempt has an archive_ref: %v", failed)
	}
	if strings.Contains(reason, e.url) {
		t.Errorf("reason holds the database URL: %q", reason)
	}

	r = archiver(t, "list", "--config", e.config, "--limit", "1")
	if r.code != 0 || strings.Contains(r.stdout, "FAILED") || !strings.Contains(r.stdout, "retry-1") ||
		!strings.Contains(r.stderr, "--limit 0") {
		t.Errorf("list --limit 1: exit %d, want the newest only and a note:\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = archiver(t, "list", "--config", e.config)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 3 || !strings.Contains(lines[2], "FAILED") || !strings.Contains(lines[1], " ok ") {
		t.Errorf("list: exit %d, want the run then the failure:\n%s", r.code, r.stdout)
	}
	r = archiver(t, "list", "--config", e.config, "--wide")
	if r.code != 0 || !strings.Contains(r.stdout, ok["sha256"].(string)) || !strings.Contains(r.stdout, reason) {
		t.Errorf("list --wide: exit %d, want the full checksum and reason:\n%s", r.code, r.stdout)
	}
	if r := archiver(t, "list", "--config", e.config, "--wide", "--json"); r.code != 2 {
		t.Errorf("list --wide --json: exit %d, want 2", r.code)
	}

	// The run is restorable, the failure is not: verify by run ID finds the row.
	if r := archiver(t, "verify", "--config", e.config, "--run-id", "retry-1"); r.code != 0 {
		t.Errorf("verify --run-id retry-1: exit %d: %s", r.code, r.stderr)
	}
}

// TestListUnmigrated: list on a database without the catalog's tables says
// to run archiver migrate, and prints no SQL.
func TestListUnmigrated(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	r := archiver(t, "list", "--config", e.config)
	if r.code != 1 || !strings.Contains(r.stderr, "archiver migrate") || strings.Contains(r.stderr, "SELECT") ||
		strings.Contains(r.stderr, "SQLSTATE") {
		t.Errorf("list on an empty database: exit %d, want 1 saying to migrate:\n%s", r.code, r.stderr)
	}
}
