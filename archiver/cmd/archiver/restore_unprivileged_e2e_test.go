package main

// End-to-end tests of `archiver restore` run as the game's UID (the restore
// Job's restricted mode) on worlds with folders their owner cannot write or
// even read, and of the restore's marker.

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/worldbackup/worldbackup/internal/testenv"
	"github.com/worldbackup/worldbackup/jobapi"
)

// modeEntry is one entry of an archive made by modeArchive.
type modeEntry struct {
	name string
	mode int64
	body string // files
	dir  bool
}

// modeArchive writes a plain tar of entries into dir (mode 0644, readable by
// UID 1000) and returns its path and SHA-256.
func modeArchive(t *testing.T, dir, name string, entries []modeEntry) (string, string) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Typeflag: tar.TypeReg, Name: e.name, Mode: e.mode, Size: int64(len(e.body)), ModTime: time.Unix(1700000000, 0)}
		if e.dir {
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p, sha256sum(t, p)
}

// asGame runs the archiver as UID and GID 1000 without supplementary groups.
func asGame(t *testing.T, args ...string) result {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "setpriv",
		append([]string{"--reuid", "1000", "--regid", "1000", "--clear-groups", "--", archiverBin}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	return result{code: exitCode(t, cmd.Run()), stdout: stdout.String(), stderr: stderr.String()}
}

// gameFolder returns a folder UID 1000 owns and can reach.
func gameFolder(t *testing.T) string {
	t.Helper()
	testenv.RequireRoot(t, "switching to UID 1000")
	testenv.RequireCommands(t, "util-linux", "setpriv")
	base := t.TempDir()
	for _, p := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(base, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	return base
}

// worldState returns the one world_state the log says, failing the test
// when it says none or several.
func worldState(t *testing.T, stderr string) string {
	t.Helper()
	var states []string
	for line := range strings.SplitSeq(stderr, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		if s, ok := m["world_state"].(string); ok {
			states = append(states, s)
		}
	}
	if len(states) != 1 {
		t.Fatalf("the log says %d world states %q, want exactly one:\n%s", len(states), states, stderr)
	}
	return states[0]
}

// TestRestoreUnprivilegedOddModes: as the game's UID, a world with a 0000
// folder holding a file restores; a world with a 0555 folder replaces it,
// and a third restore replaces that; nothing is left beside the world, and
// each log says one world state.
func TestRestoreUnprivilegedOddModes(t *testing.T) {
	base := gameFolder(t)
	archives := t.TempDir()
	os.Chmod(archives, 0o755)
	locked, lockedSum := modeArchive(t, archives, "locked.tar", []modeEntry{
		{name: "world/", mode: 0o755, dir: true},
		{name: "world/level.dat", mode: 0o644, body: "level"},
		{name: "world/d/", mode: 0o000, dir: true},
		{name: "world/d/f", mode: 0o644, body: "in a 0000 folder"},
	})
	readOnly, readOnlySum := modeArchive(t, archives, "read-only.tar", []modeEntry{
		{name: "world/", mode: 0o755, dir: true},
		{name: "world/level.dat", mode: 0o644, body: "level 2"},
		{name: "world/ro/", mode: 0o555, dir: true},
		{name: "world/ro/f", mode: 0o444, body: "in a 0555 folder"},
		{name: "world/ro/sub/", mode: 0o555, dir: true},
		{name: "world/ro/sub/g", mode: 0o444, body: "deeper"},
	})
	into := filepath.Join(base, "w")

	steps := []struct {
		name, archive, sum string
		extra              []string
		state              string
		check              map[string]os.FileMode // path below into: permission bits
	}{
		{"0000 folder into a new folder", locked, lockedSum, nil, "restored",
			map[string]os.FileMode{"world/d": 0, "world/d/f": 0o644}},
		{"0555 folder over it", readOnly, readOnlySum, []string{"--replace"}, "replaced",
			map[string]os.FileMode{"world/ro": 0o555, "world/ro/sub/g": 0o444}},
		{"third restore over the 0555 folder", locked, lockedSum, []string{"--replace"}, "replaced",
			map[string]os.FileMode{"world/d": 0, "world/d/f": 0o644}},
	}
	for _, st := range steps {
		res := asGame(t, restoreArgs(st.archive, st.sum, into, st.extra...)...)
		if res.code != 0 {
			t.Fatalf("%s: restore exited %d:\n%s", st.name, res.code, res.stderr)
		}
		if got := worldState(t, res.stderr); got != st.state {
			t.Errorf("%s: world_state %q, want %q", st.name, got, st.state)
		}
		for rel, perm := range st.check {
			fi, err := os.Lstat(filepath.Join(into, rel))
			if err != nil {
				t.Errorf("%s: %v", st.name, err)
				continue
			}
			if fi.Mode().Perm() != perm {
				t.Errorf("%s: %s has mode %v, want %v", st.name, rel, fi.Mode().Perm(), perm)
			}
		}
		if got := files(t, base); !slices.Equal(got, []string{"w"}) {
			t.Fatalf("%s: beside the world: %q, want only the world", st.name, got)
		}
	}
}

// TestRestoreOldCopyLeftAside: an old world the game's UID cannot remove
// (a folder of root's inside it) does not fail the restore nor any later
// one: it is left aside under a name of its own, and the log says where. A
// journal left by an interrupted restore whose old world cannot be removed
// does not block the next restores either.
func TestRestoreOldCopyLeftAside(t *testing.T) {
	base := gameFolder(t)
	archives := t.TempDir()
	os.Chmod(archives, 0o755)
	archive, sum := modeArchive(t, archives, "a.tar", []modeEntry{
		{name: "world/level.dat", mode: 0o644, body: "level"},
	})
	into := filepath.Join(base, "w")
	if res := asGame(t, restoreArgs(archive, sum, into)...); res.code != 0 {
		t.Fatalf("first restore exited %d:\n%s", res.code, res.stderr)
	}
	rootsFolder := func(p string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(p, "root-owned"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "root-owned", "f"), []byte("root's"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rootsFolder(into)

	res := asGame(t, restoreArgs(archive, sum, into, "--replace")...)
	if res.code != 0 {
		t.Fatalf("restore over an unremovable world exited %d:\n%s", res.code, res.stderr)
	}
	state := worldState(t, res.stderr)
	if !strings.HasPrefix(state, "replaced, old copy left at "+filepath.Join(base, "w.previous-")) {
		t.Errorf("world_state %q, want replaced with the old copy's path", state)
	}
	aside := strings.TrimPrefix(state, "replaced, old copy left at ")
	if _, err := os.Stat(filepath.Join(aside, "root-owned", "f")); err != nil {
		t.Errorf("the old copy: %v", err)
	}

	// An interrupted restore's journal (install phase: the new world is in)
	// whose old world cannot be removed.
	prev := filepath.Join(base, "w.previous")
	rootsFolder(prev)
	j := `{"phase":"install","staging":".w.worldbackup-staging-0123456789ab","sha256":"` + sum + `"}`
	if err := os.WriteFile(filepath.Join(base, ".w.worldbackup-swap"), []byte(j), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		res := asGame(t, restoreArgs(archive, sum, into, "--replace")...)
		if res.code != 0 {
			t.Fatalf("restore %d after the journal exited %d:\n%s", i, res.code, res.stderr)
		}
		if got := worldState(t, res.stderr); got != "replaced" {
			t.Errorf("restore %d: world_state %q, want replaced", i, got)
		}
	}
	for _, n := range files(t, base) {
		if n == "w.previous" || strings.Contains(n, "worldbackup") {
			t.Errorf("left beside the world: %s", n)
		}
	}
}

// TestRestoreMarker: a restore with --run-id marks the world; a rerun of the
// same run ID exits 0 without touching the world, also with another archive
// (a restore Job re-created from a newer backup's outputs), saying so; a new
// run ID restores that archive.
func TestRestoreMarker(t *testing.T) {
	dir := t.TempDir()
	a, aSum := modeArchive(t, dir, "a.tar", []modeEntry{{name: "world/level.dat", mode: 0o644, body: "a"}})
	b, bSum := modeArchive(t, dir, "b.tar", []modeEntry{{name: "world/level.dat", mode: 0o644, body: "b"}})
	into := filepath.Join(t.TempDir(), "w")
	if res := archiver(t, restoreArgs(a, aSum, into, "--run-id", "run-7")...); res.code != 0 {
		t.Fatalf("restore exited %d:\n%s", res.code, res.stderr)
	}
	raw, err := os.ReadFile(filepath.Join(into, ".worldbackup-restored"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		RunID      string    `json:"run_id"`
		SHA256     string    `json:"sha256"`
		RestoredAt time.Time `json:"restored_at"`
	}
	if err := json.Unmarshal(raw, &m); err != nil || m.RunID != "run-7" || m.SHA256 != aSum || m.RestoredAt.IsZero() {
		t.Fatalf("marker %s (%v)", raw, err)
	}

	// The world changes; the rerun must not undo that.
	level := filepath.Join(into, "world", "level.dat")
	if err := os.WriteFile(level, []byte("played since"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := archiver(t, restoreArgs(a, aSum, into, "--replace", "--run-id", "run-7")...)
	if res.code != 0 || !strings.Contains(res.stderr, "already restored") || worldState(t, res.stderr) != "already restored" {
		t.Fatalf("rerun exited %d:\n%s", res.code, res.stderr)
	}
	if got, _ := os.ReadFile(level); string(got) != "played since" {
		t.Errorf("the rerun touched the world: level.dat %q", got)
	}

	// Another archive under the same run ID restores nothing, and its
	// termination message names the archive the world holds (a's), not b.
	termLog := filepath.Join(t.TempDir(), "termination-log")
	res = archiver(t, restoreArgs(b, bSum, into, "--replace", "--run-id", "run-7", "--termination-log", termLog)...)
	if res.code != 0 || worldState(t, res.stderr) != "already restored" || !strings.Contains(res.stderr, "give a new run ID") {
		t.Fatalf("the same run ID with another archive exited %d, want 0, already restored, saying to give a new run ID:\n%s", res.code, res.stderr)
	}
	var term jobapi.RestoreResult
	if raw, err := os.ReadFile(termLog); err != nil || json.Unmarshal(raw, &term) != nil ||
		term.Status != jobapi.StatusAlreadyRestored || term.ArchiveRef != a || term.SHA256 != aSum {
		t.Errorf("termination message %+v (%v), want already-restored naming %s (sha256 %s), the archive the world holds", term, err, a, aSum)
	}
	if !strings.Contains(res.stdout, "already restored "+a+" into") {
		t.Errorf("stdout %q does not name the archive the world holds (%s)", res.stdout, a)
	}
	if got, _ := os.ReadFile(level); string(got) != "played since" {
		t.Errorf("the same run ID with another archive touched the world: level.dat %q", got)
	}
	// A new run ID restores it.
	if res := archiver(t, restoreArgs(b, bSum, into, "--replace", "--run-id", "run-8")...); res.code != 0 || worldState(t, res.stderr) != "replaced" {
		t.Fatalf("restore of another archive under a new run ID exited %d:\n%s", res.code, res.stderr)
	}
	if got, _ := os.ReadFile(level); string(got) != "b" {
		t.Errorf("level.dat %q, want b", got)
	}
	if res := archiver(t, restoreArgs(b, bSum, into, "--run-id", "../x")...); res.code != 2 {
		t.Errorf("a bad --run-id exited %d, want 2:\n%s", res.code, res.stderr)
	}
}
