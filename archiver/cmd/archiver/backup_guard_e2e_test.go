package main

// End-to-end tests of what a backup refuses or guards against: a missing
// archive root, an archive root inside the world through a bind mount or
// as the world itself, an empty world, a bad database URL, a database that
// never answers, and two attempts of one run with different compressions.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/worldbackup/worldbackup/internal/pgtest"
	"github.com/worldbackup/worldbackup/internal/testenv"
)

func TestBackupMissingArchiveRoot(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateWorld(t, e.world)
	if err := os.Remove(e.root); err != nil {
		t.Fatal(err)
	}
	res := archiver(t, e.backupArgs("r1")...)
	if res.code != 2 || !strings.Contains(res.stderr, "archive root is missing") {
		t.Fatalf("exited %d, want 2 saying the root is missing:\n%s", res.code, res.stderr)
	}
	if _, err := os.Lstat(e.root); err == nil {
		t.Error("the archive root was created")
	}
}

func TestBackupWorldIsArchiveRoot(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateWorld(t, e.world)
	res := archiver(t, e.backupArgs("r1", "--archive-root", e.world)...)
	if res.code != 2 || !strings.Contains(res.stderr, "the archive would archive itself") {
		t.Fatalf("exited %d, want 2:\n%s", res.code, res.stderr)
	}
	if rs := rows(t, e.url); len(rs) != 0 {
		t.Errorf("%d rows", len(rs))
	}
}

// TestBackupArchiveRootMountedInWorld: the archive root reached through a
// bind mount inside the world (one volume mounted twice) is skipped by
// device and inode: the archive holds neither itself nor its lock file.
func TestBackupArchiveRootMountedInWorld(t *testing.T) {
	testenv.RequireRoot(t, "bind-mounting the archive root into the world")
	testenv.RequireCommands(t, "util-linux", "unshare", "mount")
	e := newEnv(t, pgtest.URL(t))
	generateRestorableWorld(t, e.world)
	os.WriteFile(filepath.Join(e.root, "older.tar.zst"), []byte("an older archive"), 0o640)
	mnt := filepath.Join(e.world, "backups")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	// In a private mount namespace, so nothing outlives the test.
	args := append([]string{"--mount", "--propagation", "private", "--", "sh", "-c",
		`mount --bind "$0" "$1" && shift && exec "$@"`, e.root, mnt, archiverBin}, e.tarBackupArgs("mounted")...)
	cmd := exec.CommandContext(t.Context(), "unshare", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if code := exitCode(t, cmd.Run()); code != 0 {
		t.Fatalf("backup exited %d:\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "it is the archive folder") {
		t.Errorf("no warning about the archive folder:\n%s", stderr.String())
	}
	restored := filepath.Join(t.TempDir(), "restored")
	archive := e.archivePath("mounted", ".tar.zst")
	if res := archiver(t, restoreArgs(archive, sha256sum(t, archive), restored)...); res.code != 0 {
		t.Fatalf("restore exited %d:\n%s", res.code, res.stderr)
	}
	if got := files(t, filepath.Join(restored, "backups")); len(got) != 0 {
		t.Errorf("the archive holds the archive folder: %q", got)
	}
	if _, err := os.Stat(filepath.Join(restored, "world", "level.dat")); err != nil {
		t.Errorf("the world is missing: %v", err)
	}
}

func TestBackupEmptyWorld(t *testing.T) {
	for _, tt := range []struct {
		name  string
		world func(t *testing.T, dir string)
		extra []string
	}{
		{"no files", func(t *testing.T, dir string) { os.MkdirAll(filepath.Join(dir, "world", "region"), 0o755) }, nil},
		{"everything excluded", generateWorld, []string{"--exclude", "*"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, pgtest.URL(t))
			tt.world(t, e.world)
			res := archiver(t, e.backupArgs("empty", tt.extra...)...)
			if res.code != 1 || !strings.Contains(res.stderr, "refusing an empty backup") || !strings.Contains(res.stderr, "--allow-empty") {
				t.Fatalf("exited %d, want 1 refusing the empty backup:\n%s", res.code, res.stderr)
			}
			if got := files(t, filepath.Join(e.root, "survival")); len(got) != 0 {
				t.Errorf("archive folder holds %q", got)
			}
			if rs := rows(t, e.url); len(rs) != 0 {
				t.Errorf("%d rows", len(rs))
			}
			res = archiver(t, e.backupArgs("empty", append(tt.extra, "--allow-empty")...)...)
			if res.code != 0 {
				t.Fatalf("with --allow-empty: exited %d:\n%s", res.code, res.stderr)
			}
			if rs := rows(t, e.url); len(rs) != 1 || rs[0].FileCount != 0 {
				t.Errorf("rows %+v, want one with no files", rs)
			}
		})
	}
}

// TestBackupBadDatabaseURL: a URL pgx cannot parse is a configuration error
// (exit 2, no retry) naming the parameter, never the password.
func TestBackupBadDatabaseURL(t *testing.T) {
	const password = "hunter2-secret"
	for _, tt := range []struct{ name, query, want string }{
		{"sslmode", "?sslmode=bogus", "sslmode is invalid"},
		{"connect_timeout", "?connect_timeout=abc", "invalid connect_timeout"},
		{"port", "PORT", "invalid port"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			u := "postgres://felis:" + password + "@127.0.0.1:5432/felis" + tt.query
			if tt.query == "PORT" {
				u = "postgres://felis:" + password + "@127.0.0.1:99999/felis"
			}
			e := newEnv(t, u)
			generateWorld(t, e.world)
			res := archiver(t, e.backupArgs("bad-url")...)
			if res.code != 2 || !strings.Contains(res.stderr, tt.want) {
				t.Fatalf("exited %d, want 2 with %q:\n%s", res.code, tt.want, res.stderr)
			}
			out := res.stderr + res.stdout
			if b, err := os.ReadFile(e.tlog); err == nil {
				out += string(b)
			}
			if strings.Contains(out, password) {
				t.Errorf("the password leaked:\n%s", out)
			}
		})
	}
}

