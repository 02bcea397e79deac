package main

// End-to-end tests of `archiver restore`: archives made by the real
// `archiver backup` (against a real PostgreSQL), restored by the built binary
// with the checksum the catalog recorded.

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/worldbackup/worldbackup/internal/pgtest"
	"github.com/worldbackup/worldbackup/internal/testenv"
)

// linkOutOfWorld is the symlink generateWorld plants whose target, an
// absolute path, leaves the world: backup stores it as a link, and restore
// refuses any such link (see TestRestoreRefusesLinkOutOfWorld).
const linkOutOfWorld = "world/odd/passwd"

// backedUpWorld generates a world (without linkOutOfWorld), backs it up with
// compression and returns the env, the archive's path and the sha256 of its
// catalog row.
func backedUpWorld(t *testing.T, compression, ext string) (*env, string, string) {
	t.Helper()
	e := newEnv(t, pgtest.URL(t))
	generateRestorableWorld(t, e.world)
	return e, backUp(t, e, compression, ext), rows(t, e.url)[0].SHA256
}

// backUp backs up e's world with compression and returns the archive's path,
// checking it is the one row of the catalog.
func backUp(t *testing.T, e *env, compression, ext string) string {
	t.Helper()
	runID := "restore-src-" + compression
	if res := archiver(t, e.tarBackupArgs(runID, "--compression", compression)...); res.code != 0 {
		t.Fatalf("backup exited %d:\n%s", res.code, res.stderr)
	}
	archive := e.archivePath(runID, ext)
	rs := rows(t, e.url)
	if len(rs) != 1 || rs[0].ArchiveRef != archive {
		t.Fatalf("rows %+v, want one for %s", rs, archive)
	}
	return archive
}

func restoreArgs(archive, sum, into string, extra ...string) []string {
	return append([]string{"restore", "--archive", archive, "--sha256", sum, "--into", into, "--log-format", "json"}, extra...)
}

