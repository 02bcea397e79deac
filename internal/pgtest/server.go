package pgtest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// binGlob is where Debian and Ubuntu install the PostgreSQL server binaries.
const binGlob = "/usr/lib/postgresql/*/bin"

// ownerFile, in a server folder, holds the PID of the test binary that owns it.
const ownerFile = "owner.pid"

// Server is a private PostgreSQL server in a temporary folder.
type Server struct {
	t       testing.TB // set by NewPrivate; Stop and Start fail this test
	bin     string     // folder holding initdb, pg_ctl, postgres
	dir     string     // temporary folder: data/, server.log, the unix socket
	port    int
	cred    *syscall.Credential // nil unless running as root
	running bool
	dbURL   string // NewPrivate's database
}

// NewPrivate starts a PostgreSQL server owned by this test (whatever
// DATABASE_URL says), creates one empty database on it, and stops the server
// and removes its folder at cleanup. Use it for tests that stop the database
// mid-run. When no server can be started it fails the test when CI=true and
// skips it otherwise.
func NewPrivate(t testing.TB) *Server {
	t.Helper()
	s, err := startServer()
	if err != nil {
		unavailable(t, os.Getenv("CI") == "true", err)
		return nil // unreachable: unavailable ends the test
	}
	s.t = t
	t.Cleanup(func() {
		if err := s.shutdown(); err != nil {
			t.Errorf("pgtest: stopping private PostgreSQL: %v", err)
		}
	})
	u, _, err := newDatabase(s.adminURL())
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	s.dbURL = u
	return s
}

// URL returns the URL of the server's database. It stays valid across Stop
// and Start (same port).
func (s *Server) URL() string { return s.dbURL }

// Stop shuts the server down (fast mode: sessions are disconnected). It must
// be called from the test's goroutine; a failure fails the test.
func (s *Server) Stop() {
	s.t.Helper()
	if err := s.stop("fast"); err != nil {
		s.t.Fatalf("pgtest: %v", err)
	}
}

// Start starts the server again after Stop, on the same port. It must be
// called from the test's goroutine; a failure fails the test.
func (s *Server) Start() {
	s.t.Helper()
	if err := s.start(); err != nil {
		s.t.Fatalf("pgtest: %v", err)
	}
}

func (s *Server) adminURL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// startServer creates a cluster in a new temporary folder and starts it.
func startServer() (*Server, error) {
	bin, err := findBinDir(binGlob)
	if err != nil {
		return nil, err
	}
	cred, err := serverCredential()
	if err != nil {
		return nil, err
	}
	base := tempBase(cred != nil)
	reapStale(base, bin, cred)
	dir, err := os.MkdirTemp(base, "pgtest-")
	if err != nil {
		return nil, fmt.Errorf("creating the server folder: %w", err)
	}
	// Record the owning process, so a later run can stop this server if the
	// test binary dies without running Main's cleanup (a panic, a timeout).
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("writing %s: %w", ownerFile, err)
	}
	s := &Server{bin: bin, dir: dir, cred: cred}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("handing %s to the postgres user: %w", dir, err)
		}
	}
	if out, err := s.run("initdb", "-D", s.dataDir(), "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb in %s failed: %v\n%s", dir, err, out)
	}
	// A free port can be taken between probing and binding: try a few.
	for attempt := 0; ; attempt++ {
		if s.port, err = freePort(); err != nil {
			break
		}
		if err = s.start(); err == nil || attempt == 2 {
			break
		}
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func (s *Server) dataDir() string { return filepath.Join(s.dir, "data") }

func (s *Server) start() error {
	opts := fmt.Sprintf("-h 127.0.0.1 -p %d -k %s -c fsync=off -c full_page_writes=off -c synchronous_commit=off",
		s.port, s.dir)
	logFile := filepath.Join(s.dir, "server.log")
	if out, err := s.run("pg_ctl", "-D", s.dataDir(), "-l", logFile, "-w", "-t", "60", "-s",
		"-o", opts, "start"); err != nil {
		return fmt.Errorf("pg_ctl start on 127.0.0.1:%d failed: %v\n%s\nserver log:\n%s", s.port, err, out, tail(logFile))
	}
	s.running = true
	return nil
}

func (s *Server) stop(mode string) error {
	if !s.running {
		return nil
	}
	if out, err := s.run("pg_ctl", "-D", s.dataDir(), "-w", "-t", "60", "-s", "-m", mode, "stop"); err != nil {
		return fmt.Errorf("pg_ctl stop failed: %v\n%s", err, out)
	}
	s.running = false
	return nil
}

// shutdown stops the server at once and removes its folder.
func (s *Server) shutdown() error {
	err := s.stop("immediate")
	if rmErr := os.RemoveAll(s.dir); rmErr != nil && err == nil {
		err = rmErr
	}
	return err
}

// run runs one of the server's binaries, as the postgres user when root.
func (s *Server) run(name string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	cmd.Env = serverEnv()
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	return out.Bytes(), err
}

// serverEnv is the environment without PG* variables (PGDATA, PGPORT, ...),
// which would otherwise steer initdb and pg_ctl away from our folder.
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			env = append(env, kv)
		}
	}
	return env
}