// TestBackupDatabaseNeverAnswers: a server that accepts connections and
// never answers fails the run (exit 1) within its bound, leaving no archive
// and no temp file.
func TestBackupDatabaseNeverAnswers(t *testing.T) {
	hole := pgtest.NewBlackhole(t)
	e := newEnv(t, fmt.Sprintf("postgres://felis:pw@%s/felis?sslmode=disable&connect_timeout=2", hole.Addr()))
	generateWorld(t, e.world)
	res := archiver(t, e.backupArgs("hole")...)
	if res.code != 1 {
		t.Fatalf("exited %d, want 1:\n%s", res.code, res.stderr)
	}
	if s := summary(t, e.tlog); s["status"] != "failed" {
		t.Errorf("summary %v", s)
	}
	if got := files(t, filepath.Join(e.root, "survival")); len(got) != 0 {
		t.Errorf("archive folder holds %q, want nothing", got)
	}
}

// TestBackupConcurrentCompressions: two attempts of one run ID at once, one
// zstd and one gzip: one archive, one row, nothing without a row.
func TestBackupConcurrentCompressions(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateWorld(t, e.world)
	if res := archiver(t, "migrate", "--config", e.config); res.code != 0 {
		t.Fatalf("migrate exited %d:\n%s", res.code, res.stderr)
	}
	var wg sync.WaitGroup
	results := make([]result, 2)
	for i, c := range []string{"zstd", "gzip"} {
		wg.Go(func() {
			cmd := exec.CommandContext(t.Context(), archiverBin, e.tarBackupArgs("mix1", "--compression", c, "--termination-log", "")...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			code := 0
			if err := cmd.Run(); err != nil {
				code = -1
				if ee, ok := err.(*exec.ExitError); ok {
					code = ee.ExitCode()
				}
			}
			results[i] = result{code: code, stderr: stderr.String()}
		})
	}
	wg.Wait()
	for i, r := range results {
		if r.code != 0 {
			t.Errorf("attempt %d exited %d:\n%s", i, r.code, r.stderr)
		}
	}
	rs := rows(t, e.url)
	if len(rs) != 1 {
		t.Fatalf("%d rows, want 1", len(rs))
	}
	got := files(t, filepath.Join(e.root, "survival"))
	if len(got) != 1 || filepath.Join(e.root, "survival", got[0]) != rs[0].ArchiveRef {
		t.Errorf("archive folder holds %q, want only the recorded %s", got, rs[0].ArchiveRef)
	}
	if !slices.Contains([]string{"mix1.tar.zst", "mix1.tar.gz"}, filepath.Base(rs[0].ArchiveRef)) {
		t.Errorf("row names %s", rs[0].ArchiveRef)
	}
}