// oldWorld writes a small world of its own into dir and returns its
// snapshot: what "untouched" is checked against.
func oldWorld(t *testing.T, dir string) map[string]node {
	t.Helper()
	for rel, data := range map[string]string{
		"world/level.dat":         "old level",
		"world/region/r.0.0.mca":  "old region",
		"server.properties":       "motd=old",
		"world/playerdata/a.dat":  "old player",
		"world/empty-dir/.keep":   "",
		"plugins/config/x.yml":    "a: 1",
		"world/stats/player.json": "{}",
	} {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("level.dat", filepath.Join(dir, "world/level-link")); err != nil {
		t.Fatal(err)
	}
	return snapshot(t, dir, nil)
}

// untouched checks that dir still has the snapshot before and that its
// parent holds exactly siblings (no staging or previous folder left).
func untouched(t *testing.T, dir string, before map[string]node, siblings ...string) {
	t.Helper()
	after := snapshot(t, dir, nil)
	if len(after) != len(before) {
		t.Errorf("the target has %d entries, had %d", len(after), len(before))
	}
	for rel, b := range before {
		if a, ok := after[rel]; !ok || a != b {
			t.Errorf("%q changed: %+v, was %+v", rel, a, b)
		}
	}
	if got := files(t, filepath.Dir(dir)); !slices.Equal(got, siblings) {
		t.Errorf("beside the target: %q, want %q", got, siblings)
	}
}

func TestRestoreEndToEnd(t *testing.T) {
	tests := []struct{ compression, ext string }{
		{"zstd", ".tar.zst"},
		{"gzip", ".tar.gz"},
		{"none", ".tar"},
	}
	for _, tt := range tests {
		t.Run(tt.compression, func(t *testing.T) {
			e, archive, sum := backedUpWorld(t, tt.compression, tt.ext)
			want := snapshot(t, e.world, defaultExcluded)

			// Into a fresh folder: the tree equals the source byte for byte,
			// modes, times, owners (as root), symlinks as links, hard links.
			parent := t.TempDir()
			into := filepath.Join(parent, "restored")
			res := archiver(t, restoreArgs(archive, sum, into)...)
			if res.code != 0 {
				t.Fatalf("restore exited %d:\n%s", res.code, res.stderr)
			}
			if !strings.Contains(res.stdout, "restored "+archive+" into "+into) {
				t.Errorf("stdout: %q", res.stdout)
			}
			if !strings.Contains(res.stderr, `"checksum verified"`) || !strings.Contains(res.stderr, `"compression":"`+tt.compression+`"`) {
				t.Errorf("logs lack the checksum and compression:\n%s", res.stderr)
			}
			got := snapshot(t, into, nil)
			compareTrees(t, got, want)
			for rel, target := range map[string]string{
				"world/odd/level-link": "../level.dat",
				"world/odd/dangling":   "missing",
			} {
				if got[rel].link != target {
					t.Errorf("%s: restored as %+v, want a link to %q", rel, got[rel], target)
				}
			}
			if names := files(t, parent); !slices.Equal(names, []string{"restored"}) {
				t.Errorf("beside the target: %q, want only the target", names)
			}
			if after := sha256sum(t, archive); after != sum {
				t.Errorf("the archive changed: sha256 %s, was %s", after, sum)
			}

			// Over an existing world with --replace: the old world is gone,
			// the tree equals the source, nothing is left beside it.
			target := filepath.Join(t.TempDir(), "world")
			oldWorld(t, target)
			res = archiver(t, restoreArgs(archive, sum, target, "--replace")...)
			if res.code != 0 {
				t.Fatalf("restore --replace exited %d:\n%s", res.code, res.stderr)
			}
			compareTrees(t, snapshot(t, target, nil), want)
			if names := files(t, filepath.Dir(target)); !slices.Equal(names, []string{"world"}) {
				t.Errorf("beside the target: %q, want only the target", names)
			}

			// The termination message says what was restored; a rerun of
			// the same run says it did nothing.
			termLog := filepath.Join(t.TempDir(), "termination-log")
			rerun := restoreArgs(archive, sum, filepath.Join(t.TempDir(), "w"), "--run-id", "rr1", "--termination-log", termLog)
			if res = archiver(t, rerun...); res.code != 0 {
				t.Fatalf("restore with a run ID exited %d:\n%s", res.code, res.stderr)
			}
			for _, wantStatus := range []string{"restored", "already-restored"} {
				var s map[string]any
				b, err := os.ReadFile(termLog)
				if err != nil || json.Unmarshal(b, &s) != nil {
					t.Fatalf("termination message %q: %v", b, err)
				}
				if s["status"] != wantStatus || s["sha256"] != sum || s["archive_ref"] != archive || s["run_id"] != "rr1" {
					t.Errorf("termination message %s: want status %s, sha256 %s, archive_ref %s, run_id rr1", b, wantStatus, sum, archive)
				}
				if res = archiver(t, rerun...); res.code != 0 {
					t.Fatalf("rerun exited %d:\n%s", res.code, res.stderr)
				}
			}
		})
	}
}

// TestRestoreRefusals checks that each refusal exits 3 (a failure 1) with a
// message that says what is wrong and world_state unchanged, and leaves the
// target untouched.
func TestRestoreRefusals(t *testing.T) {
	_, archive, sum := backedUpWorld(t, "zstd", ".tar.zst")
	wrong := []byte(sum) // another 64 lowercase hex digits
	if wrong[10] == '0' {
		wrong[10] = '1'
	} else {
		wrong[10] = '0'
	}
	evil, evilSum := craftedArchive(t, []tarEntry{
		{name: "world/level.dat", body: "fine"},
		{name: "world/../../escape.dat", body: "escaped"},
	})
	// The bytes after the end are covered by the checksum: refused anyway.
	good, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	trailing := filepath.Join(t.TempDir(), "trailing.tar.zst")
	if err := os.WriteFile(trailing, append(good, "trailing garbage"...), 0o644); err != nil {
		t.Fatal(err)
	}
	trailingSum := sha256sum(t, trailing)
	tests := []struct {
		name    string
		args    func(into string) []string
		code    int
		want    []string
		escaped string // a path beside the target that must not appear
	}{
		{"wrong sha256", func(into string) []string { return restoreArgs(archive, string(wrong), into, "--replace") },
			3, []string{"checksum mismatch", "nothing was extracted", string(wrong)}, ""},
		{"not empty without --replace", func(into string) []string { return restoreArgs(archive, sum, into) },
			1, []string{"is not empty: pass --replace"}, ""},
		{"entry escaping the target", func(into string) []string { return restoreArgs(evil, evilSum, into, "--replace") },
			3, []string{"archive refused", `"entry":"world/../../escape.dat"`, `"index":2`, `"reason":`}, "escape.dat"},
		{"too many entries", func(into string) []string { return restoreArgs(archive, sum, into, "--replace", "--max-entries", "10") },
			3, []string{"archive refused", "10"}, ""},
		{"too many bytes", func(into string) []string { return restoreArgs(archive, sum, into, "--replace", "--max-bytes", "1024") },
			3, []string{"archive refused", "1024"}, ""},
		{"bytes after the end", func(into string) []string { return restoreArgs(trailing, trailingSum, into, "--replace") },
			3, []string{"archive refused", "does not end cleanly after its tar stream"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			into := filepath.Join(t.TempDir(), "world")
			before := oldWorld(t, into)
			res := archiver(t, tt.args(into)...)
			if res.code != tt.code {
				t.Fatalf("restore exited %d, want %d:\n%s", res.code, tt.code, res.stderr)
			}
			if n := strings.Count(res.stderr, `"world_state"`); n != 1 || !strings.Contains(res.stderr, `"world_state":"unchanged"`) {
				t.Errorf("want one world_state, unchanged:\n%s", res.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(res.stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, res.stderr)
				}
			}
			untouched(t, into, before, "world")
			if tt.escaped != "" {
				for _, p := range []string{filepath.Dir(into), filepath.Dir(filepath.Dir(into))} {
					if _, err := os.Lstat(filepath.Join(p, tt.escaped)); err == nil {
						t.Errorf("%s was written outside the target", filepath.Join(p, tt.escaped))
					}
				}
			}
		})
	}
}

// TestRestoreRefusesLinkOutOfWorld pins down how the two halves meet on a
// world holding a symlink to an absolute path: backup stores it as a link
// (it never follows links), and restore refuses the whole archive, naming
// the link, since a link leaving the world is what a tampered archive would
// plant. The world folder stays as it was.
func TestRestoreRefusesLinkOutOfWorld(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateWorld(t, e.world)
	archive := backUp(t, e, "zstd", ".tar.zst")
	into := filepath.Join(t.TempDir(), "world")
	before := oldWorld(t, into)
	res := archiver(t, restoreArgs(archive, rows(t, e.url)[0].SHA256, into, "--replace")...)
	if res.code != 3 {
		t.Fatalf("restore exited %d, want 3:\n%s", res.code, res.stderr)
	}
	for _, w := range []string{"archive refused", `"entry":"` + linkOutOfWorld + `"`, `\"/etc/passwd\" is absolute`} {
		if !strings.Contains(res.stderr, w) {
			t.Errorf("stderr lacks %s:\n%s", w, res.stderr)
		}
	}
	untouched(t, into, before, "world")
}

type tarEntry struct{ name, body string }

// craftedArchive writes a plain tar of entries (regular files, mode 0644)
// and returns its path and SHA-256.
func craftedArchive(t *testing.T, entries []tarEntry) (string, string) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: e.name, Mode: 0o644, Size: int64(len(e.body))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "crafted.tar")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(buf.Bytes())
	return p, hex.EncodeToString(s[:])
}

