package main

// End-to-end tests of the built binary against a real PostgreSQL
// (internal/pgtest) and GNU tar.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"

	"github.com/worldbackup/worldbackup/internal/pgtest"
	"github.com/worldbackup/worldbackup/internal/worldgen"
)

// testVersion is stamped into the binary under test.
const testVersion = "v0.0.0-e2e"

// archiverBin is the binary under test, built by TestMain.
var archiverBin string

func TestMain(m *testing.M) {
	dir, err := binDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	archiverBin = filepath.Join(dir, "archiver")
	build := exec.Command("go", "build", "-o", archiverBin, "-ldflags", "-X main.version="+testVersion, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "building the archiver: %v\n", err)
		os.Exit(1)
	}
	pgtest.Main(m)
}

// binDir returns a folder for the binary under test: the test binary's own
// folder when `go test` runs it from its temporary work folder (removed
// with it), else a new temp folder.
func binDir() (string, error) {
	if exe, err := os.Executable(); err == nil {
		dir := filepath.Dir(exe)
		if strings.HasPrefix(filepath.Base(filepath.Dir(dir)), "go-build") {
			return dir, nil
		}
	}
	return os.MkdirTemp("", "archiver-e2e-")
}

// result is what one archiver process did.
type result struct {
	code           int
	stdout, stderr string
}

func archiver(t *testing.T, args ...string) result {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), archiverBin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return result{code: exitCode(t, err), stdout: stdout.String(), stderr: stderr.String()}
}

// startArchiver starts the archiver with args in the background and
// returns it, the channel its exit is sent on and its stderr; a run still
// going when the test ends is killed.
func startArchiver(t *testing.T, args ...string) (*exec.Cmd, <-chan error, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(archiverBin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd, done, &stderr
}

func exitCode(t *testing.T, err error) int {
	t.Helper()
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	t.Fatalf("running the archiver: %v", err)
	return -1
}

// env is one test's world, archive root, config and database.
type env struct {
	world, root, config, url, tlog string
}

func newEnv(t *testing.T, url string) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{
		world:  filepath.Join(dir, "world"),
		root:   filepath.Join(dir, "backups"),
		config: filepath.Join(dir, "felis.toml"),
		url:    url,
		tlog:   filepath.Join(dir, "termination-log"),
	}
	// The archive root is a mounted volume: it exists before the run.
	if err := os.Mkdir(e.root, 0o755); err != nil {
		t.Fatal(err)
	}
	writeConfig(t, e.config, fmt.Sprintf("[database]\nurl = %q\n[archive]\nlocal_path = \"/nonexistent\"\n", url))
	return e
}

