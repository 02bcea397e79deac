package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/worldbackup/worldbackup/internal/pgtest"
)

// TestBackupWaitsForTurn: with --turn-file, a backup does nothing (no
// archive, no row) while the file is empty, as a capped backup's pod is
// before the gate annotates it, and runs once the file says granted, as the
// kubelet rewrites it; the wait is logged and is not part of the run's
// duration.
func TestBackupWaitsForTurn(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateWorld(t, e.world)
	turnFile := filepath.Join(t.TempDir(), "turn")
	if err := os.WriteFile(turnFile, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), archiverBin, e.backupArgs("turn-1", "--turn-file", turnFile)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	const held = time.Second
	select {
	case err := <-done:
		t.Fatalf("the backup ended (%v) before its turn:\n%s", err, stderr.String())
	case <-time.After(held):
	}
	if rs := rows(t, e.url); len(rs) != 0 {
		t.Fatalf("%d rows before the turn came", len(rs))
	}
	if got := files(t, e.root); len(got) != 0 {
		t.Fatalf("the archive root holds %q before the turn came", got)
	}

	// As the kubelet does: the new content replaces the file in one step.
	tmp := turnFile + ".new"
	if err := os.WriteFile(tmp, []byte("granted"), 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, turnFile); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if code := exitCode(t, err); code != 0 {
			t.Fatalf("exited %d:\n%s", code, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("the backup did not run after its turn came:\n%s", stderr.String())
	}
	log := stderr.String()
	for _, want := range []string{`"waiting for the run's turn"`, `"the run's turn has come"`, `"waited_seconds"`} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %s:\n%s", want, log)
		}
	}
	if rs := rows(t, e.url); len(rs) != 1 {
		t.Fatalf("%d rows after the turn, want 1", len(rs))
	}
	if d, ok := summary(t, e.tlog)["duration_seconds"].(float64); !ok || d >= held.Seconds() {
		t.Errorf("duration_seconds %v, want the run's own time, under the %s it waited", d, held)
	}
}

// TestBackupTurnFileErrors: a turn file that cannot grant a turn (missing,
// not a regular file, another content) is a usage error at once (exit 2),
// which names the flag; nothing is written.
func TestBackupTurnFileErrors(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateWorld(t, e.world)
	dir := t.TempDir()
	other := filepath.Join(dir, "other")
	if err := os.WriteFile(other, []byte("soon"), 0o444); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		file string
		want string
	}{
		{"missing", filepath.Join(dir, "no-turn"), "no such file"},
		{"a device", "/dev/zero", "not a regular file"},
		{"a folder", dir, "not a regular file"},
		{"another content", other, `holds "soon"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := archiver(t, e.backupArgs("turn-bad", "--turn-file", tt.file)...)
			if res.code != 2 {
				t.Fatalf("exited %d, want 2:\n%s", res.code, res.stderr)
			}
			if !strings.Contains(res.stderr, "--turn-file: ") || !strings.Contains(res.stderr, tt.want) {
				t.Errorf("stderr does not name --turn-file and say %q:\n%s", tt.want, res.stderr)
			}
			if got := files(t, e.root); len(got) != 0 {
				t.Errorf("something was written: %q", got)
			}
			if rs := rows(t, e.url); len(rs) != 0 {
				t.Errorf("%d rows", len(rs))
			}
		})
	}
}
