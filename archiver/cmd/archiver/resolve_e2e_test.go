package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/worldbackup/worldbackup/internal/pgtest"
	"github.com/worldbackup/worldbackup/internal/worldgen"
	"github.com/worldbackup/worldbackup/jobapi"
)

// TestRestoreByRunEndToEnd runs the restore by run as its Job does, against
// a real catalog: archiver resolve (the init container) writes the run's
// archive and checksum to a file, archiver restore --archive-from (the
// extractor, no config) restores it. latest after two backups is the
// second; a rerun of the same restore after a third backup does nothing;
// a bad run reference fails at resolve with what to fix.
func TestRestoreByRunEndToEnd(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	level := filepath.Join(e.world, "world", "level.dat")
	backUpLevel := func(runID, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(level), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(level, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if res := archiver(t, e.tarBackupArgs(runID)...); res.code != 0 {
			t.Fatalf("backup %s exited %d:\n%s", runID, res.code, res.stderr)
		}
	}
	backUpLevel("run-1", "first")
	backUpLevel("run-2", "second")

	dir := t.TempDir()
	handoff := filepath.Join(dir, "run.json")
	resolve := func(server, from string, extra ...string) result {
		t.Helper()
		return archiver(t, append([]string{"resolve", "--server", server, "--from-run", from, "--config", e.config,
			"--within", e.root, "--out", handoff, "--log-format", "json"}, extra...)...)
	}
	into := filepath.Join(dir, "target")
	if err := os.Mkdir(into, 0o755); err != nil {
		t.Fatal(err)
	}
	restore := func(runID string) result {
		t.Helper()
		// No --config, no database: the extractor reads only the file.
		return archiver(t, "restore", "--archive-from", handoff, "--into", into, "--replace", "--run-id", runID,
			"--log-format", "json", "--termination-log", filepath.Join(dir, "tlog"))
	}
	restored := func() string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(into, "world", "level.dat"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	t.Run("latest after two backups restores the second", func(t *testing.T) {
		if res := resolve("survival", jobapi.RunLatest); res.code != 0 {
			t.Fatalf("resolve exited %d:\n%s", res.code, res.stderr)
		}
		got, err := jobapi.ReadResolvedRun(handoff)
		if err != nil {
			t.Fatal(err)
		}
		want := jobapi.ResolvedRun{Server: "survival", RunID: "run-2", ArchiveRef: e.archivePath("run-2", ".tar.zst"),
			SHA256: sha256sum(t, e.archivePath("run-2", ".tar.zst"))}
		if got != want {
			t.Fatalf("resolved %+v, want %+v", got, want)
		}
		if res := restore("restore-latest"); res.code != 0 {
			t.Fatalf("restore exited %d:\n%s", res.code, res.stderr)
		}
		if got := restored(); got != "second" {
			t.Fatalf("restored level.dat = %q, want the second backup's", got)
		}
		s := summary(t, filepath.Join(dir, "tlog"))
		if s["status"] != "restored" || s["archive_ref"] != want.ArchiveRef || s["sha256"] != want.SHA256 {
			t.Errorf("termination summary %v", s)
		}
	})
	t.Run("the same restore after a newer backup does nothing", func(t *testing.T) {
		backUpLevel("run-3", "third")
		if res := resolve("survival", jobapi.RunLatest); res.code != 0 {
			t.Fatalf("resolve exited %d:\n%s", res.code, res.stderr)
		}
		if res := restore("restore-latest"); res.code != 0 || !strings.Contains(res.stdout, "already restored") {
			t.Fatalf("restore exited %d, stdout %q:\n%s", res.code, res.stdout, res.stderr)
		}
		if got := restored(); got != "second" {
			t.Fatalf("level.dat = %q: a rerun of the restore replaced the world", got)
		}
		if res := restore("restore-latest-2"); res.code != 0 || restored() != "third" {
			t.Fatalf("a new restore of latest: exit %d, level.dat %q:\n%s", res.code, restored(), res.stderr)
		}
	})
	t.Run("a run ID", func(t *testing.T) {
		if res := resolve("survival", "run-1"); res.code != 0 {
			t.Fatalf("resolve exited %d:\n%s", res.code, res.stderr)
		}
		if res := restore("restore-run-1"); res.code != 0 || restored() != "first" {
			t.Fatalf("restore exit %d, level.dat %q:\n%s", res.code, restored(), res.stderr)
		}
	})
	t.Run("stdout without --out", func(t *testing.T) {
		res := archiver(t, "resolve", "--server", "survival", "--from-run", "latest", "--config", e.config)
		var r jobapi.ResolvedRun
		if res.code != 0 || json.Unmarshal([]byte(res.stdout), &r) != nil || r.RunID != "run-3" {
			t.Fatalf("exit %d, stdout %q:\n%s", res.code, res.stdout, res.stderr)
		}
	})

	// A second server's run, for the wrong-server case.
	lobby := append([]string{}, e.tarBackupArgs("lobby-1")...)
	lobby[2] = "lobby"
	if res := archiver(t, lobby...); res.code != 0 {
		t.Fatalf("backup of lobby exited %d:\n%s", res.code, res.stderr)
	}
	for _, tt := range []struct {
		name, server, from string
		extra              []string
		code               int
		want               []string
	}{
		{name: "unknown run ID", server: "survival", from: "run-9", code: exitUsage,
			want: []string{"no such run", "archiver list --server survival", `run \"run-9\"`}},
		{name: "server without a run", server: "nether", from: jobapi.RunLatest, code: exitUsage,
			want: []string{"no successful run", "back it up first", `server \"nether\"`}},
		{name: "run of another server", server: "survival", from: "lobby-1", code: exitUsage,
			want: []string{"another server", `run of server \"lobby\", not of \"survival\"`, "fromServer"}},
		{name: "archive outside --within", server: "survival", from: "run-1", extra: []string{"--within", "/elsewhere"}, code: exitUsage,
			want: []string{"not where this restore can read it"}},
		{name: "S3 store asked, file archive", server: "survival", from: "run-1", extra: []string{"--within", "s3://"}, code: exitUsage,
			want: []string{"not where this restore can read it"}},
		{name: "not a run reference", server: "survival", from: "../x", code: exitUsage,
			want: []string{"--from-run", `"latest"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.Remove(handoff); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			res := resolve(tt.server, tt.from, tt.extra...)
			if res.code != tt.code {
				t.Fatalf("exit %d, want %d:\n%s", res.code, tt.code, res.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(res.stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, res.stderr)
				}
			}
			if _, err := os.Stat(handoff); !os.IsNotExist(err) {
				t.Errorf("a failed resolve left %s (%v)", handoff, err)
			}
		})
	}

	t.Run("the extractor still checks the checksum", func(t *testing.T) {
		forged := jobapi.ResolvedRun{Server: "survival", RunID: "run-1", ArchiveRef: e.archivePath("run-1", ".tar.zst"),
			SHA256: strings.Repeat("0", 64)}
		if err := os.WriteFile(handoff, forged.Encode(), 0o644); err != nil {
			t.Fatal(err)
		}
		before := restored()
		if res := restore("restore-forged"); res.code != exitRefused || !strings.Contains(res.stderr, "checksum mismatch") {
			t.Fatalf("exit %d, want %d (checksum mismatch):\n%s", res.code, exitRefused, res.stderr)
		}
		if restored() != before {
			t.Fatal("a refused archive changed the world")
		}
	})
	t.Run("a bad handoff file is a usage error", func(t *testing.T) {
		for name, content := range map[string]string{
			"oversized": strings.Repeat("x", jobapi.MaxResolvedBytes+10),
			"relative":  `{"server":"survival","run_id":"r","archive_ref":"x.tar","sha256":"` + strings.Repeat("a", 64) + `"}`,
		} {
			if err := os.WriteFile(handoff, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			if res := restore("restore-bad"); res.code != exitUsage || !strings.Contains(res.stderr, "--archive-from") {
				t.Errorf("%s: exit %d, want %d naming --archive-from:\n%s", name, res.code, exitUsage, res.stderr)
			}
		}
		res := archiver(t, "restore", "--archive-from", handoff, "--archive", "/x", "--into", into)
		if res.code != exitUsage || !strings.Contains(res.stderr, "one or the other") {
			t.Errorf("--archive-from with --archive: exit %d:\n%s", res.code, res.stderr)
		}
	})
	t.Run("a restore whose run was pruned since", func(t *testing.T) {
		// run-1 was restored as restore-run-1 above (and the world kept
		// through the refusals since); then a prune removes its row, and
		// the restore Job is re-created (an image change): its marker
		// decides.
		conn, err := pgx.Connect(t.Context(), e.url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(t.Context(), `DELETE FROM world_backups WHERE run_id = 'run-1'`); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(handoff); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if res := resolve("survival", "run-1"); res.code != exitUsage || !strings.Contains(res.stderr, "no such run") {
			t.Fatalf("resolve without --allow-gone: exit %d, want %d:\n%s", res.code, exitUsage, res.stderr)
		}
		if res := resolve("survival", "run-1", "--allow-gone"); res.code != 0 || !strings.Contains(res.stderr, "handing it on as gone") {
			t.Fatalf("resolve --allow-gone exited %d:\n%s", res.code, res.stderr)
		}
		if got, err := jobapi.ReadResolvedRun(handoff); err != nil || got != (jobapi.ResolvedRun{Server: "survival", RunID: "run-1", Gone: true}) {
			t.Fatalf("resolved %+v, %v: want run-1 gone", got, err)
		}
		// A verify has nothing to check.
		if res := archiver(t, "verify", "--archive-from", handoff); res.code != exitUsage || !strings.Contains(res.stderr, "nothing to verify") {
			t.Fatalf("verify of a gone run: exit %d, want %d:\n%s", res.code, exitUsage, res.stderr)
		}
		res := restore("restore-run-1")
		if res.code != 0 || !strings.Contains(res.stdout, "already restored") || restored() != "first" {
			t.Fatalf("the re-created restore: exit %d, stdout %q, level.dat %q:\n%s", res.code, res.stdout, restored(), res.stderr)
		}
		s := summary(t, filepath.Join(dir, "tlog"))
		if s["status"] != string(jobapi.StatusAlreadyRestored) || s["run_id"] != "restore-run-1" || s["sha256"] == "" {
			t.Errorf("termination summary %v", s)
		}
		// A restore of it that never ran has nothing to restore.
		res = restore("restore-run-1-again")
		if res.code != exitUsage || !strings.Contains(res.stderr, "not in the catalog") ||
			!strings.Contains(res.stderr, "remove the restore entry") || restored() != "first" {
			t.Fatalf("a new restore of the gone run: exit %d, want %d, level.dat %q:\n%s", res.code, exitUsage, restored(), res.stderr)
		}
		// latest is never gone: a server without runs is refused as before.
		if res := resolve("nether", jobapi.RunLatest, "--allow-gone"); res.code != exitUsage || !strings.Contains(res.stderr, "no successful run") {
			t.Fatalf("resolve latest of a server without runs, --allow-gone: exit %d:\n%s", res.code, res.stderr)
		}
	})
}

// TestVerifyByRunEndToEnd runs the verify by run as the verify Job (and the
// scheduled verify) does: archiver resolve writes the newest run's archive
// and checksum, archiver verify --archive-from --world-check (no config, no
// database) checks it, and its termination message names the run it
// verified. A good world verifies; after a chunk is damaged and backed up
// again, latest is the damaged run and its verify exits 3; a forged
// checksum in the file exits 3; --archive-from with --archive is refused.
func TestVerifyByRunEndToEnd(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	if _, err := worldgen.Generate(e.world, worldgen.Options{Size: 2 << 20, Seed: 11}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	handoff, tlog := filepath.Join(dir, "run.json"), filepath.Join(dir, "tlog")
	backupAndResolve := func(runID string, extra ...string) {
		t.Helper()
		if res := archiver(t, append(e.backupArgs(runID), extra...)...); res.code != 0 {
			t.Fatalf("backup %s exited %d:\n%s", runID, res.code, res.stderr)
		}
		if res := archiver(t, "resolve", "--server", "survival", "--from-run", jobapi.RunLatest, "--config", e.config,
			"--within", e.root, "--out", handoff); res.code != 0 {
			t.Fatalf("resolve exited %d:\n%s", res.code, res.stderr)
		}
	}
	verify := func() (result, map[string]any) {
		t.Helper()
		res := archiver(t, "verify", "--archive-from", handoff, "--world-check", "--scratch", t.TempDir(),
			"--log-format", "json", "--termination-log", tlog)
		return res, summary(t, tlog)
	}
	for _, format := range []string{"tar", "chunked"} {
		t.Run("a good world, "+format, func(t *testing.T) {
			backupAndResolve("good-"+format, "--format", format)
			res, s := verify()
			if res.code != 0 || s["status"] != string(jobapi.StatusVerified) || s["run_id"] != "good-"+format || s["chunks_checked"].(float64) == 0 {
				t.Fatalf("exit %d, summary %v:\n%s", res.code, s, res.stderr)
			}
		})
	}
	t.Run("latest is the damaged run", func(t *testing.T) {
		chunk := flipChunk(t, e.world)
		backupAndResolve("damaged")
		res, s := verify()
		want := fmt.Sprintf("world/region/r.0.0.mca: chunk (%d, %d)", chunk[0], chunk[1])
		if res.code != exitRefused || s["status"] != string(jobapi.StatusFailed) || s["run_id"] != "damaged" ||
			!strings.HasPrefix(fmt.Sprint(s["problem"]), want) {
			t.Fatalf("exit %d, summary %v, want exit %d naming %q:\n%s", res.code, s, exitRefused, want, res.stderr)
		}
	})
	t.Run("a forged checksum", func(t *testing.T) {
		r, err := jobapi.ReadResolvedRun(handoff)
		if err != nil {
			t.Fatal(err)
		}
		r.SHA256 = strings.Repeat("0", 64)
		if err := os.WriteFile(handoff, r.Encode(), 0o644); err != nil {
			t.Fatal(err)
		}
		if res, _ := verify(); res.code != exitRefused {
			t.Fatalf("exit %d, want %d:\n%s", res.code, exitRefused, res.stderr)
		}
	})
	t.Run("--archive-from with --archive", func(t *testing.T) {
		res := archiver(t, "verify", "--archive-from", handoff, "--archive", "/x.tar.zst")
		if res.code != exitUsage || !strings.Contains(res.stderr, "one or the other") {
			t.Fatalf("exit %d:\n%s", res.code, res.stderr)
		}
	})
}