func writeConfig(t *testing.T, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// backupArgs is the Job's command line (see the contract), with this env's
// folders.
func (e *env) backupArgs(runID string, extra ...string) []string {
	return append([]string{"backup", "--server", "survival", "--run-id", runID, "--former-owner", "alice",
		"--world", e.world, "--config", e.config, "--archive-root", e.root,
		"--log-format", "json", "--termination-log", e.tlog, "--progress-interval", "100ms"}, extra...)
}

// tarBackupArgs is backupArgs with --format tar, for the tests that read
// or break the tar archive itself (the default format is chunked).
func (e *env) tarBackupArgs(runID string, extra ...string) []string {
	return e.backupArgs(runID, append([]string{"--format", "tar"}, extra...)...)
}

// tarBackups runs a tar backup of each run ID in turn, failing t at the
// first that does not exit 0.
func (e *env) tarBackups(t *testing.T, runIDs ...string) {
	t.Helper()
	for _, id := range runIDs {
		if r := archiver(t, e.tarBackupArgs(id)...); r.code != 0 {
			t.Fatalf("backup %s: exit %d: %s", id, r.code, r.stderr)
		}
	}
}

func (e *env) archivePath(runID, ext string) string {
	return filepath.Join(e.root, "survival", runID+ext)
}

// generateWorld writes a small generated server folder plus every odd entry.
// generateRestorableWorld is generateWorld without the symlink that leads
// out of the world (which a restore refuses): a world every restore
// recreates whole.
func generateRestorableWorld(t *testing.T, dir string) {
	t.Helper()
	generateWorld(t, dir)
	if err := os.Remove(filepath.Join(dir, linkOutOfWorld)); err != nil {
		t.Fatal(err)
	}
}

func generateWorld(t *testing.T, dir string) {
	t.Helper()
	if _, err := worldgen.Generate(dir, worldgen.Options{Size: 4 << 20, Seed: 7}); err != nil {
		t.Fatal(err)
	}
	w := func(rel string, data string, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	w("world/odd/"+strings.Repeat("n", 200)+".dat", "long name", 0o644)
	w("world/odd/"+strings.Repeat("deep-folder/", 20)+"file.json", "long path", 0o644)
	w("world/odd/latin1-\xe9t\xe9.dat", "not utf-8", 0o644)
	w("world/odd/ünïcødé 日本.json", "utf-8", 0o644)
	w("world/odd/owner-only.dat", "0600", 0o600)
	if os.Geteuid() == 0 {
		// Paper's level.dat: 0600, owned by the game's UID; root reads it.
		must(os.Chown(filepath.Join(dir, "world/level.dat"), 1000, 1000))
		must(os.Chmod(filepath.Join(dir, "world/level.dat"), 0o600))
	}
	must(os.Symlink("/etc/passwd", filepath.Join(dir, "world/odd/passwd")))
	must(os.Symlink("../level.dat", filepath.Join(dir, "world/odd/level-link")))
	must(os.Symlink("missing", filepath.Join(dir, "world/odd/dangling")))
	must(os.Link(filepath.Join(dir, "world/odd/owner-only.dat"), filepath.Join(dir, "world/odd/hardlink.dat")))
	must(os.MkdirAll(filepath.Join(dir, "world/odd/empty/nested"), 0o755))
	must(unix.Mkfifo(filepath.Join(dir, "world/odd/fifo"), 0o644))
	l, err := net.Listen("unix", filepath.Join(dir, "world/odd/sock"))
	must(err)
	t.Cleanup(func() { l.Close() })
}

// node is one entry of a tree snapshot.
type node struct {
	mode     fs.FileMode // type and permission bits
	uid, gid uint32
	sum      string // regular files: sha256
	link     string // symlinks: target
	mtime    int64  // regular files: seconds
	ino      uint64
}

// defaultExcluded says whether the default excludes (*.jar, cache/, logs/,
// *.tmp) or the skipping of special files leave rel out of the archive.
func defaultExcluded(rel string, d fs.DirEntry) bool {
	base := path.Base(rel)
	if m, _ := path.Match("*.jar", base); m {
		return true
	}
	if m, _ := path.Match("*.tmp", base); m {
		return true
	}
	if d.IsDir() && (base == "cache" || base == "logs") {
		return true
	}
	return d.Type()&(fs.ModeNamedPipe|fs.ModeSocket|fs.ModeDevice|fs.ModeCharDevice) != 0
}

func snapshot(t *testing.T, root string, skip func(rel string, d fs.DirEntry) bool) map[string]node {
	t.Helper()
	nodes := map[string]node{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if skip != nil && skip(rel, d) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		st := info.Sys().(*syscall.Stat_t)
		n := node{mode: info.Mode(), uid: st.Uid, gid: st.Gid, ino: st.Ino}
		switch {
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			s := sha256.Sum256(b)
			n.sum = hex.EncodeToString(s[:])
			n.mtime = info.ModTime().Unix()
		case info.Mode()&fs.ModeSymlink != 0:
			if n.link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		nodes[rel] = n
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return nodes
}

// compareTrees checks that got equals want entry by entry, hard links
// included.
func compareTrees(t *testing.T, got, want map[string]node) {
	t.Helper()
	for rel, w := range want {
		g, ok := got[rel]
		if !ok {
			t.Errorf("extracted tree lacks %q", rel)
			continue
		}
		if g.mode != w.mode || g.sum != w.sum || g.link != w.link || g.mtime != w.mtime {
			t.Errorf("%q: extracted mode %v sha256 %.12s link %q mtime %d; source mode %v sha256 %.12s link %q mtime %d",
				rel, g.mode, g.sum, g.link, g.mtime, w.mode, w.sum, w.link, w.mtime)
		}
		if os.Geteuid() == 0 && (g.uid != w.uid || g.gid != w.gid) {
			t.Errorf("%q: extracted owner %d:%d, source %d:%d", rel, g.uid, g.gid, w.uid, w.gid)
		}
	}
	for rel := range got {
		if _, ok := want[rel]; !ok {
			t.Errorf("extracted tree has unexpected %q", rel)
		}
	}
	// Hard links: names sharing an inode in the source share one after.
	byIno := map[uint64][]string{}
	for rel, w := range want {
		if w.mode.IsRegular() {
			byIno[w.ino] = append(byIno[w.ino], rel)
		}
	}
	links := 0
	for _, names := range byIno {
		for _, n := range names[1:] {
			links++
			if got[n].ino != got[names[0]].ino {
				t.Errorf("%q and %q are hard links in the source but not after extraction", names[0], n)
			}
		}
	}
	if links == 0 {
		t.Error("the source has no hard link: the test lost its point")
	}
}

type row struct {
	RunID, Server, ArchiveRef, SHA256, Compression string
	FormerOwner                                    *string
	SizeBytes, FileCount                           int64
}

func rows(t *testing.T, url string) []row {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var exists bool
	if err := conn.QueryRow(t.Context(), `SELECT to_regclass('world_backups') IS NOT NULL`).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if !exists {
		return nil
	}
	rs, err := conn.Query(t.Context(), `SELECT run_id, server, archive_ref, sha256, compression, former_owner, size_bytes, file_count
		FROM world_backups ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rs, pgx.RowToStructByPos[row])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// files lists the names in a folder ("" for a missing folder).
func files(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func summary(t *testing.T, p string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("termination log: %v", err)
	}
	if bytes.Count(b, []byte("\n")) != 1 {
		t.Errorf("termination log is not one line: %q", b)
	}
	var s map[string]any
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("termination log %q: %v", b, err)
	}
	return s
}

func sha256sum(t *testing.T, p string) string {
	t.Helper()
	out, err := exec.Command("sha256sum", p).Output()
	if err != nil {
		t.Fatalf("sha256sum: %v", err)
	}
	return strings.Fields(string(out))[0]
}

func TestBackupEndToEnd(t *testing.T) {
	tests := []struct {
		compression, ext string
		tarFlag          string
	}{
		{"zstd", ".tar.zst", "--zstd"},
		{"gzip", ".tar.gz", "--gzip"},
		{"none", ".tar", ""},
	}
	for _, tt := range tests {
		t.Run(tt.compression, func(t *testing.T) {
			e := newEnv(t, pgtest.URL(t))
			generateWorld(t, e.world)

			res := archiver(t, e.tarBackupArgs("run-"+tt.compression, "--compression", tt.compression)...)
			if res.code != 0 {
				t.Fatalf("backup exited %d:\n%s", res.code, res.stderr)
			}
			for _, want := range []string{`"backup done"`, `"special file skipped"`, `"world/odd/fifo"`, `"mb_per_s"`} {
				if !strings.Contains(res.stderr, want) {
					t.Errorf("logs lack %s:\n%s", want, res.stderr)
				}
			}
			archive := e.archivePath("run-"+tt.compression, tt.ext)
			if got := files(t, filepath.Dir(archive)); !slices.Equal(got, []string{filepath.Base(archive)}) {
				t.Errorf("archive folder holds %q, want only the archive", got)
			}

			// The row matches the file, as stat and sha256sum see it.
			rs := rows(t, e.url)
			if len(rs) != 1 {
				t.Fatalf("%d rows, want 1", len(rs))
			}
			r := rs[0]
			st, err := os.Stat(archive)
			if err != nil {
				t.Fatal(err)
			}
			if r.SizeBytes != st.Size() || r.SHA256 != sha256sum(t, archive) || r.ArchiveRef != archive ||
				r.Compression != tt.compression || r.Server != "survival" || r.FormerOwner == nil || *r.FormerOwner != "alice" {
				t.Errorf("row %+v does not match the archive %s (%d bytes)", r, archive, st.Size())
			}
			s := summary(t, e.tlog)
			if s["status"] != "done" || s["sha256"] != r.SHA256 || s["archive_ref"] != archive {
				t.Errorf("summary %v", s)
			}

			// GNU tar extracts a tree equal to the source.
			into := t.TempDir()
			args := []string{"-xf", archive, "-C", into}
			if tt.tarFlag != "" {
				args = append([]string{tt.tarFlag}, args...)
			}
			if out, err := exec.Command("tar", args...).CombinedOutput(); err != nil {
				t.Fatalf("tar %v: %v\n%s", args, err, out)
			}
			want := snapshot(t, e.world, defaultExcluded)
			got := snapshot(t, into, nil)
			compareTrees(t, got, want)
			if got["world/odd/passwd"].link != "/etc/passwd" {
				t.Errorf("the link to /etc/passwd was not stored as a link: %+v", got["world/odd/passwd"])
			}
			var files int64
			for _, n := range want {
				if !n.mode.IsDir() {
					files++
				}
			}
			if r.FileCount != files {
				t.Errorf("row counts %d files, the tree has %d", r.FileCount, files)
			}

			// verify, list.
			if res := archiver(t, "verify", "--config", e.config, "--run-id", r.RunID); res.code != 0 {
				t.Errorf("verify --run-id exited %d:\n%s", res.code, res.stderr)
			}
			// A run ID the catalog does not hold is the caller's mistake (exit 2), pointed at list.
			if res := archiver(t, "verify", "--config", e.config, "--run-id", r.RunID+"-typo"); res.code != 2 ||
				!strings.Contains(res.stderr, "archiver list") {
				t.Errorf("verify --run-id of an unknown run exited %d, want 2 naming archiver list:\n%s", res.code, res.stderr)
			}
			if res := archiver(t, "verify", "--archive", archive, "--sha256", r.SHA256); res.code != 0 {
				t.Errorf("verify --archive --sha256 exited %d:\n%s", res.code, res.stderr)
			}
			res = archiver(t, "list", "--config", e.config, "--json")
			var listed []map[string]any
			if err := json.Unmarshal([]byte(res.stdout), &listed); err != nil || res.code != 0 || len(listed) != 1 ||
				listed[0]["sha256"] != r.SHA256 || listed[0]["run_id"] != r.RunID {
				t.Errorf("list --json exited %d: %s (%v)", res.code, res.stdout, err)
			}
			res = archiver(t, "list", "--config", e.config, "--server", "survival")
			if res.code != 0 || !strings.Contains(res.stdout, r.RunID) || !strings.Contains(res.stdout, archive) {
				t.Errorf("list exited %d:\n%s%s", res.code, res.stdout, res.stderr)
			}
			res = archiver(t, "list", "--config", e.config, "--server", "creative", "--json")
			if res.code != 0 || strings.TrimSpace(res.stdout) != "[]" {
				t.Errorf("list of another server exited %d: %q", res.code, res.stdout)
			}
		})
	}
}

func TestBackupSameRunIDAgain(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateWorld(t, e.world)
	if res := archiver(t, e.tarBackupArgs("again")...); res.code != 0 {
		t.Fatalf("first backup exited %d:\n%s", res.code, res.stderr)
	}
	archive := e.archivePath("again", ".tar.zst")
	before, err := os.Stat(archive)
	if err != nil {
		t.Fatal(err)
	}
	// The world changes; the run must still write nothing.
	os.WriteFile(filepath.Join(e.world, "world", "new.dat"), []byte("new"), 0o644)
	res := archiver(t, e.tarBackupArgs("again")...)
	if res.code != 0 {
		t.Fatalf("second backup exited %d:\n%s", res.code, res.stderr)
	}
	if !strings.Contains(res.stderr, "run already recorded; nothing to do") {
		t.Errorf("second run does not say it did nothing:\n%s", res.stderr)
	}
	after, err := os.Stat(archive)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) || after.Size() != before.Size() {
		t.Error("the archive was rewritten")
	}
	if got := files(t, filepath.Dir(archive)); len(got) != 1 {
		t.Errorf("archive folder holds %q", got)
	}
	if rs := rows(t, e.url); len(rs) != 1 {
		t.Errorf("%d rows, want 1", len(rs))
	}
	if s := summary(t, e.tlog); s["status"] != "already-recorded" {
		t.Errorf("summary %v", s)
	}
}

func TestBackupConcurrentSameRunID(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateWorld(t, e.world)
	// Migrate first, so both attempts race on the run, not on the schema.
	if res := archiver(t, "migrate", "--config", e.config); res.code != 0 {
		t.Fatalf("migrate exited %d:\n%s", res.code, res.stderr)
	}
	var wg sync.WaitGroup
	results := make([]result, 3)
	for i := range results {
		wg.Go(func() {
			cmd := exec.CommandContext(t.Context(), archiverBin, e.tarBackupArgs("concurrent", "--termination-log", "")...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				code = -1
			}
			results[i] = result{code: code, stderr: stderr.String()}
		})
	}
	wg.Wait()
	done := 0
	for i, r := range results {
		if r.code != 0 {
			t.Errorf("attempt %d exited %d:\n%s", i, r.code, r.stderr)
		}
		if strings.Contains(r.stderr, `"backup done"`) {
			done++
		}
	}
	if done != 1 {
		t.Errorf("%d attempts wrote the archive, want 1", done)
	}
	if rs := rows(t, e.url); len(rs) != 1 {
		t.Errorf("%d rows, want 1", len(rs))
	}
	if got := files(t, filepath.Join(e.root, "survival")); !slices.Equal(got, []string{"concurrent.tar.zst"}) {
		t.Errorf("archive folder holds %q, want one archive", got)
	}
}

// bigSparseFile adds a file of size bytes that takes no disk space: reading
// it keeps a backup busy long enough to be interrupted mid-write.
func bigSparseFile(t *testing.T, world string, size int64) string {
	t.Helper()
	p := filepath.Join(world, "world", "region", "r.99.99.mca")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	return p
}

// startBackup starts a backup and waits until its temp file appears.
func startBackup(t *testing.T, e *env, runID string, extra ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), archiverBin, e.tarBackupArgs(runID, extra...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(e.root, "survival")
	for {
		for _, n := range files(t, dir) {
			if strings.HasPrefix(n, "."+runID+".tar.zst.tmp-") {
				return cmd, &stderr
			}
		}
		select {
		case <-t.Context().Done():
			t.Fatal("no temp file appeared")
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func TestBackupKilledMidWrite(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateWorld(t, e.world)
	big := bigSparseFile(t, e.world, 64<<30)

	cmd, stderr := startBackup(t, e, "killed")
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if strings.Contains(stderr.String(), `"backup done"`) {
		t.Fatal("the backup finished before it was killed")
	}
	dir := filepath.Join(e.root, "survival")
	left := files(t, dir)
	if slices.Contains(left, "killed.tar.zst") {
		t.Fatalf("a final archive exists after kill -9: %q", left)
	}
	if rs := rows(t, e.url); len(rs) != 0 {
		t.Fatalf("%d rows after kill -9", len(rs))
	}

	// The rerun (of a world that shrank meanwhile) succeeds and removes the
	// killed attempt's temp file.
	if err := os.Truncate(big, 1<<20); err != nil {
		t.Fatal(err)
	}
	res := archiver(t, e.tarBackupArgs("killed")...)
	if res.code != 0 {
		t.Fatalf("rerun exited %d:\n%s", res.code, res.stderr)
	}
	if !strings.Contains(res.stderr, "removed temp files of an earlier attempt") {
		t.Errorf("the rerun did not remove the killed attempt's temp file (left: %q):\n%s", left, res.stderr)
	}
	if got := files(t, dir); !slices.Equal(got, []string{"killed.tar.zst"}) {
		t.Errorf("archive folder holds %q, want only the archive", got)
	}
	rs := rows(t, e.url)
	if len(rs) != 1 || rs[0].SHA256 != sha256sum(t, e.archivePath("killed", ".tar.zst")) {
		t.Errorf("rows %+v", rs)
	}
}

func TestBackupDatabaseStoppedBeforeInsert(t *testing.T) {
	srv := pgtest.NewPrivate(t)
	e := newEnv(t, srv.URL())
	generateWorld(t, e.world)
	bigSparseFile(t, e.world, 512<<20)

	cmd, stderr := startBackup(t, e, "db-stopped")
	// Freeze the archiver mid-write, stop the database, let it finish.
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	code := exitCode(t, cmd.Wait())
	if code != 1 {
		t.Fatalf("backup exited %d, want 1:\n%s", code, stderr)
	}
	if !strings.Contains(stderr.String(), "removed the unrecorded archive") {
		t.Errorf("logs do not say the archive was removed:\n%s", stderr)
	}
	if got := files(t, filepath.Join(e.root, "survival")); len(got) != 0 {
		t.Errorf("archive folder holds %q, want nothing", got)
	}
	if s := summary(t, e.tlog); s["status"] != "failed" || !strings.Contains(fmt.Sprint(s["error"]), "catalog") {
		t.Errorf("summary %v", s)
	}
	srv.Start()
	if rs := rows(t, e.url); len(rs) != 0 {
		t.Errorf("%d rows, want 0", len(rs))
	}
}

func TestBackupDatabaseUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	const password = "hunter2-secret"
	e := newEnv(t, "postgres://felis:"+password+"@"+addr+"/felis?sslmode=disable&connect_timeout=5")
	generateWorld(t, e.world)
	res := archiver(t, e.backupArgs("unreachable")...)
	if res.code != 1 {
		t.Fatalf("exited %d, want 1:\n%s", res.code, res.stderr)
	}
	if strings.Contains(res.stderr, password) {
		t.Errorf("the password leaked into the logs:\n%s", res.stderr)
	}
	if b, _ := os.ReadFile(e.tlog); bytes.Contains(b, []byte(password)) {
		t.Errorf("the password leaked into the termination log: %s", b)
	}
	if got := files(t, filepath.Join(e.root, "survival")); len(got) != 0 {
		t.Errorf("archive folder holds %q, want nothing", got)
	}
}

func TestBackupUsageErrors(t *testing.T) {
	dir := t.TempDir()
	world := filepath.Join(dir, "world")
	os.MkdirAll(world, 0o755)
	const password = "hunter2-secret"
	good := filepath.Join(dir, "good.toml")
	writeConfig(t, good, "[database]\nurl = \"postgres://u:"+password+"@127.0.0.1:1/x\"\n")
	configs := map[string]string{
		"nourl.toml":   "[archive]\nlocal_path = \"/backups\"\n",
		"unknown.toml": "[database]\nurl = \"postgres://u:" + password + "@db/x\"\npasword = \"x\"\n",
		"badtoml.toml": "[database]\nurl = \"postgres://u:" + password + "@db/x\n",
		"noroot.toml":  "[database]\nurl = \"postgres://u:" + password + "@db/x\"\n",
	}
	for name, c := range configs {
		writeConfig(t, filepath.Join(dir, name), c)
	}
	base := func(extra ...string) []string {
		return append([]string{"backup", "--server", "survival", "--run-id", "r1", "--world", world,
			"--config", good, "--archive-root", filepath.Join(dir, "backups"), "--termination-log", filepath.Join(dir, "tlog")}, extra...)
	}
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"no command", nil, []string{"Usage"}},
		{"unknown command", []string{"bakup"}, []string{`unknown command "bakup"`}},
		{"unknown flag", base("--wrold", "x"), []string{"-wrold"}},
		{"stray argument", base("extra"), []string{`unexpected argument "extra"`}},
		{"missing server", []string{"backup", "--run-id", "r1", "--config", good}, []string{"--server is required"}},
		{"bad server", base("--server", "Survival"), []string{`"Survival"`}},
		{"bad run ID", base("--run-id", "../x"), []string{`"../x"`}},
		{"missing config", base("--config", filepath.Join(dir, "missing.toml")), []string{"missing.toml", "does not exist"}},
		{"config without url", base("--config", filepath.Join(dir, "nourl.toml")), []string{"nourl.toml", "[database] url", "missing"}},
		{"unknown key", base("--config", filepath.Join(dir, "unknown.toml")), []string{"unknown.toml", `"database.pasword"`}},
		{"bad toml", base("--config", filepath.Join(dir, "badtoml.toml")), []string{"badtoml.toml", "line 2"}},
		{"no archive root", []string{"backup", "--server", "s", "--run-id", "r", "--config", filepath.Join(dir, "noroot.toml")}, []string{"--archive-root", "local_path"}},
		{"relative archive root", base("--archive-root", "backups"), []string{"not an absolute path"}},
		{"archive root in the world", base("--archive-root", filepath.Join(world, "backups")), []string{"inside the world"}},
		{"bad compression", base("--compression", "xz"), []string{`"xz"`}},
		{"bad exclude", base("--exclude", "[x"), []string{"--exclude", `"[x"`}},
		{"bad log format", base("--log-format", "xml"), []string{"json, text or auto"}},
		{"restore without checksum", []string{"restore", "--archive", "x", "--into", filepath.Join(dir, "backups")}, []string{"archiver restore: --sha256 is required"}},
		{"verify needs one target", []string{"verify"}, []string{"exactly one of --run-id and --archive"}},
		{"verify bad archive name", []string{"verify", "--archive", "/tmp/x.zip", "--sha256", strings.Repeat("a", 64)}, []string{".tar.zst"}},
		{"list bad server", []string{"list", "--server", "A"}, []string{`"A"`}},
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
			if strings.Contains(res.stderr+res.stdout, password) {
				t.Errorf("output reveals the password:\n%s", res.stderr)
			}
			if got := files(t, filepath.Join(dir, "backups")); len(got) != 0 {
				t.Errorf("something was written: %q", got)
			}
		})
	}
}

func TestHelpAndVersion(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"--version"}, []string{"archiver " + testVersion}},
		{[]string{"--help"}, []string{"Exit codes:", "0  done", "1  failed", "2  usage", "3  archive refused"}},
		{[]string{"backup", "--help"}, []string{"--run-id", "--archive-root", "--termination-log", "--allow-empty", "Exit codes", "3 archive refused"}},
		{[]string{"verify", "-h"}, []string{"--sha256"}},
		{[]string{"restore", "--help"}, []string{"--archive", "--sha256", "--into", "--replace", "--max-bytes", "--max-entries", "--run-id", "world_state", "no database"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			res := archiver(t, tt.args...)
			if res.code != 0 {
				t.Fatalf("exited %d:\n%s", res.code, res.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(res.stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, res.stdout)
				}
			}
		})
	}
}

func TestVerifyDetectsDamage(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateWorld(t, e.world)
	if res := archiver(t, e.tarBackupArgs("damaged")...); res.code != 0 {
		t.Fatalf("backup exited %d:\n%s", res.code, res.stderr)
	}
	archive := e.archivePath("damaged", ".tar.zst")
	good, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		damage func(b []byte) []byte
		want   string
	}{
		{"flipped byte", func(b []byte) []byte { b[len(b)/2] ^= 1; return b }, "sha256 is"},
		{"truncated", func(b []byte) []byte { return b[:len(b)-1000] }, "size is"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.WriteFile(archive, tt.damage(bytes.Clone(good)), 0o640); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{
				{"verify", "--config", e.config, "--run-id", "damaged"},
				{"verify", "--config", e.config, "--archive", archive},
			} {
				res := archiver(t, args...)
				if res.code != 3 || !strings.Contains(res.stderr, tt.want) {
					t.Errorf("%v exited %d, want 3 with %q:\n%s", args[1:], res.code, tt.want, res.stderr)
				}
			}
		})
	}
	os.WriteFile(archive, good, 0o640)
	if res := archiver(t, "verify", "--config", e.config, "--archive", archive); res.code != 0 {
		t.Errorf("verify of the repaired archive exited %d:\n%s", res.code, res.stderr)
	}
}

func TestMigrate(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	res := archiver(t, "migrate", "--config", e.config)
	if res.code != 0 || !strings.Contains(res.stdout, "applied 0001") {
		t.Fatalf("migrate exited %d: %s%s", res.code, res.stdout, res.stderr)
	}
	res = archiver(t, "migrate", "--config", e.config)
	if res.code != 0 || !strings.Contains(res.stdout, "up to date") {
		t.Fatalf("second migrate exited %d: %s%s", res.code, res.stdout, res.stderr)
	}
	// --no-migrate on a fresh database: the insert fails, nothing is left.
	e2 := newEnv(t, pgtest.URL(t))
	generateWorld(t, e2.world)
	res = archiver(t, e2.backupArgs("nomigrate", "--no-migrate")...)
	if res.code != 1 {
		t.Fatalf("backup --no-migrate on an empty database exited %d:\n%s", res.code, res.stderr)
	}
	if got := files(t, filepath.Join(e2.root, "survival")); len(got) != 0 {
		t.Errorf("archive folder holds %q", got)
	}
}