func TestRestoreUsageErrors(t *testing.T) {
	archive, sum := craftedArchive(t, []tarEntry{{name: "world/level.dat", body: "x"}})
	dir := t.TempDir()
	into := filepath.Join(dir, "world")
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"no flags", []string{"restore"}, []string{"--archive is required", "--sha256 is required", "--into is required"}},
		{"no checksum", []string{"restore", "--archive", archive, "--into", into}, []string{"--sha256 is required", "archiver list"}},
		{"upper-case checksum", restoreArgs(archive, strings.ToUpper(sum), into), []string{"want 64 lowercase hex digits"}},
		{"short checksum", restoreArgs(archive, sum[:60], into), []string{"want 64 lowercase hex digits"}},
		{"no target", []string{"restore", "--archive", archive, "--sha256", sum}, []string{"--into is required"}},
		{"root as target", restoreArgs(archive, sum, "/"), []string{"--into / would replace the whole filesystem"}},
		{"zero max-bytes", restoreArgs(archive, sum, into, "--max-bytes", "0"), []string{"--max-bytes 0: must be positive"}},
		{"negative max-entries", restoreArgs(archive, sum, into, "--max-entries", "-1"), []string{"--max-entries -1: must be positive"}},
		{"no config file", restoreArgs(archive, sum, into, "--config", "/etc/felis/felis.toml"), []string{"flag provided but not defined: -config"}},
		{"stray argument", restoreArgs(archive, sum, into, "extra"), []string{`unexpected argument "extra"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := archiver(t, tt.args...)
			if res.code != 2 {
				t.Fatalf("exited %d, want 2:\n%s", res.code, res.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(res.stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, res.stderr)
				}
			}
			if got := files(t, dir); len(got) != 0 {
				t.Errorf("something was written: %q", got)
			}
		})
	}
}

// need skips the test when ok is false, or fails it in CI.
func need(t *testing.T, ok bool, what string) {
	t.Helper()
	testenv.Require(t, ok, what, "")
}

// TestRestoreAsTheJobRuns runs the restore as the restore Job's pod does:
// the world folder a mount point (the world claim's volume root, so the
// staging folder goes inside it), and the identity of each security mode —
// baseline: root with only CHOWN, DAC_OVERRIDE and FOWNER (jobspec's
// RestoreCapabilities) and no new privileges; restricted: the game's UID and
// GID with no capability at all.
func TestRestoreAsTheJobRuns(t *testing.T) {
	need(t, os.Geteuid() == 0, "needs root to mount and to change identity")
	for _, tool := range []string{"unshare", "setpriv"} {
		_, err := exec.LookPath(tool)
		need(t, err == nil, tool+" (util-linux) is not installed")
	}
	if out, err := exec.Command("unshare", "--mount", "--", "true").CombinedOutput(); err != nil {
		need(t, false, "cannot create a mount namespace: "+strings.TrimSpace(string(out)))
	}

	e, archive, sum := backedUpWorld(t, "zstd", ".tar.zst")
	want := snapshot(t, e.world, defaultExcluded)

	// asPod runs the archiver with its --into folder bind-mounted onto itself
	// in a private mount namespace, under the identity given by setpriv's
	// flags.
	asPod := func(t *testing.T, into string, setpriv []string, args ...string) result {
		t.Helper()
		cmdline := append([]string{"--mount", "--propagation", "private", "--",
			"sh", "-c", `mount --bind "$0" "$0" && exec "$@"`, into, "setpriv"}, setpriv...)
		cmdline = append(cmdline, "--no-new-privs", "--", archiverBin)
		cmdline = append(cmdline, args...)
		cmd := exec.CommandContext(t.Context(), "unshare", cmdline...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		return result{code: exitCode(t, cmd.Run()), stdout: stdout.String(), stderr: stderr.String()}
	}
	// gameWorld is an old world as the game leaves it: owned by its UID.
	gameWorld := func(t *testing.T) (string, map[string]node) {
		t.Helper()
		into := filepath.Join(t.TempDir(), "world")
		oldWorld(t, into)
		chownTree(t, into, 1000, 1000)
		return into, snapshot(t, into, nil)
	}
	const baselineCaps = "chown,dac_override,fowner" // jobspec.RestoreCapabilities

	t.Run("baseline", func(t *testing.T) {
		into, _ := gameWorld(t)
		res := asPod(t, into, boundingSet(baselineCaps), restoreArgs(archive, sum, into, "--replace")...)
		if res.code != 0 {
			t.Fatalf("restore exited %d:\n%s", res.code, res.stderr)
		}
		if !strings.Contains(res.stderr, `"layout":"inside"`) {
			t.Errorf("the restore did not stage inside the mount point:\n%s", res.stderr)
		}
		// Owners included: level.dat is the game's (1000:1000), 0600.
		got := snapshot(t, into, nil)
		compareTrees(t, got, want)
		if n := got["world/level.dat"]; n.uid != 1000 || n.gid != 1000 || n.mode.Perm() != 0o600 {
			t.Errorf("level.dat restored as %d:%d %v, want 1000:1000 -rw-------", n.uid, n.gid, n.mode)
		}
	})

	// The controls: each capability is needed, and a restore that lacks one
	// fails without touching the world.
	for _, tt := range []struct{ caps, want string }{
		{"dac_override,fowner", "setting owner"},
		{"chown,dac_override", "setting mode"},
		{"chown,fowner", "permission denied"},
	} {
		t.Run("baseline with only "+tt.caps+" fails cleanly", func(t *testing.T) {
			into, before := gameWorld(t)
			res := asPod(t, into, boundingSet(tt.caps), restoreArgs(archive, sum, into, "--replace")...)
			if res.code != 1 || !strings.Contains(res.stderr, tt.want) {
				t.Fatalf("restore exited %d, want 1 with %q:\n%s", res.code, tt.want, res.stderr)
			}
			untouched(t, into, before, "world")
		})
	}

	t.Run("restricted", func(t *testing.T) {
		// A restricted-mode backup leaves the archive to the game's UID
		// (the Job's runAsUser); kubelet gives the world volume its fsGroup.
		base := t.TempDir()
		into := filepath.Join(base, "world")
		oldWorld(t, into)
		for _, p := range []string{filepath.Dir(base), base, filepath.Dir(filepath.Dir(e.root)), filepath.Dir(e.root)} {
			if err := os.Chmod(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		chownTree(t, e.root, 1000, 1000)
		chownTree(t, into, 1000, 1000)
		res := asPod(t, into, append([]string{"--reuid", "1000", "--regid", "1000", "--clear-groups"}, boundingSet("")...),
			restoreArgs(archive, sum, into, "--replace")...)
		if res.code != 0 {
			t.Fatalf("restore exited %d:\n%s", res.code, res.stderr)
		}
		// Every restored entry belongs to the game; the rest equals the
		// source.
		got := snapshot(t, into, nil)
		for rel, n := range got {
			if n.uid != 1000 {
				t.Errorf("%s restored as UID %d, want 1000", rel, n.uid)
			}
		}
		compareTrees(t, withoutOwners(got), withoutOwners(want))
	})
}

// boundingSet returns setpriv's flags for a process that keeps only caps
// (comma-separated capability names, "" for none).
func boundingSet(caps string) []string {
	set := "-all"
	for c := range strings.SplitSeq(caps, ",") {
		if c != "" {
			set += ",+" + c
		}
	}
	return []string{"--bounding-set", set, "--inh-caps", "-all"}
}

func chownTree(t *testing.T, root string, uid, gid int) {
	t.Helper()
	err := filepath.Walk(root, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func withoutOwners(m map[string]node) map[string]node {
	out := make(map[string]node, len(m))
	for k, n := range m {
		n.uid, n.gid = 0, 0
		out[k] = n
	}
	return out
}

// TestRestoreRefusesWorldInUse: a running server holds a POSIX lock on
// world/session.lock (Java's FileChannel.lock); a restore into that folder
// is refused and touches nothing.
func TestRestoreRefusesWorldInUse(t *testing.T) {
	testenv.RequireCommands(t, "python3", "python3")
	_, archive, sum := backedUpWorld(t, "zstd", ".tar.zst")
	into := filepath.Join(t.TempDir(), "server")
	oldWorld(t, into)
	lockFile := filepath.Join(into, "world", "session.lock")
	if err := os.WriteFile(lockFile, []byte("\u2603"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, into, nil)
	// Another process holds the lock, as the game server would.
	holder := exec.CommandContext(t.Context(), "python3", "-c",
		"import fcntl,sys; f=open(sys.argv[1],'r+'); fcntl.lockf(f, fcntl.LOCK_EX); print('locked', flush=True); sys.stdin.read()", lockFile)
	stdin, _ := holder.StdinPipe()
	stdout, _ := holder.StdoutPipe()
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); holder.Wait() }()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "locked\n" {
		t.Fatalf("lock holder: %q, %v", line, err)
	}

	res := archiver(t, restoreArgs(archive, sum, into, "--replace")...)
	if res.code != 1 || !strings.Contains(res.stderr, "in use by a running server") || !strings.Contains(res.stderr, "session.lock") {
		t.Fatalf("exit %d, want 1 naming the lock:\n%s", res.code, res.stderr)
	}
	untouched(t, into, before, "server")

	// Once the server stopped, the same restore works.
	stdin.Close()
	holder.Wait()
	if res := archiver(t, restoreArgs(archive, sum, into, "--replace")...); res.code != 0 {
		t.Fatalf("restore after the server stopped: exit %d:\n%s", res.code, res.stderr)
	}
}

// TestRestoreRerunWhileServerRuns: README "Restoring a world" promises that
// a re-created restore Job of the same entry exits 0 without touching the
// world. Once the game server runs on the restored world again (it holds
// session.lock), a rerun of the same run ID exits 0 (already restored); a
// restore of another run ID is still refused as in use (exit 1).
func TestRestoreRerunWhileServerRuns(t *testing.T) {
	testenv.RequireCommands(t, "python3")
	_, archive, sum := backedUpWorld(t, "zstd", ".tar.zst")
	into := filepath.Join(t.TempDir(), "server")
	if res := archiver(t, restoreArgs(archive, sum, into, "--replace", "--run-id", "r1")...); res.code != 0 {
		t.Fatalf("first restore exited %d:\n%s", res.code, res.stderr)
	}
	lockFile := filepath.Join(into, "world", "session.lock")
	if err := os.WriteFile(lockFile, []byte("\u2603"), 0o644); err != nil {
		t.Fatal(err)
	}
	holder := exec.CommandContext(t.Context(), "python3", "-c",
		"import fcntl,sys; f=open(sys.argv[1],'r+'); fcntl.lockf(f, fcntl.LOCK_EX); print('locked', flush=True); sys.stdin.read()", lockFile)
	stdin, _ := holder.StdinPipe()
	stdout, _ := holder.StdoutPipe()
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); holder.Wait() }()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "locked\n" {
		t.Fatalf("lock holder: %q, %v", line, err)
	}
	before := snapshot(t, into, nil)

	for _, tc := range []struct {
		name, runID string
		code        int
		want        string
	}{
		{"the same run ID", "r1", 0, "already restored"},
		{"another run ID", "r2", 1, "in use by a running server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := archiver(t, restoreArgs(archive, sum, into, "--replace", "--run-id", tc.runID)...)
			if res.code != tc.code || !strings.Contains(res.stderr, tc.want) {
				t.Fatalf("restore with the server running exited %d, want %d saying %q:\n%s", res.code, tc.code, tc.want, res.stderr)
			}
			untouched(t, into, before, "server")
		})
	}
}

// TestRestoreIntoNotAFolder: an --into that is a regular file or a loop of
// symlinks is a usage error (exit 2) saying so, not "the world is in use",
// and nothing is touched.
func TestRestoreIntoNotAFolder(t *testing.T) {
	archive, sum := craftedArchive(t, []tarEntry{{name: "world/level.dat", body: "x"}})
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, into string)
		want  string
	}{
		{"regular file", func(t *testing.T, into string) {
			if err := os.WriteFile(into, []byte("not a world"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "it is a regular file"},
		{"symlink to a regular file", func(t *testing.T, into string) {
			if err := os.WriteFile(into+".file", []byte("not a world"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Base(into)+".file", into); err != nil {
				t.Fatal(err)
			}
		}, "it is a regular file"},
		{"symlink loop", func(t *testing.T, into string) {
			if err := os.Symlink(filepath.Base(into)+".b", into); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Base(into), into+".b"); err != nil {
				t.Fatal(err)
			}
		}, "symbolic links form a loop"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			into := filepath.Join(dir, "world")
			tc.setup(t, into)
			before := snapshot(t, dir, nil)
			res := archiver(t, restoreArgs(archive, sum, into, "--replace")...)
			if res.code != 2 || !strings.Contains(res.stderr, "not a folder") || !strings.Contains(res.stderr, tc.want) {
				t.Fatalf("exit %d, want 2 saying --into is not a folder (%s):\n%s", res.code, tc.want, res.stderr)
			}
			if strings.Contains(res.stderr, "in use") {
				t.Errorf("the message says the world is in use:\n%s", res.stderr)
			}
			untouched(t, dir, before, filepath.Base(dir))
		})
	}
}
