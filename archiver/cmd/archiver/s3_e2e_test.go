package main

// End-to-end tests of the S3 archive store: the built binary against a real
// S3 server (versitygw, internal/s3test) and a real PostgreSQL.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/jackc/pgx/v5"

	"github.com/worldbackup/worldbackup/internal/pgtest"
	"github.com/worldbackup/worldbackup/internal/s3test"
)

// s3Env is an env whose archives go to a bucket of a test S3 server.
type s3Env struct {
	*env
	srv                    *s3test.Server
	bucket                 string
	accessFile, secretFile string
}

const s3Prefix = "backups"

func newS3Env(t *testing.T) *s3Env {
	t.Helper()
	srv := s3test.New(t)
	e := &s3Env{env: newEnv(t, pgtest.URL(t)), srv: srv, bucket: srv.NewBucket(t)}
	keys := t.TempDir()
	e.accessFile, e.secretFile = filepath.Join(keys, "access-key"), filepath.Join(keys, "secret-key")
	writeConfig(t, e.accessFile, s3test.AccessKey+"\n")
	writeConfig(t, e.secretFile, s3test.SecretKey+"\n")
	e.writeS3Config(t, e.bucket)
	return e
}

// writeS3Config points felis.toml at bucket.
func (e *s3Env) writeS3Config(t *testing.T, bucket string) {
	t.Helper()
	e.writeS3ConfigAt(t, bucket, e.srv.Endpoint, "")
}

// writeS3ConfigAt points felis.toml at bucket of the server at endpoint,
// with more [archive] settings extra.
func (e *s3Env) writeS3ConfigAt(t *testing.T, bucket, endpoint, extra string) {
	t.Helper()
	writeConfig(t, e.config, fmt.Sprintf(`[database]
url = %q
[archive]
store = "s3://%s/%s"
endpoint = %q
path_style = true
access_key_file = %q
secret_key_file = %q
%s`, e.url, bucket, s3Prefix, endpoint, e.accessFile, e.secretFile, extra))
}

// args is the tar backup's command line without --archive-root: the store
// is the config's. These tests read and break the tar object itself;
// chunked_e2e_test.go and the store conformance suite have the chunked runs.
func (e *s3Env) args(runID string, extra ...string) []string {
	args := e.tarBackupArgs(runID, extra...)
	i := slices.Index(args, "--archive-root")
	return slices.Delete(args, i, i+2)
}

func (e *s3Env) key(runID string) string { return s3Prefix + "/survival/" + runID + ".tar.zst" }

func (e *s3Env) ref(runID string) string { return "s3://" + e.bucket + "/" + e.key(runID) }

