package main

import (
	"slices"
	"strings"
	"testing"

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
