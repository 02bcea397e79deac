// Package s3test gives tests a real S3 server: versitygw, the S3 gateway
// over a POSIX folder, built into the tool cache by scripts/versitygw.sh
// (run by `make tools` and `make test`) and linked as .tools/bin/versitygw.
//
// New starts a server owned by one test, on a free 127.0.0.1 port over a
// folder of t.TempDir(), and kills it when the test ends; Stop ends it
// earlier, for tests of a server that goes away mid-upload. A missing
// binary fails the test under CI=true and skips it elsewhere
// (internal/testenv); a binary that does not start fails it everywhere.
package s3test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/worldbackup/worldbackup/internal/testenv"
)

// Credentials of every test server: test values, not secrets.
const (
	AccessKey = "worldbackup-test"
	SecretKey = "worldbackup-test-secret-0123456789"
	Region    = "us-east-1"
)

// startTimeout bounds the wait for a started server to answer.
const startTimeout = 20 * time.Second

// Server is a running versitygw.
type Server struct {
	Endpoint string // http://HOST:PORT
	Root     string // the folder it serves: one subfolder per bucket

	cmd      *exec.Cmd
	stopOnce sync.Once
	exited   chan struct{}
}

// Binary returns the path of the versitygw binary: $WB_TOOLS/bin, else the
// checkout's .tools/bin, else PATH.
func Binary() (string, error) {
	var candidates []string
	if v := os.Getenv("WB_TOOLS"); v != "" {
		candidates = append(candidates, filepath.Join(v, "bin", "versitygw"))
	}
	if wd, err := os.Getwd(); err == nil {
		if root, ok := repoRoot(wd); ok {
			candidates = append(candidates, filepath.Join(root, ".tools", "bin", "versitygw"))
		}
	}
	for _, c := range candidates {
		if fi, err := os.Stat(c); err == nil && fi.Mode().IsRegular() {
			return c, nil
		}
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	return "", errors.New("versitygw is not built")
}

// repoRoot walks up from dir to the folder holding the module's go.mod.
func repoRoot(dir string) (string, bool) {
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			strings.Contains(string(b), "module github.com/worldbackup/worldbackup\n") {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

// New starts a server for the test on 127.0.0.1 and stops it when the test
// ends.
func New(t testing.TB) *Server {
	t.Helper()
	return NewOn(t, "127.0.0.1")
}

// NewOn starts a server for the test on a free port of host (an IP of this
// machine, e.g. a node's bridge gateway that its pods reach) and stops it
// when the test ends.
func NewOn(t testing.TB, host string) *Server {
	t.Helper()
	bin, err := Binary()
	testenv.Require(t, err == nil, "versitygw (the test S3 server) is not built", "run scripts/versitygw.sh (or make tools)")
	root := t.TempDir()
	var lastErr error
	for range 3 { // the free port may be taken between the probe and the start
		s, err := start(bin, root, host)
		if err == nil {
			t.Cleanup(s.Stop)
			return s
		}
		lastErr = err
	}
	t.Fatalf("starting versitygw: %v", lastErr)
	return nil
}

// start runs bin over root on a free port of host and waits until it
// answers.
func start(bin, root, host string) (*Server, error) {
	port, err := freePort(host)
	if err != nil {
		return nil, err
	}
	return startOn(bin, root, net.JoinHostPort(host, strconv.Itoa(port)))
}

// startOn runs bin over root on addr with the test credentials and waits
// until it answers.
func startOn(bin, root, addr string) (*Server, error) {
	return startAs(bin, root, addr, AccessKey, SecretKey)
}

// startAs runs bin over root on addr with the root credentials access and
// secret (in its arguments: test values, never a user's) and waits until it
// answers.
func startAs(bin, root, addr, access, secret string) (*Server, error) {
	logPath := filepath.Join(root, "..", "versitygw-"+strings.ReplaceAll(addr, ":", "-")+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "--port", addr, "--access", access, "--secret", secret,
		"--region", Region, "--quiet", "posix", root)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Killed with the test binary even when it dies without cleaning up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("running %s: %w", bin, err)
	}
	s := &Server{Endpoint: "http://" + addr, Root: root, cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.exited) }()
	deadline := time.Now().Add(startTimeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return s, nil
		}
		select {
		case <-s.exited:
			log, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("versitygw exited at start: %s", strings.TrimSpace(string(log)))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("versitygw did not answer on %s within %v", addr, startTimeout)
		}
	}
}

// freePort returns a TCP port of host that was free a moment ago.
func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Stop kills the server (SIGKILL: a crash, not a shutdown) and waits for it.
// It may be called more than once.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		_ = s.cmd.Process.Kill()
		<-s.exited
	})
}

// Restart kills the server and starts it again on the same address and
// folder: connections in progress break, the data stays.
func (s *Server) Restart(t testing.TB) { s.RestartAs(t, AccessKey, SecretKey) }

// RestartAs is Restart with other root credentials: the old keys are then
// refused (a rotated key), the data stays.
func (s *Server) RestartAs(t testing.TB, access, secret string) {
	t.Helper()
	s.Stop()
	bin := s.cmd.Path
	var lastErr error
	for range 20 { // the port is free again once the killed process is reaped
		n, err := startAs(bin, s.Root, strings.TrimPrefix(s.Endpoint, "http://"), access, secret)
		if err == nil {
			*s = Server{Endpoint: n.Endpoint, Root: n.Root, cmd: n.cmd, exited: n.exited}
			return
		}
		lastErr = err
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("restarting versitygw: %v", lastErr)
}

// Client returns an S3 client of the server with its credentials.
func (s *Server) Client() *s3.Client {
	return s3.New(s3.Options{
		Region:       Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: AccessKey, SecretAccessKey: SecretKey}, nil
		}),
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	})
}

// bucketSeq numbers the buckets of a test binary.
var bucketSeq struct {
	sync.Mutex
	n int
}

// NewBucket creates an empty bucket and returns its name.
func (s *Server) NewBucket(t testing.TB) string {
	t.Helper()
	bucketSeq.Lock()
	bucketSeq.n++
	name := fmt.Sprintf("wb-test-%d-%d", os.Getpid(), bucketSeq.n)
	bucketSeq.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("creating bucket %s: %v", name, err)
	}
	return name
}

// Uploads returns the keys of the bucket's unfinished multipart uploads.
func (s *Server) Uploads(t testing.TB, bucket string) []string {
	t.Helper()
	out, err := s.Client().ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatalf("listing the uploads of %s: %v", bucket, err)
	}
	var keys []string
	for _, u := range out.Uploads {
		keys = append(keys, aws.ToString(u.Key))
	}
	return keys
}