// object returns the object's bytes, or nil when it does not exist.
func (e *s3Env) object(t *testing.T, runID string) []byte {
	t.Helper()
	out, err := e.srv.Client().GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(e.bucket), Key: aws.String(e.key(runID))})
	if err != nil {
		if strings.Contains(err.Error(), "NoSuchKey") {
			return nil
		}
		t.Fatal(err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (e *s3Env) s3Flags() []string { return e.s3FlagsAt(e.srv.Endpoint) }

// s3FlagsAt are the --s3-* flags of the server at endpoint.
func (e *s3Env) s3FlagsAt(endpoint string) []string {
	return []string{"--s3-endpoint", endpoint, "--s3-path-style",
		"--s3-access-key-file", e.accessFile, "--s3-secret-key-file", e.secretFile}
}

// TestS3BackupVerifyRestorePrune: a backup into the S3 store is recorded
// with its s3:// ref, verified, restored from the bucket without database
// or config, and pruned.
func TestS3BackupVerifyRestorePrune(t *testing.T) {
	e := newS3Env(t)
	generateRestorableWorld(t, e.world)
	res := archiver(t, e.args("s3-run-1")...)
	if res.code != 0 {
		t.Fatalf("backup exited %d:\n%s", res.code, res.stderr)
	}
	obj := e.object(t, "s3-run-1")
	sum := sha256.Sum256(obj)
	rs := rows(t, e.url)
	if len(rs) != 1 || rs[0].ArchiveRef != e.ref("s3-run-1") || rs[0].SHA256 != hex.EncodeToString(sum[:]) || rs[0].SizeBytes != int64(len(obj)) {
		t.Fatalf("rows %+v, want one for %s with the object's size %d and sha256 %x", rs, e.ref("s3-run-1"), len(obj), sum)
	}
	if up := e.srv.Uploads(t, e.bucket); len(up) != 0 {
		t.Errorf("uploads left in progress: %v", up)
	}

	// The same run ID again: nothing written.
	if res := archiver(t, e.args("s3-run-1")...); res.code != 0 || len(rows(t, e.url)) != 1 {
		t.Fatalf("second backup of the run exited %d with %d rows:\n%s", res.code, len(rows(t, e.url)), res.stderr)
	}

	t.Run("verify", func(t *testing.T) {
		if res := archiver(t, "verify", "--run-id", "s3-run-1", "--config", e.config); res.code != 0 || !strings.Contains(res.stdout, "ok s3://") {
			t.Fatalf("verify --run-id exited %d: %s%s", res.code, res.stdout, res.stderr)
		}
		// A tampered object is refused (exit 3).
		bad := bytes.Clone(obj)
		bad[len(bad)/2] ^= 1
		if _, err := e.srv.Client().PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(e.bucket),
			Key: aws.String(s3Prefix + "/survival/tampered.tar.zst"), Body: bytes.NewReader(bad)}); err != nil {
			t.Fatal(err)
		}
		args := append([]string{"verify", "--archive", "s3://" + e.bucket + "/" + s3Prefix + "/survival/tampered.tar.zst",
			"--sha256", rs[0].SHA256}, e.s3Flags()...)
		if res := archiver(t, args...); res.code != 3 {
			t.Fatalf("verify of a tampered object exited %d, want 3: %s%s", res.code, res.stdout, res.stderr)
		}
	})

	t.Run("restore", func(t *testing.T) {
		into := filepath.Join(t.TempDir(), "restored")
		args := append(restoreArgs(e.ref("s3-run-1"), rs[0].SHA256, into), e.s3Flags()...)
		if res := archiver(t, args...); res.code != 0 {
			t.Fatalf("restore exited %d:\n%s", res.code, res.stderr)
		}
		compareTrees(t, snapshot(t, into, nil), snapshot(t, e.world, defaultExcluded))
		// A wrong checksum: refused before anything is extracted.
		into2 := filepath.Join(t.TempDir(), "refused")
		args = append(restoreArgs(e.ref("s3-run-1"), strings.Repeat("0", 64), into2), e.s3Flags()...)
		if res := archiver(t, args...); res.code != 3 {
			t.Fatalf("restore with a wrong checksum exited %d, want 3:\n%s", res.code, res.stderr)
		}
		if got := files(t, into2); len(got) != 0 {
			t.Errorf("a refused restore left %v", got)
		}
		// A bucket typo in the reference: exit 2, naming the reference
		// to fix (not felis.toml, which restore does not read).
		into3 := filepath.Join(t.TempDir(), "nobucket")
		args = append(restoreArgs("s3://no-such-bucket/"+e.key("s3-run-1"), rs[0].SHA256, into3), e.s3Flags()...)
		if res := archiver(t, args...); res.code != 2 || !strings.Contains(res.stderr, "or fix the archive reference (--archive") {
			t.Fatalf("restore from a missing bucket exited %d, want 2 naming --archive:\n%s", res.code, res.stderr)
		}
	})

	t.Run("prune", func(t *testing.T) {
		for _, id := range []string{"s3-run-2", "s3-run-3"} {
			if res := archiver(t, e.args(id)...); res.code != 0 {
				t.Fatalf("backup %s exited %d:\n%s", id, res.code, res.stderr)
			}
		}
		// Older than the grace period (the objects' own times do not
		// matter: they all have rows).
		conn, err := pgx.Connect(t.Context(), e.url)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(t.Context(), `UPDATE world_backups SET started_at = started_at - interval '2 days',
			finished_at = finished_at - interval '2 days', created_at = created_at - interval '2 days'`); err != nil {
			t.Fatal(err)
		}
		res := archiver(t, "prune", "--server", "survival", "--keep-last", "1", "--min-keep", "1", "--grace", "1h",
			"--config", e.config, "--termination-log", "", "--log-format", "json")
		if res.code != 0 {
			t.Fatalf("prune exited %d:\n%s%s", res.code, res.stdout, res.stderr)
		}
		if rs := rows(t, e.url); len(rs) != 1 || rs[0].RunID != "s3-run-3" {
			t.Fatalf("rows after prune: %+v, want s3-run-3 only", rs)
		}
		for id, want := range map[string]bool{"s3-run-1": false, "s3-run-2": false, "s3-run-3": true} {
			if got := e.object(t, id) != nil; got != want {
				t.Errorf("object of %s exists = %v, want %v", id, got, want)
			}
		}
	})
}