// findBinDir returns the newest folder matching glob that holds initdb and
// pg_ctl, else the folder of the initdb on PATH.
func findBinDir(glob string) (string, error) {
	dirs, _ := filepath.Glob(glob)
	var found []string
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "pg_ctl")) {
			found = append(found, d)
		}
	}
	if len(found) > 0 {
		sort.Slice(found, func(i, j int) bool { return versionOf(found[i]) > versionOf(found[j]) })
		return found[0], nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		d := filepath.Dir(p)
		if isExec(filepath.Join(d, "pg_ctl")) {
			return d, nil
		}
	}
	return "", fmt.Errorf("no initdb/pg_ctl found under %s or on PATH", glob)
}

var versionRE = regexp.MustCompile(`/(\d+)(?:\.(\d+))?/bin$`)

// versionOf turns /usr/lib/postgresql/15/bin into 15000 (9.6 into 9006).
func versionOf(dir string) int {
	m := versionRE.FindStringSubmatch(dir)
	if m == nil {
		return -1
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	return major*1000 + minor
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// serverCredential returns the postgres user's credential when running as
// root (PostgreSQL refuses to run as root), nil otherwise.
func serverCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, errors.New("running as root, and there is no `postgres` OS user to run the server as " +
			"(the postgresql package creates it)")
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("postgres user has non-numeric uid/gid %q/%q", u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

var safePath = regexp.MustCompile(`^[A-Za-z0-9/_.-]{1,60}$`)

// tempBase picks the parent of the server folder: os.TempDir unless its path
// is long (unix socket paths are limited to about 100 bytes), holds characters
// the pg_ctl -o string would need quoted, or (as root) is not reachable by the
// postgres user; then /tmp.
func tempBase(root bool) string {
	base := os.TempDir()
	if !safePath.MatchString(base) || (root && !worldTraversable(base)) {
		return "/tmp"
	}
	return base
}

// worldTraversable reports whether every folder from / down to dir may be
// entered by any user.
func worldTraversable(dir string) bool {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		if d == "/" || d == "." {
			return true
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail returns the last few KiB of a log file, for error messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return string(b)
}

// reapStale stops and removes private servers whose test binary is gone
// (killed, panicked or timed out before Main could stop them).
func reapStale(base, bin string, cred *syscall.Credential) {
	dirs, _ := filepath.Glob(filepath.Join(base, "pgtest-*"))
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue // not ours, or being created right now
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue // owner alive (or unknown): leave it
		}
		s := &Server{bin: bin, dir: dir, cred: cred, running: true}
		_ = s.shutdown() // pg_ctl stop fails harmlessly when nothing runs
		_ = os.RemoveAll(dir)
	}
}
