package main

// End-to-end tests of the built binary against a misbehaving S3 server: a
// proxy in front of versitygw (internal/s3test) that lies, cuts, stalls and
// floods on purpose.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/worldbackup/worldbackup/internal/s3test"
)

// runPeak runs the archiver and returns what it did and its peak RSS. The
// rusage of a child started by this process reports this process's own peak
// (exec keeps the high-water mark of the memory it replaces), so it reads the
// child's VmHWM while it runs.
func runPeak(t *testing.T, args ...string) (result, int64) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), archiverBin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited, done := make(chan struct{}), make(chan struct{})
	var rss int64
	go func() {
		defer close(done)
		for {
			if v := vmHWM(cmd.Process.Pid); v > 0 {
				rss = v
			}
			select {
			case <-exited:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	err := cmd.Wait()
	close(exited)
	<-done
	return result{code: exitCode(t, err), stdout: stdout.String(), stderr: stderr.String()}, rss
}

// longestLine returns the length of s's longest line.
func longestLine(s string) int {
	n := 0
	for _, l := range strings.Split(s, "\n") {
		n = max(n, len(l))
	}
	return n
}

// TestS3BackupMisbehavingServer: a backup through a server that answers a
// write as done and stores nothing, completes an upload and answers 500,
// or answers with a 200 MB error, fails (exit 1), records no row and
// leaves neither an object nor an open upload; the huge error costs little
// memory and a short log line.
func TestS3BackupMisbehavingServer(t *testing.T) {
	e := newS3Env(t)
	generateWorld(t, e.world)
	randomFile(t, e.world, "world/region/r.97.97.mca", 12<<20)
	for _, tc := range []struct {
		name     string
		rule     s3test.Rule
		partMiB  int    // 64: the archive is one part, sent by PutObject; 5: multipart
		want     string // in the termination message's error
		measured bool   // report the peak RSS
	}{
		{"PutObject answered 200, nothing stored", s3test.On("PutObject", 0, s3test.Swallow), 64, "stored nothing", false},
		{"CompleteMultipartUpload answered 200, not done", s3test.On("CompleteMultipartUpload", 0, s3test.Swallow), 5, "recording the SHA-256", false},
		{"CompleteMultipartUpload done, answered 500", s3test.On("CompleteMultipartUpload", 0, s3test.ForwardThenFail(500)), 5, "completing the upload", false},
		{"CopyObject answered 200, not done", s3test.On("CopyObject", 0, s3test.Swallow), 5, "x-amz-meta-sha256", false},
		{"200 MB error body", s3test.On("PutObject", 0, s3test.HugeError(400, 200<<20, true)), 64, "InternalError", true},
		{"200 MB error body, chunked", s3test.On("UploadPart", 0, s3test.HugeError(400, 200<<20, false)), 5, "InternalError", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := e.srv.Proxy(t, tc.rule)
			e.writeS3ConfigAt(t, e.bucket, p.Endpoint, fmt.Sprintf("part_size_mib = %d\n", tc.partMiB))
			run := "lie-" + strings.NewReplacer(" ", "-", ",", "").Replace(strings.ToLower(tc.name))
			res, rss := runPeak(t, e.args(run)...)
			if res.code != 1 {
				t.Fatalf("backup exited %d, want 1:\n%s", res.code, res.stderr)
			}
			if s := summary(t, e.tlog); s["status"] != "failed" || !strings.Contains(fmt.Sprint(s["error"]), tc.want) {
				t.Errorf("termination message %v, want failed saying %q", s, tc.want)
			}
			if rs := rows(t, e.url); len(rs) != 0 {
				t.Errorf("rows recorded: %+v", rs)
			}
			if e.object(t, run) != nil {
				t.Error("an object is left under the key")
			}
			if up := e.srv.Uploads(t, e.bucket); len(up) != 0 {
				t.Errorf("uploads left open: %v", up)
			}
			if n := longestLine(res.stderr); n > 8<<10 {
				t.Errorf("a log line of %d bytes", n)
			}
			if tc.measured {
				t.Logf("peak RSS %.1f MiB, longest log line %d bytes", float64(rss)/(1<<20), longestLine(res.stderr))
				if rss > 96<<20 {
					t.Errorf("peak RSS %d MiB, want at most 96", rss>>20)
				}
			}
		})
	}
}

// TestS3ReadMisbehavingServer: restore and verify through a server that
// cuts a GET and refuses its resumes exit 1 (an I/O failure, a retry may
// help), not 3 (archive refused), in the checksum pass and in the
// extraction, and leave the world as it was; an endless body (no length)
// is read to the object's size and no further.
func TestS3ReadMisbehavingServer(t *testing.T) {
	e := newS3Env(t)
	generateRestorableWorld(t, e.world)
	randomFile(t, e.world, "world/region/r.96.96.mca", 6<<20)
	if res := archiver(t, e.args("to-read")...); res.code != 0 {
		t.Fatalf("backup exited %d:\n%s", res.code, res.stderr)
	}
	obj := e.object(t, "to-read")
	h := sha256.Sum256(obj)
	sum := hex.EncodeToString(h[:])
	// cutNth cuts the n-th GET halfway and answers every later one 503.
	cutNth := func(n int) s3test.Rule {
		return func(r s3test.Request) s3test.Action {
			switch {
			case r.Op != "GetObject" || r.N < n:
				return nil
			case r.N == n:
				return s3test.CutAfter(int64(len(obj) / 2))
			default:
				return s3test.Fail(503, "SlowDown")
			}
		}
	}
	for _, tc := range []struct {
		name string
		cmd  string // restore or verify
		rule s3test.Rule
		code int
	}{
		{"restore: checksum pass cut, resumes 503", "restore", cutNth(1), 1},
		{"restore: extraction cut, resumes 503", "restore", cutNth(2), 1},
		{"restore: endless body", "restore", s3test.On("GetObject", 0, s3test.EndlessBody), 0},
		{"verify: cut, resumes 503", "verify", cutNth(1), 1},
		{"verify: endless body", "verify", s3test.On("GetObject", 0, s3test.EndlessBody), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := e.srv.Proxy(t, tc.rule)
			into := filepath.Join(t.TempDir(), "world")
			oldWorld(t, into)
			before := snapshot(t, into, nil)
			args := append([]string{"verify", "--archive", e.ref("to-read"), "--sha256", sum, "--log-format", "json"}, e.s3FlagsAt(p.Endpoint)...)
			if tc.cmd == "restore" {
				args = append(restoreArgs(e.ref("to-read"), sum, into, "--replace"), e.s3FlagsAt(p.Endpoint)...)
			}
			res := archiver(t, args...)
			if res.code != tc.code {
				t.Fatalf("%s exited %d, want %d:\n%s%s", tc.cmd, res.code, tc.code, res.stdout, res.stderr)
			}
			if tc.code != 0 {
				if strings.Contains(res.stderr, "archive refused") {
					t.Errorf("the log says the archive was refused:\n%s", res.stderr)
				}
				if tc.cmd == "restore" {
					untouched(t, into, before, "world")
				}
				return
			}
			if tc.cmd == "restore" {
				compareTrees(t, snapshot(t, into, nil), snapshot(t, e.world, defaultExcluded))
			}
		})
	}
}