// randomFile writes size bytes that do not compress at rel in the world.
func randomFile(t *testing.T, world, rel string, size int) {
	t.Helper()
	p := filepath.Join(world, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := rand.NewChaCha8([32]byte{7})
	buf := make([]byte, 1<<20)
	for size > 0 {
		n := min(size, len(buf))
		r.Read(buf[:n])
		if _, err := f.Write(buf[:n]); err != nil {
			t.Fatal(err)
		}
		size -= n
	}
}

// startS3Backup starts a backup and waits until its upload has a part.
func startS3Backup(t *testing.T, e *s3Env, runID string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), archiverBin, e.args(runID)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := e.srv.Client()
	for {
		ups, err := c.ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: aws.String(e.bucket)})
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range ups.Uploads {
			parts, err := c.ListParts(t.Context(), &s3.ListPartsInput{Bucket: aws.String(e.bucket), Key: u.Key, UploadId: u.UploadId})
			if err == nil && len(parts.Parts) > 0 {
				return cmd, &stderr
			}
		}
		select {
		case <-t.Context().Done():
			t.Fatal("no upload with a part appeared")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestS3BackupKilledMidUpload: kill -9 in the middle of the upload leaves
// no object (only an unfinished upload); the rerun succeeds and aborts it.
func TestS3BackupKilledMidUpload(t *testing.T) {
	e := newS3Env(t)
	generateWorld(t, e.world)
	randomFile(t, e.world, "world/region/r.98.98.mca", 40<<20)
	big := bigSparseFile(t, e.world, 64<<30)

	cmd, stderr := startS3Backup(t, e, "killed")
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if strings.Contains(stderr.String(), `"backup done"`) {
		t.Fatal("the backup finished before it was killed")
	}
	if e.object(t, "killed") != nil {
		t.Fatal("an object exists under the final key after kill -9")
	}
	if rs := rows(t, e.url); len(rs) != 0 {
		t.Fatalf("%d rows after kill -9", len(rs))
	}
	if up := e.srv.Uploads(t, e.bucket); !slices.Equal(up, []string{e.key("killed")}) {
		t.Fatalf("uploads in progress after kill -9: %v, want the killed one", up)
	}

	if err := os.Truncate(big, 1<<20); err != nil {
		t.Fatal(err)
	}
	res := archiver(t, e.args("killed")...)
	if res.code != 0 {
		t.Fatalf("rerun exited %d:\n%s", res.code, res.stderr)
	}
	if !strings.Contains(res.stderr, "removed temp files of an earlier attempt") || !strings.Contains(res.stderr, "uploadId=") {
		t.Errorf("the rerun did not abort the killed attempt's upload:\n%s", res.stderr)
	}
	if up := e.srv.Uploads(t, e.bucket); len(up) != 0 {
		t.Errorf("uploads left in progress after the rerun: %v", up)
	}
	obj := e.object(t, "killed")
	sum := sha256.Sum256(obj)
	if rs := rows(t, e.url); len(rs) != 1 || rs[0].SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("rows %+v, want one with the object's checksum", rs)
	}
}

// TestS3ServerStoppedMidUpload: the S3 server dies during the upload: the
// backup fails (exit 1, a retry may succeed), records nothing and leaves
// no object.
func TestS3ServerStoppedMidUpload(t *testing.T) {
	e := newS3Env(t)
	generateWorld(t, e.world)
	randomFile(t, e.world, "world/region/r.98.98.mca", 40<<20)
	bigSparseFile(t, e.world, 64<<30)

	cmd, stderr := startS3Backup(t, e, "stopped")
	e.srv.Stop()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if code := exitCode(t, err); code != 1 {
			t.Fatalf("backup exited %d after the S3 server stopped, want 1:\n%s", code, stderr)
		}
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		t.Fatalf("the backup still runs 2 minutes after the S3 server stopped:\n%s", stderr)
	}
	if rs := rows(t, e.url); len(rs) != 0 {
		t.Fatalf("%d rows after the S3 server stopped", len(rs))
	}
	if _, err := os.Stat(filepath.Join(e.srv.Root, e.bucket, e.key("stopped"))); err == nil {
		t.Fatal("an object exists under the final key")
	}
	s := summary(t, e.tlog)
	if s["status"] != "failed" || !strings.Contains(fmt.Sprint(s["error"]), "s3://"+e.bucket) {
		t.Errorf("termination message %v, want failed naming the object", s)
	}
}

