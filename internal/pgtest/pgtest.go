// Package pgtest gives tests a real PostgreSQL database.
//
// URL returns the URL of a fresh, empty database created for one test and
// dropped (WITH (FORCE)) when the test ends. The server is the one named by
// DATABASE_URL when that is set (its user must be allowed to CREATE DATABASE);
// otherwise a private server is started once per test binary with initdb and
// pg_ctl (the newest under /usr/lib/postgresql/*/bin, else the ones on PATH)
// in a temporary folder, listening on a free 127.0.0.1 port with its unix
// socket in that folder, and stopped by Main when the tests are done. As root,
// initdb, pg_ctl and postgres run as the `postgres` OS user.
//
// When DATABASE_URL is set but the server cannot be reached, URL fails the
// test: the caller asked for that server. When DATABASE_URL is unset and no
// server can be started, URL fails the test when CI=true and skips it
// otherwise, saying what to install.
//
// NewPrivate starts a server owned by one test, for tests that must stop and
// restart the database mid-run. NewProxy puts a TCP proxy in front of a
// server that can turn into a blackhole (accepts, never answers), and
// NewBlackhole is one from the start, for tests of a database that hangs;
// NewProxyOn listens on another address of this machine (the test node's
// gateway, for pods). Run is Main without the exit, for harnesses wrapping it.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// installHint tells a developer what to do when no PostgreSQL is available.
const installHint = "install PostgreSQL (Debian/Ubuntu: `apt-get install postgresql`, which provides " +
	"/usr/lib/postgresql/<version>/bin/initdb and pg_ctl) or set DATABASE_URL to a server whose user may CREATE DATABASE"

// connectTimeout bounds every administrative connection the harness opens.
const connectTimeout = 15 * time.Second

// shared is the per-binary server state. It is package state by necessity:
// one private server serves every test in the binary and Main must find it.
var shared struct {
	mu         sync.Mutex
	mainCalled bool
	started    bool // a start was attempted
	server     *Server
	err        error
}

// Main runs the tests, stops the private server if one was started, and
// exits with the tests' result. Call it from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run is Main without the exit, for harnesses that wrap it (internal/kubenode):
// it runs the tests, stops the private server and returns the exit code.
func Run(m *testing.M) int {
	shared.mu.Lock()
	shared.mainCalled = true
	shared.mu.Unlock()

	code := m.Run()

	shared.mu.Lock()
	s := shared.server
	shared.server = nil
	shared.mu.Unlock()
	if s != nil {
		if err := s.shutdown(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: stopping private PostgreSQL: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// URL returns the URL of a fresh, empty database for this test, created on
// the server and dropped at the test's cleanup.
func URL(t testing.TB) string {
	t.Helper()
	admin := adminURL(t)
	return createDatabase(t, admin)
}

// adminURL returns a URL of a database on the chosen server that may create
// and drop databases.
func adminURL(t testing.TB) string {
	t.Helper()
	if u := os.Getenv("DATABASE_URL"); u != "" {
		ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
		defer cancel()
		if err := ping(ctx, u); err != nil {
			t.Fatalf("pgtest: DATABASE_URL (%s) is set but the server cannot be reached: %v; "+
				"start that server or unset DATABASE_URL to let the harness start a private one", redact(u), err)
		}
		return u
	}

	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.started {
		shared.started = true
		if !shared.mainCalled {
			shared.err = errors.New("the private server needs pgtest.Main: add `func TestMain(m *testing.M) { pgtest.Main(m) }` to this package's tests, or set DATABASE_URL")
		} else {
			shared.server, shared.err = startServer()
		}
	}
	if shared.err != nil {
		if !shared.mainCalled {
			t.Fatalf("pgtest: %v", shared.err)
		}
		unavailable(t, os.Getenv("CI") == "true", shared.err)
	}
	return shared.server.adminURL()
}

// unavailable reports a missing PostgreSQL: a failure in CI, a skip elsewhere.
func unavailable(t testing.TB, ci bool, err error) {
	t.Helper()
	if ci {
		t.Fatalf("pgtest: no PostgreSQL available and CI=true: %v; %s", err, installHint)
	}
	t.Skipf("pgtest: no PostgreSQL available, skipping: %v; %s", err, installHint)
}

// createDatabase creates a database with a random name on the server that
// admin points at, registers its removal at t's cleanup, and returns its URL.
func createDatabase(t testing.TB, admin string) string {
	t.Helper()
	u, name, err := newDatabase(admin)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
		defer cancel()
		if err := adminExec(ctx, admin, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: dropping database %s: %v", name, err)
		}
	})
	return u
}

// newDatabase creates a database with a random name on the server that
// admin points at and returns its URL and name.
func newDatabase(admin string) (string, string, error) {
	name := "pgtest_" + randomHex(8)
	u, err := withDatabase(admin, name)
	if err != nil {
		return "", "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	if err := adminExec(ctx, admin, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", "", fmt.Errorf("creating database %s on %s: %w", name, redact(admin), err)
	}
	return u, name, nil
}

// withDatabase returns connString with its database replaced by name. Both
// URL (postgres://...) and keyword/value connection strings are accepted.
func withDatabase(connString, name string) (string, error) {
	if strings.HasPrefix(connString, "postgres://") || strings.HasPrefix(connString, "postgresql://") {
		u, err := url.Parse(connString)
		if err != nil {
			return "", fmt.Errorf("DATABASE_URL is not a valid URL (%s)", redact(connString))
		}
		u.Path = "/" + name
		u.RawPath = ""
		return u.String(), nil
	}
	// Keyword/value form: a later keyword overrides an earlier one.
	return connString + " dbname=" + name, nil
}

// redact returns a form of a connection string that is safe to print: no password.
func redact(connString string) string {
	if u, err := url.Parse(connString); err == nil && u.Scheme != "" {
		return u.Redacted()
	}
	cfg, err := pgx.ParseConfig(connString)
	if err != nil {
		return "(unparsable connection string)"
	}
	return fmt.Sprintf("host=%s port=%d user=%s dbname=%s", cfg.Host, cfg.Port, cfg.User, cfg.Database)
}

func ping(ctx context.Context, connString string) error {
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.Ping(ctx)
}

func adminExec(ctx context.Context, connString, sql string) error {
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b)
}
