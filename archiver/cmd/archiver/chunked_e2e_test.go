package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/worldbackup/worldbackup/archiver/chunked"
	"github.com/worldbackup/worldbackup/internal/pgtest"
	"github.com/worldbackup/worldbackup/jobapi"
)

// chunkedRow is what the catalog says of a chunked run.
type chunkedRow struct {
	ArchiveRef, SHA256, Format string
	SizeBytes                  int64
	AddedBytes                 *int64
}

func chunkedRowOf(t *testing.T, url, runID string) chunkedRow {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var r chunkedRow
	if err := conn.QueryRow(t.Context(), `SELECT archive_ref, sha256, format, size_bytes, added_bytes
		FROM world_backups WHERE run_id = $1`, runID).Scan(&r.ArchiveRef, &r.SHA256, &r.Format, &r.SizeBytes, &r.AddedBytes); err != nil {
		t.Fatal(err)
	}
	return r
}

// packsOf lists the pack files below e's archive root, oldest first is not
// promised: sorted by path.
func packsOf(t *testing.T, root string) []string {
	t.Helper()
	ps, err := filepath.Glob(filepath.Join(root, "_chunked/packs/*/*"))
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// TestChunkedEndToEnd: a chunked backup restores (archiver restore, and
// archiver export | GNU tar) to the world byte for byte; a second run after
// a small change adds little; verify checks every blob; damage is refused
// with exit 3 and the world left as it was.
func TestChunkedEndToEnd(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateRestorableWorld(t, e.world)
	want := snapshot(t, e.world, defaultExcluded)
	if res := archiver(t, e.backupArgs("c1", "--format", "chunked")...); res.code != 0 {
		t.Fatalf("backup exited %d:\n%s", res.code, res.stderr)
	}
	r1 := chunkedRowOf(t, e.url, "c1")
	if r1.Format != "chunked" || r1.ArchiveRef != filepath.Join(e.root, "_chunked/runs/survival/c1.manifest") ||
		r1.AddedBytes == nil || *r1.AddedBytes <= 0 {
		t.Fatalf("row %+v", r1)
	}
	if s := summary(t, e.tlog); s["format"] != "chunked" || s["sha256"] != r1.SHA256 {
		t.Errorf("summary %v", s)
	}
	if res := archiver(t, "list", "--config", e.config); res.code != 0 || !strings.Contains(res.stdout, "chunked") {
		t.Errorf("list exited %d:\n%s%s", res.code, res.stdout, res.stderr)
	}

	t.Run("restore into the folder holding the store", func(t *testing.T) {
		res := archiver(t, restoreArgs(r1.ArchiveRef, r1.SHA256, filepath.Dir(e.root), "--replace")...)
		if res.code != 2 || !strings.Contains(res.stderr, "lies inside the target folder") {
			t.Errorf("restore exited %d, want 2:\n%s", res.code, res.stderr)
		}
		if _, err := os.Stat(r1.ArchiveRef); err != nil {
			t.Errorf("the manifest is gone: %v", err)
		}
	})
	t.Run("restore", func(t *testing.T) {
		into := filepath.Join(t.TempDir(), "restored")
		if res := archiver(t, restoreArgs(r1.ArchiveRef, r1.SHA256, into)...); res.code != 0 {
			t.Fatalf("restore exited %d:\n%s", res.code, res.stderr)
		}
		compareTrees(t, snapshot(t, into, nil), want)
	})
	t.Run("export to GNU tar", func(t *testing.T) {
		into := t.TempDir()
		cmd := exec.CommandContext(t.Context(), archiverBin, "export", "--archive", r1.ArchiveRef, "--sha256", r1.SHA256)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		tarCmd := exec.CommandContext(t.Context(), "tar", "-x", "-C", into)
		pipe, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		tarCmd.Stdin = pipe
		var tarErr bytes.Buffer
		tarCmd.Stderr = &tarErr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if err := tarCmd.Run(); err != nil {
			t.Fatalf("tar: %v\n%s", err, tarErr.String())
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("export: %v\n%s", err, stderr.String())
		}
		compareTrees(t, snapshot(t, into, nil), want)
	})

	// A small change: one player file rewritten, one added.
	changed := 0
	for _, rel := range []string{"world/playerdata/chunked-a.dat", "world/playerdata/chunked-b.dat"} {
		b := bytes.Repeat([]byte(rel), 300)
		changed += len(b)
		if err := os.WriteFile(filepath.Join(e.world, rel), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if res := archiver(t, e.backupArgs("c2", "--format", "chunked")...); res.code != 0 {
		t.Fatalf("second backup exited %d:\n%s", res.code, res.stderr)
	}
	r2 := chunkedRowOf(t, e.url, "c2")
	// What changed, its tar headers and the folder's, the list blobs, the
	// manifest (a few bytes per file of the world) and the packs' frames.
	if bound := int64(changed) + 64<<10; *r2.AddedBytes > bound {
		t.Errorf("second run added %d bytes for %d changed (bound %d; the first added %d)", *r2.AddedBytes, changed, bound, *r1.AddedBytes)
	}
	for _, args := range [][]string{
		{"verify", "--config", e.config, "--run-id", "c2"},
		{"verify", "--archive", r2.ArchiveRef, "--sha256", r2.SHA256, "--read-data-subset", "5%"},
	} {
		if res := archiver(t, args...); res.code != 0 || !strings.Contains(res.stdout, "ok ") {
			t.Errorf("%v exited %d:\n%s%s", args, res.code, res.stdout, res.stderr)
		}
	}

	damage := []struct {
		name   string
		do     func(t *testing.T)
		expect string
	}{
		{"flipped byte in a pack", func(t *testing.T) {
			for _, p := range packsOf(t, e.root) {
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				b[len(b)/3] ^= 0x40
				if err := os.WriteFile(p, b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}, "does not match its hash"},
		{"missing pack", func(t *testing.T) {
			for _, p := range packsOf(t, e.root) {
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
			}
		}, "is not in the store"},
	}
	for _, d := range damage {
		t.Run(d.name, func(t *testing.T) {
			saved := map[string][]byte{}
			for _, p := range packsOf(t, e.root) {
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				saved[p] = b
			}
			t.Cleanup(func() {
				for p, b := range saved {
					if err := os.WriteFile(p, b, 0o644); err != nil {
						t.Error(err)
					}
				}
			})
			d.do(t)
			target := filepath.Join(t.TempDir(), "world")
			before := oldWorld(t, target)
			res := archiver(t, restoreArgs(r2.ArchiveRef, r2.SHA256, target, "--replace")...)
			if res.code != 3 || !strings.Contains(res.stderr, d.expect) || !strings.Contains(res.stderr, "_chunked/packs/") {
				t.Errorf("restore exited %d, want 3 naming the pack (%q):\n%s", res.code, d.expect, res.stderr)
			}
			untouched(t, target, before, "world")
			res = archiver(t, "verify", "--archive", r2.ArchiveRef, "--sha256", r2.SHA256)
			if res.code != 3 || !strings.Contains(res.stderr, d.expect) {
				t.Errorf("verify exited %d, want 3 (%q):\n%s", res.code, d.expect, res.stderr)
			}
		})
	}
	t.Run("flipped byte in the manifest", func(t *testing.T) {
		b, err := os.ReadFile(r2.ArchiveRef)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.WriteFile(r2.ArchiveRef, b, 0o644) })
		bad := bytes.Clone(b)
		bad[len(bad)-5] ^= 1
		if err := os.WriteFile(r2.ArchiveRef, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(t.TempDir(), "world")
		before := oldWorld(t, target)
		if res := archiver(t, restoreArgs(r2.ArchiveRef, r2.SHA256, target, "--replace")...); res.code != 3 {
			t.Errorf("restore exited %d, want 3:\n%s", res.code, res.stderr)
		}
		untouched(t, target, before, "world")
	})
}

// TestChunkedBuildsOnItsOwnStore: a server backed up in turn to two
// stores that share a catalog (hourly to a folder, daily elsewhere) builds
// each run on the newest run of the store at hand, not on the other
// store's newer run, whose manifest is not there: an unchanged world adds
// little each time instead of the whole world again.
func TestChunkedBuildsOnItsOwnStore(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateRestorableWorld(t, e.world)
	other := *e
	other.root = filepath.Join(t.TempDir(), "other-store")
	if err := os.Mkdir(other.root, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, run := range []struct {
		id string
		e  *env
	}{{"s1", e}, {"s2", &other}, {"s3", e}, {"s4", &other}} {
		if res := archiver(t, run.e.backupArgs(run.id)...); res.code != 0 {
			t.Fatalf("backup %s exited %d:\n%s", run.id, res.code, res.stderr)
		}
	}
	first := chunkedRowOf(t, e.url, "s1")
	for _, id := range []string{"s3", "s4"} {
		r := chunkedRowOf(t, e.url, id)
		if r.AddedBytes == nil || *r.AddedBytes > 64<<10 {
			t.Errorf("run %s of an unchanged world added %v bytes (the first run added %d): it did not build on its store's previous run",
				id, r.AddedBytes, *first.AddedBytes)
		}
	}
}

// TestChunkedLostPackNotBuiltOn: a pack of the previous run that is gone
// from the store (a lifecycle rule, a deletion by hand) is not referenced
// again: the next run stores every file anew, says so, and restores in
// full, where building on the previous run would have recorded a backup
// that cannot be restored, and every one after it.
func TestChunkedLostPackNotBuiltOn(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateRestorableWorld(t, e.world)
	want := snapshot(t, e.world, defaultExcluded)
	if res := archiver(t, e.backupArgs("l1")...); res.code != 0 {
		t.Fatalf("backup exited %d:\n%s", res.code, res.stderr)
	}
	packs := packsOf(t, e.root)
	if len(packs) == 0 {
		t.Fatal("no packs")
	}
	largest, size := "", int64(-1) // a data pack: the list packs are small
	for _, p := range packs {
		if fi, err := os.Stat(p); err == nil && fi.Size() > size {
			largest, size = p, fi.Size()
		}
	}
	if err := os.Remove(largest); err != nil {
		t.Fatal(err)
	}
	res := archiver(t, e.backupArgs("l2")...)
	if res.code != 0 {
		t.Fatalf("backup exited %d:\n%s", res.code, res.stderr)
	}
	if !strings.Contains(res.stderr, "a pack of the previous chunked run is gone from the store") {
		t.Errorf("the backup does not say that it built on nothing:\n%s", res.stderr)
	}
	r2 := chunkedRowOf(t, e.url, "l2")
	into := filepath.Join(t.TempDir(), "restored")
	if res := archiver(t, restoreArgs(r2.ArchiveRef, r2.SHA256, into)...); res.code != 0 {
		t.Fatalf("restore of the run after the loss exited %d:\n%s", res.code, res.stderr)
	}
	compareTrees(t, snapshot(t, into, nil), want)
}

// TestChunkedS3RoundTrip: a chunked run into an S3 store restores from the
// bucket without database or config, exports to GNU tar, and a second run
// adds little.
func TestChunkedS3RoundTrip(t *testing.T) {
	e := newS3Env(t)
	generateRestorableWorld(t, e.world)
	want := snapshot(t, e.world, defaultExcluded)
	if res := archiver(t, e.args("c1", "--format", "chunked")...); res.code != 0 {
		t.Fatalf("backup exited %d:\n%s", res.code, res.stderr)
	}
	r1 := chunkedRowOf(t, e.url, "c1")
	if wantRef := "s3://" + e.bucket + "/" + s3Prefix + "/_chunked/runs/survival/c1.manifest"; r1.ArchiveRef != wantRef || r1.Format != "chunked" {
		t.Fatalf("row %+v, want ref %s", r1, wantRef)
	}
	into := filepath.Join(t.TempDir(), "restored")
	if res := archiver(t, append(restoreArgs(r1.ArchiveRef, r1.SHA256, into), e.s3Flags()...)...); res.code != 0 {
		t.Fatalf("restore exited %d:\n%s", res.code, res.stderr)
	}
	compareTrees(t, snapshot(t, into, nil), want)

	out := t.TempDir()
	script := archiverBin + ` export --archive "$1" --sha256 "$2" "${@:4}" | tar -x -C "$3"`
	args := append([]string{"-o", "pipefail", "-c", script, "sh", r1.ArchiveRef, r1.SHA256, out}, e.s3Flags()...)
	if b, err := exec.CommandContext(t.Context(), "bash", args...).CombinedOutput(); err != nil {
		t.Fatalf("export | tar: %v\n%s", err, b)
	}
	compareTrees(t, snapshot(t, out, nil), want)

	p := filepath.Join(e.world, "world/playerdata/chunked-s3.dat")
	b := bytes.Repeat([]byte("a changed player file "), 200)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if res := archiver(t, e.args("c2", "--format", "chunked")...); res.code != 0 {
		t.Fatalf("second backup exited %d:\n%s", res.code, res.stderr)
	}
	r2 := chunkedRowOf(t, e.url, "c2")
	if bound := int64(len(b)) + 64<<10; *r2.AddedBytes > bound {
		t.Errorf("second run added %d bytes for %d changed (bound %d)", *r2.AddedBytes, len(b), bound)
	}
	if res := archiver(t, "verify", "--config", e.config, "--run-id", "c2"); res.code != 0 {
		t.Errorf("verify exited %d:\n%s%s", res.code, res.stdout, res.stderr)
	}
}

// TestChunkedKill9: chunked backups and prunes (a 1 ms grace, so packs are
// collected as soon as nothing references them) killed with SIGKILL at
// random points until 40 were killed; then every recorded chunked run verifies, blob
// by blob, and the newest restores to the world; and after a last prune
// the store holds exactly the packs the remaining runs reference: what the
// kills left (packs of killed backups, an orphan whose row is gone) is
// collected.
func TestChunkedKill9(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	pruneArgs := []string{"prune", "--server", "survival", "--config", e.config, "--archive-root", e.root,
		"--keep-last", "2", "--min-keep", "2", "--grace", "1ms", "--log-format", "json"}
	chunkedKill9(t, e, e.root, 40, 3, func(id string) []string { return e.backupArgs(id, "--format", "chunked") }, pruneArgs, nil)
}

// TestChunkedKill9S3 is TestChunkedKill9 on an S3 store (versitygw), with
// fewer kills: an S3 run is slower.
func TestChunkedKill9S3(t *testing.T) {
	e := newS3Env(t)
	pruneArgs := []string{"prune", "--server", "survival", "--config", e.config,
		"--keep-last", "2", "--min-keep", "2", "--grace", "1ms", "--log-format", "json"}
	chunkedKill9(t, e.env, filepath.Join(e.srv.Root, e.bucket, s3Prefix), 12, 2,
		func(id string) []string { return e.args(id, "--format", "chunked") }, pruneArgs, e.s3Flags())
}

// chunkedKill9 runs backups (backupArgs) and prunes (pruneArgs) of e's
// world, killing them at random points until wantKills were killed and
// wantRecorded backups recorded; root is the folder holding the store's
// objects. Then a last backup and prune, and the checks TestChunkedKill9
// describes (the restore with the flags restoreFlags).
func chunkedKill9(t *testing.T, e *env, root string, wantKills, wantRecorded int, backupArgs func(id string) []string, pruneArgs, restoreFlags []string) {
	t.Helper()
	generateRestorableWorld(t, e.world)
	rng := rand.New(rand.NewPCG(40, 9))
	writeRand := func(rel string, n int) {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		if err := os.WriteFile(filepath.Join(e.world, rel), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeRand("world/data/big.dat", 24<<20)
	// The catalog exists before the first kill: a prune drawn before any
	// backup got through its migration would find no table.
	if res := archiver(t, "migrate", "--config", e.config); res.code != 0 {
		t.Fatalf("migrate exited %d:\n%s", res.code, res.stderr)
	}
	// The kill points are drawn within a window per command: 1.5 times the
	// length of its last run that finished, grown by a quarter after each
	// kill, so most land inside a run and some runs finish however fast or
	// loaded the machine is. It goes on until wantKills were killed and
	// wantRecorded backups recorded between the kills.
	kills, done, recorded := 0, 0, 0
	window := map[string]time.Duration{"backup": 300 * time.Millisecond, "prune": 300 * time.Millisecond}
	for i := 0; kills < wantKills || recorded < wantRecorded; i++ {
		if i == 10*wantKills {
			t.Fatalf("after %d runs, %d killed and %d backups recorded: the kill points miss the runs", i, kills, recorded)
		}
		writeRand(fmt.Sprintf("world/playerdata/kill-%d.dat", rng.IntN(5)), 2000+rng.IntN(100000))
		args := backupArgs(fmt.Sprintf("k%02d", i))
		if rng.IntN(3) == 0 {
			args = pruneArgs
		}
		cmd := exec.CommandContext(t.Context(), archiverBin, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// A random point of the run: most land inside it, some after.
		started := time.Now()
		timer := time.AfterFunc(time.Duration(rng.Int64N(int64(window[args[0]]))), func() { cmd.Process.Signal(syscall.SIGKILL) })
		err := cmd.Wait()
		timer.Stop()
		if ee, ok := err.(*exec.ExitError); ok && ee.ProcessState.Sys().(syscall.WaitStatus).Signaled() {
			kills++
			window[args[0]] += window[args[0]] / 4
			continue
		}
		// A backup may fail (exit 1) when a prune took a pack it reused.
		if err != nil && (args[0] != "backup" || exitCode(t, err) != 1) {
			t.Fatalf("%v: %v\n%s", args[0], err, stderr.String())
		}
		if err == nil && args[0] == "backup" {
			recorded++
		}
		window[args[0]] = max(time.Since(started)*3/2, 10*time.Millisecond)
		done++
	}
	t.Logf("%d killed, %d finished (%d backups recorded)", kills, done, recorded)
	// A last backup; an orphan pack (its row lost) for the last prune.
	if res := archiver(t, backupArgs("final")...); res.code != 0 {
		t.Fatalf("final backup exited %d:\n%s", res.code, res.stderr)
	}
	orphan := filepath.Join(root, "_chunked/packs/ab", "ab"+strings.Repeat("0", 62))
	if err := os.MkdirAll(filepath.Dir(orphan), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(orphan, []byte("WBPK a pack whose row was lost"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // past the 1 ms grace
	res := archiver(t, append(pruneArgs, "--json")...)
	if res.code != 0 {
		t.Fatalf("final prune exited %d:\n%s", res.code, res.stderr)
	}
	var rep struct {
		OrphanPacks int `json:"orphan_packs"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil || rep.OrphanPacks < 1 {
		t.Errorf("the final prune found %d orphan packs (%v), want 1 or more:\n%s", rep.OrphanPacks, err, res.stdout)
	}
	conn, err := pgx.Connect(t.Context(), e.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rs, err := conn.Query(t.Context(), `SELECT run_id FROM world_backups WHERE format = 'chunked' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rs, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if res := archiver(t, "verify", "--config", e.config, "--run-id", id); res.code != 0 {
			t.Errorf("run %s does not verify (exit %d):\n%s%s", id, res.code, res.stdout, res.stderr)
		}
	}
	// The store holds the packs the runs reference, no other.
	rs, err = conn.Query(t.Context(), `SELECT DISTINCT pack_id FROM chunked_run_packs ORDER BY pack_id`)
	if err != nil {
		t.Fatal(err)
	}
	referenced, err := pgx.CollectRows(rs, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	var stored []string
	for _, p := range packsOf(t, root) {
		stored = append(stored, filepath.Base(p))
	}
	slices.Sort(stored)
	if !slices.Equal(stored, referenced) {
		t.Errorf("after the last prune the store holds %d packs, the runs reference %d:\nstored     %v\nreferenced %v",
			len(stored), len(referenced), stored, referenced)
	}
	r := chunkedRowOf(t, e.url, "final")
	into := filepath.Join(t.TempDir(), "restored")
	if res := archiver(t, append(restoreArgs(r.ArchiveRef, r.SHA256, into), restoreFlags...)...); res.code != 0 {
		t.Fatalf("restore exited %d:\n%s", res.code, res.stderr)
	}
	compareTrees(t, snapshot(t, into, nil), snapshot(t, e.world, defaultExcluded))
}

func TestChunkedParseShare(t *testing.T) {
	tests := []struct {
		in   string
		want float64
		ok   bool
	}{
		{"5%", 0.05, true}, {"0.05", 0.05, true}, {"100%", 1, true}, {"1", 1, true},
		{"0%", 0, false}, {"0", 0, false}, {"101%", 0, false}, {"-5%", 0, false}, {"x", 0, false}, {"", 0, false}, {"NaN", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseShare(tt.in)
			if (err == nil) != tt.ok || (tt.ok && (got < tt.want-1e-9 || got > tt.want+1e-9)) {
				t.Errorf("parseShare(%q) = %v, %v", tt.in, got, err)
			}
		})
	}
	if res := archiver(t, "verify", "--archive", "/x/s/r.tar.zst", "--sha256", strings.Repeat("0", 64), "--read-data-subset", "5%"); res.code != 2 {
		t.Errorf("a tar archive with --read-data-subset exited %d, want 2:\n%s", res.code, res.stderr)
	}
}

// TestNameSpellingAMagicRestores: a plain tar starts with its first
// member's name, so a file named like a zstd skippable frame ("P*M\x18")
// or an age header, first in the world's folder, must not make the rebuilt
// stream of a chunked run (or a tar run without compression) look
// compressed or encrypted: backup, verify and restore all agree.
func TestNameSpellingAMagicRestores(t *testing.T) {
	for _, tc := range []struct{ name, file string }{
		{"zstd skippable frame", "P*M\x18.dat"},
		{"gzip member", "\x1f\x8b.dat"},
	} {
		for _, format := range [][]string{{"--format", "chunked"}, {"--format", "tar", "--compression", "none"}} {
			t.Run(tc.name+" "+format[1], func(t *testing.T) {
				e := newEnv(t, pgtest.URL(t))
				if err := os.MkdirAll(e.world, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(e.world, tc.file), []byte("hello"), 0o644); err != nil {
					t.Fatal(err)
				}
				if res := archiver(t, e.backupArgs("r1", format...)...); res.code != 0 {
					t.Fatalf("backup exited %d:\n%s", res.code, res.stderr)
				}
				r := rows(t, e.url)[0]
				if res := archiver(t, "verify", "--archive", r.ArchiveRef, "--sha256", r.SHA256); res.code != 0 {
					t.Errorf("verify exited %d:\n%s", res.code, res.stderr)
				}
				into := filepath.Join(t.TempDir(), "restored")
				if res := archiver(t, restoreArgs(r.ArchiveRef, r.SHA256, into)...); res.code != 0 {
					t.Fatalf("restore exited %d:\n%s", res.code, res.stderr)
				}
				if b, err := os.ReadFile(filepath.Join(into, tc.file)); err != nil || string(b) != "hello" {
					t.Errorf("restored %q: %q, %v", tc.file, b, err)
				}
			})
		}
	}
}

// TestVerifyFileOfAChunkedRun: verify --archive with a tar file named after
// a run whose row is a chunked run's (an export of it, say) is a usage
// error naming what to give, not a crash.
func TestVerifyFileOfAChunkedRun(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateWorld(t, e.world)
	if res := archiver(t, e.backupArgs("r1")...); res.code != 0 {
		t.Fatalf("backup exited %d:\n%s", res.code, res.stderr)
	}
	file := filepath.Join(t.TempDir(), "r1.tar.zst")
	if err := os.WriteFile(file, []byte("an export"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := archiver(t, "verify", "--archive", file, "--config", e.config)
	if res.code != 2 || !strings.Contains(res.stderr, "is not a chunked run's manifest") || strings.Contains(res.stderr, "panic") {
		t.Fatalf("verify of a file named after a chunked run exited %d, want 2 naming the manifest:\n%s", res.code, res.stderr)
	}
}

// TestExportDamageFailsTar: a damaged blob stops an export; when the
// stream so far ends between two tar members, GNU tar would take it for a
// whole archive (exit 0, the rest of the world missing) where only its exit
// status is seen (`export | tar -x` without pipefail). The export ends the
// stream with a block tar refuses: tar fails.
func TestExportDamageFailsTar(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	if err := os.MkdirAll(e.world, 0o755); err != nil {
		t.Fatal(err)
	}
	// Two files whose sizes are whole tar blocks: the stream can stop
	// right after the first member.
	rng := rand.New(rand.NewPCG(1, 2))
	for _, name := range []string{"a.bin", "b.bin"} {
		b := make([]byte, 8192)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		if err := os.WriteFile(filepath.Join(e.world, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if res := archiver(t, e.backupArgs("r1")...); res.code != 0 {
		t.Fatalf("backup exited %d:\n%s", res.code, res.stderr)
	}
	r := rows(t, e.url)[0]
	raw, err := os.ReadFile(r.ArchiveRef)
	if err != nil {
		t.Fatal(err)
	}
	m, err := chunked.DecodeManifest(raw)
	if err != nil {
		t.Fatal(err)
	}
	// The second member's header: the last metadata segment before the
	// end of the archive.
	var metas []chunked.Ref
	for _, seg := range m.Segments {
		if seg.Meta != nil && seg.Meta.Stored > 0 {
			metas = append(metas, *seg.Meta)
		}
	}
	if len(metas) < 2 {
		t.Fatalf("the manifest has %d metadata blobs, want one per member and the end", len(metas))
	}
	hdr := metas[1]
	packKey, err := jobapi.PackKey(m.Packs[hdr.Pack].String())
	if err != nil {
		t.Fatal(err)
	}
	pack := filepath.Join(e.root, packKey)
	b, err := os.ReadFile(pack)
	if err != nil {
		t.Fatal(err)
	}
	b[hdr.Offset+hdr.Stored/2] ^= 0xff
	if err := os.WriteFile(pack, b, 0o644); err != nil {
		t.Fatal(err)
	}
	into := t.TempDir()
	// No pipefail: only tar's status counts, as in a plain sh pipeline.
	cmd := exec.CommandContext(t.Context(), "sh", "-c", `"$0" export --archive "$1" --sha256 "$2" | tar -x -C "$3"`,
		archiverBin, r.ArchiveRef, r.SHA256, into)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("export | tar -x of a damaged run succeeded (the world is incomplete):\n%s", out)
	}
	if !strings.Contains(string(out), "export failed") {
		t.Errorf("the export did not say it failed:\n%s", out)
	}
}

// TestReplayedManifestRefused: one who can write to the store and the
// catalog puts an older run's manifest over a newer run's, and its
// checksum in the newer run's row. The checksum matches and a sealed body
// authenticates under the server's key, but the body names another run:
// restore and verify refuse it (exit 3), sealed or in the clear, the
// world untouched.
func TestReplayedManifestRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sealed bool
	}{
		{"in the clear", false},
		{"sealed", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, pgtest.URL(t))
			generateRestorableWorld(t, e.world)
			var extra []string
			if tc.sealed {
				key, _ := keyFile(t)
				extra = []string{"--encryption-key-file", key}
			}
			if r := archiver(t, e.backupArgs("c1", extra...)...); r.code != 0 {
				t.Fatalf("backup c1 exited %d:\n%s", r.code, r.stderr)
			}
			if err := os.WriteFile(filepath.Join(e.world, "world/playerdata/replayed.dat"), []byte("new"), 0o644); err != nil {
				t.Fatal(err)
			}
			if r := archiver(t, e.backupArgs("c2", extra...)...); r.code != 0 {
				t.Fatalf("backup c2 exited %d:\n%s", r.code, r.stderr)
			}
			r1, r2 := chunkedRowOf(t, e.url, "c1"), chunkedRowOf(t, e.url, "c2")
			old, err := os.ReadFile(r1.ArchiveRef)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(r2.ArchiveRef, old, 0o644); err != nil {
				t.Fatal(err)
			}
			into := filepath.Join(t.TempDir(), "world")
			if err := os.MkdirAll(into, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(into, "kept"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{
				restoreArgs(r2.ArchiveRef, r1.SHA256, into, append([]string{"--replace"}, extra...)...),
				append([]string{"verify", "--archive", r2.ArchiveRef, "--sha256", r1.SHA256}, extra...),
			} {
				if r := archiver(t, args...); r.code != 3 || !strings.Contains(r.stderr, "not the run its key names") {
					t.Errorf("%s of c2 holding c1's manifest exited %d, want 3 saying it is not the run its key names:\n%s", args[0], r.code, r.stderr)
				}
			}
			if got := files(t, into); len(got) != 1 {
				t.Errorf("the refused restore left %v, want the world as it was", got)
			}
		})
	}
}