// TestS3ConfigErrors: a missing bucket, refused credentials and a missing
// key file are configuration errors (exit 2) whose messages name the fix
// and never the secret.
func TestS3ConfigErrors(t *testing.T) {
	e := newS3Env(t)
	generateWorld(t, e.world)
	const wrongSecret = "wrong-secret-that-must-never-be-printed"
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T)
		want  string
	}{
		{"missing bucket", func(t *testing.T) { e.writeS3Config(t, "no-such-bucket") }, `bucket \"no-such-bucket\" does not exist`},
		{"wrong secret", func(t *testing.T) { writeConfig(t, e.secretFile, wrongSecret+"\n") }, "check the access and secret key files"},
		{"unknown access key", func(t *testing.T) { writeConfig(t, e.accessFile, "no-such-access-key\n") }, "check the access and secret key files"},
		{"missing key file", func(t *testing.T) {
			if err := os.Remove(e.secretFile); err != nil {
				t.Fatal(err)
			}
		}, "mount the credentials Secret there"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.setup(t)
			defer func() {
				e.writeS3Config(t, e.bucket)
				writeConfig(t, e.accessFile, s3test.AccessKey+"\n")
				writeConfig(t, e.secretFile, s3test.SecretKey+"\n")
			}()
			res := archiver(t, e.args("cfg-"+strings.ReplaceAll(tc.name, " ", "-"))...)
			if res.code != 2 {
				t.Fatalf("backup exited %d, want 2:\n%s", res.code, res.stderr)
			}
			out := res.stdout + res.stderr
			if b, err := os.ReadFile(e.tlog); err == nil {
				out += string(b)
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("output does not say %q:\n%s", tc.want, out)
			}
			for _, secret := range []string{wrongSecret, s3test.SecretKey} {
				if strings.Contains(out, secret) {
					t.Errorf("the output quotes the secret key:\n%s", out)
				}
			}
			if rs := rows(t, e.url); len(rs) != 0 {
				t.Errorf("%d rows", len(rs))
			}
		})
	}
}

// TestS3BackupMemory: the backup of a world of 1 GiB that does not
// compress stays within 64 MiB of RSS: the upload holds two parts whatever
// the world's size.
func TestS3BackupMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and uploads 1 GiB")
	}
	e := newS3Env(t)
	generateWorld(t, e.world)
	for i := range 8 {
		randomFile(t, e.world, fmt.Sprintf("world/region/r.%d.0.mca", i), 128<<20)
	}
	run := func(store string, args []string) int64 {
		t.Helper()
		start := time.Now()
		res, rss := runPeak(t, args...)
		if res.code != 0 {
			t.Fatalf("backup exited %d\n%s", res.code, res.stderr)
		}
		rs := rows(t, e.url)
		if last := rs[len(rs)-1]; last.SizeBytes < 1<<30 {
			t.Fatalf("rows %+v, want an archive of at least 1 GiB", rs)
		}
		t.Logf("backup of %d MiB into the %s store: max RSS %.1f MiB, %.1f s", rs[len(rs)-1].SizeBytes>>20, store,
			float64(rss)/(1<<20), time.Since(start).Seconds())
		return rss
	}
	run("local", e.tarBackupArgs("memory-local"))
	rss := run("S3", e.args("memory"))
	if rss > 64<<20 {
		t.Errorf("max RSS %d MiB, want at most 64 MiB", rss>>20)
	}
}

// vmHWM returns the peak RSS of process pid in bytes, 0 when it cannot be
// read (the process has exited).
func vmHWM(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb)
			return kb << 10
		}
	}
	return 0
}

// TestS3BackupFlags: --store and the --s3-* flags select the S3 store over
// a felis.toml that names a folder (how a Job passes the store's settings),
// and wrong combinations are usage errors.
func TestS3BackupFlags(t *testing.T) {
	e := newS3Env(t)
	generateWorld(t, e.world)
	writeConfig(t, e.config, fmt.Sprintf("[database]\nurl = %q\n[archive]\nlocal_path = %q\n", e.url, e.root))
	store := []string{"--store", "s3://" + e.bucket + "/" + s3Prefix}
	res := archiver(t, append(append(e.args("flags"), store...), e.s3Flags()...)...)
	if res.code != 0 {
		t.Fatalf("backup exited %d:\n%s", res.code, res.stderr)
	}
	if rs := rows(t, e.url); len(rs) != 1 || rs[0].ArchiveRef != e.ref("flags") || e.object(t, "flags") == nil {
		t.Fatalf("rows %+v, want one for the object %s", rs, e.ref("flags"))
	}
	if got := files(t, filepath.Join(e.root, "survival")); len(got) != 0 {
		t.Errorf("the folder store got %v", got)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"store and archive root", append(e.tarBackupArgs("x"), store...), "give one of --store"},
		{"s3 flags without a store", append(e.args("x"), e.s3Flags()...), "go with an S3 store"},
		{"bad store", append(e.args("x"), "--store", "s3://Bad_Bucket"), "not a valid bucket name"},
		{"no key files", append(e.args("x"), store...), "needs its credentials files"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := archiver(t, tc.args...)
			if res.code != 2 || !strings.Contains(res.stderr, tc.want) {
				t.Fatalf("backup exited %d, want 2 saying %q:\n%s", res.code, tc.want, res.stderr)
			}
		})
	}
}

