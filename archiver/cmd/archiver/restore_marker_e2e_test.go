package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRestoreMarkerNotBound: a marker naming the restore's run and checksum
// that this restore did not write in this world (written by hand, or copied
// from a restored world) does not make the restore skip: it is refused
// (exit 2), naming the marker, and the world is untouched; without the
// marker the restore replaces the world.
func TestRestoreMarkerNotBound(t *testing.T) {
	dir := t.TempDir()
	a, aSum := modeArchive(t, dir, "a.tar", []modeEntry{{name: "world/level.dat", mode: 0o644, body: "restored"}})
	genuine := filepath.Join(t.TempDir(), "w")
	if res := archiver(t, restoreArgs(a, aSum, genuine, "--run-id", "run-7")...); res.code != 0 {
		t.Fatalf("restore exited %d:\n%s", res.code, res.stderr)
	}
	genuineMarker, err := os.ReadFile(filepath.Join(genuine, ".worldbackup-restored"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, marker string }{
		{"written by hand", fmt.Sprintf(`{"run_id":"run-7","sha256":%q,"restored_at":"2026-11-30T00:00:00Z"}`, aSum)},
		{"copied from a restored world", string(genuineMarker)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			into := filepath.Join(t.TempDir(), "w")
			level := filepath.Join(into, "world", "level.dat")
			if err := os.MkdirAll(filepath.Dir(level), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(level, []byte("planted"), 0o644); err != nil {
				t.Fatal(err)
			}
			marker := filepath.Join(into, ".worldbackup-restored")
			if err := os.WriteFile(marker, []byte(tc.marker), 0o644); err != nil {
				t.Fatal(err)
			}
			res := archiver(t, restoreArgs(a, aSum, into, "--replace", "--run-id", "run-7")...)
			if res.code != 2 || !strings.Contains(res.stderr, "not the marker this restore wrote") || worldState(t, res.stderr) != "unchanged" {
				t.Fatalf("restore with a %s marker exited %d:\n%s\nwant 2, refused, world unchanged", tc.name, res.code, res.stderr)
			}
			if got, _ := os.ReadFile(level); string(got) != "planted" {
				t.Errorf("level.dat %q: the refused restore touched the world", got)
			}
			if err := os.Remove(marker); err != nil {
				t.Fatal(err)
			}
			if res := archiver(t, restoreArgs(a, aSum, into, "--replace", "--run-id", "run-7")...); res.code != 0 || worldState(t, res.stderr) != "replaced" {
				t.Fatalf("restore without the marker exited %d:\n%s", res.code, res.stderr)
			}
			if got, _ := os.ReadFile(level); string(got) != "restored" {
				t.Errorf("level.dat %q, want restored", got)
			}
			// Its own marker now makes a rerun do nothing.
			if res := archiver(t, restoreArgs(a, aSum, into, "--replace", "--run-id", "run-7")...); res.code != 0 || worldState(t, res.stderr) != "already restored" {
				t.Fatalf("rerun exited %d:\n%s", res.code, res.stderr)
			}
		})
	}
}