// TestS3PruneFlags: prune --store and the --s3-* flags prune the S3 store
// over a felis.toml that names a folder (how the WorldPrune Job passes the
// store): the expired runs' rows and objects go, the policy's stay, and
// the folder store is not touched; wrong combinations are usage errors.
func TestS3PruneFlags(t *testing.T) {
	e := newS3Env(t)
	generateWorld(t, e.world)
	writeConfig(t, e.config, fmt.Sprintf("[database]\nurl = %q\n[archive]\nlocal_path = %q\n", e.url, e.root))
	storeArgs := append([]string{"--store", "s3://" + e.bucket + "/" + s3Prefix}, e.s3Flags()...)
	ids := []string{"p1", "p2", "p3", "p4"}
	for _, id := range ids {
		if res := archiver(t, append(e.args(id), storeArgs...)...); res.code != 0 {
			t.Fatalf("backup %s exited %d:\n%s", id, res.code, res.stderr)
		}
	}
	// A folder archive of the same server that the S3 prune must not see.
	if res := archiver(t, e.tarBackupArgs("folder")...); res.code != 0 {
		t.Fatalf("folder backup exited %d:\n%s", res.code, res.stderr)
	}
	conn, err := pgx.Connect(t.Context(), e.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for i, id := range ids {
		if _, err := conn.Exec(t.Context(), `UPDATE world_backups SET started_at = started_at - $2::interval,
			finished_at = finished_at - $2::interval, created_at = created_at - $2::interval WHERE run_id = $1`,
			id, fmt.Sprintf("%d hours", 48+24*(len(ids)-i))); err != nil {
			t.Fatal(err)
		}
	}
	prune := func(extra ...string) result {
		return archiver(t, append([]string{"prune", "--server", "survival", "--config", e.config, "--keep-last", "2",
			"--min-keep", "1", "--grace", "1h", "--termination-log", e.tlog, "--log-format", "json"}, extra...)...)
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"store and archive root", append([]string{"--archive-root", e.root}, storeArgs...), "give one of --store"},
		{"s3 flags without a store", e.s3Flags(), "go with an S3 store"},
		{"bad store", []string{"--store", "s3://Bad_Bucket"}, "not a valid bucket name"},
		{"no key files", []string{"--store", "s3://" + e.bucket}, "needs its credentials files"},
		// As for backup: a retry cannot help.
		{"missing bucket", append([]string{"--store", "s3://no-such-bucket/" + s3Prefix}, e.s3Flags()...), "does not exist (create it, or fix the store URL (--store"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := prune(tc.args...)
			if res.code != 2 || !strings.Contains(res.stderr, tc.want) {
				t.Fatalf("prune exited %d, want 2 saying %q:\n%s", res.code, tc.want, res.stderr)
			}
		})
	}
	if n := len(rows(t, e.url)); n != 5 {
		t.Fatalf("%d rows after the refused prunes, want 5", n)
	}

	res := prune(storeArgs...)
	if res.code != 0 {
		t.Fatalf("prune exited %d:\n%s%s", res.code, res.stdout, res.stderr)
	}
	var got []string
	for _, r := range rows(t, e.url) {
		got = append(got, r.RunID)
	}
	// keep-last 2 of the store's runs: p3 and p4. The folder run (the
	// newest) is another store's: kept, and not one of the 2.
	if fmt.Sprint(got) != "[p3 p4 folder]" {
		t.Fatalf("rows after prune: %v, want [p3 p4 folder]", got)
	}
	for id, want := range map[string]bool{"p1": false, "p2": false, "p3": true, "p4": true} {
		if got := e.object(t, id) != nil; got != want {
			t.Errorf("object of %s exists = %v, want %v", id, got, want)
		}
	}
	if got := files(t, filepath.Join(e.root, "survival")); !slices.Equal(got, []string{"folder.tar.zst"}) {
		t.Errorf("folder store after the S3 prune: %v, want [folder.tar.zst]", got)
	}
	if s := summary(t, e.tlog); s["status"] != "done" || s["rows_deleted"] != 2.0 || s["files_removed"] != 2.0 {
		t.Errorf("termination message %v: want done, 2 rows, 2 objects", s)
	}
}
