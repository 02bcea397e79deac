package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

// localURL is the server every developer machine and CI runner of this
// project has (trust auth); DATABASE_URL overrides it for the external path.
const localURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

func connect(t *testing.T, u string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), u)
	if err != nil {
		t.Fatalf("connecting to %s: %v", redact(u), err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func databaseExists(t *testing.T, admin, name string) bool {
	t.Helper()
	var n int
	if err := connect(t, admin).QueryRow(t.Context(), "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil {
		t.Fatalf("querying pg_database: %v", err)
	}
	return n == 1
}

// TestURL runs the same checks through both server paths: DATABASE_URL, and
// the private server started by the harness.
func TestURL(t *testing.T) {
	external := os.Getenv("DATABASE_URL")
	if external == "" {
		external = localURL
	}
	for _, tc := range []struct {
		name string
		env  string
	}{
		{"database_url", external},
		{"private", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("DATABASE_URL", tc.env)
			if tc.env != "" {
				if err := ping(t.Context(), tc.env); err != nil {
					unavailable(t, os.Getenv("CI") == "true", fmt.Errorf("%s: %w", redact(tc.env), err))
				}
			}
			var names []string
			t.Run("fresh databases", func(t *testing.T) {
				u1, u2 := URL(t), URL(t)
				if u1 == u2 {
					t.Fatalf("two calls returned the same database %s", u1)
				}
				for _, u := range []string{u1, u2} {
					conn := connect(t, u)
					var name string
					var tables int
					if err := conn.QueryRow(t.Context(), "SELECT current_database(), (SELECT count(*) FROM pg_tables WHERE schemaname = 'public')").Scan(&name, &tables); err != nil {
						t.Fatal(err)
					}
					if !strings.HasPrefix(name, "pgtest_") || tables != 0 {
						t.Fatalf("database %q has %d tables, want a fresh pgtest_ database", name, tables)
					}
					names = append(names, name)
				}
				if _, err := connect(t, u1).Exec(t.Context(), "CREATE TABLE only_in_first (x int)"); err != nil {
					t.Fatal(err)
				}
				var n int
				if err := connect(t, u2).QueryRow(t.Context(), "SELECT count(*) FROM pg_tables WHERE tablename = 'only_in_first'").Scan(&n); err != nil || n != 0 {
					t.Fatalf("table of the first database visible in the second: n=%d err=%v", n, err)
				}
				// A session left open must not stop the drop (WITH (FORCE)).
				_ = connect(t, u1)
			})
			admin := adminURL(t)
			if len(names) != 2 {
				t.Fatalf("subtest recorded %d databases", len(names))
			}
			for _, name := range names {
				if databaseExists(t, admin, name) {
					t.Errorf("database %s still exists after the test's cleanup", name)
				}
			}
		})
	}
}

func TestPrivateStopStart(t *testing.T) {
	s := NewPrivate(t)
	ctx := t.Context()
	conn := connect(t, s.URL())
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (x int); INSERT INTO kept VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(s.dir, ".s.PGSQL."+strconv.Itoa(s.port))); err != nil {
		t.Errorf("unix socket not in the server folder: %v", err)
	}
	if os.Geteuid() == 0 {
		pg, err := user.Lookup("postgres")
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(s.dataDir())
		if err != nil {
			t.Fatal(err)
		}
		if uid := fi.Sys().(*syscall.Stat_t).Uid; strconv.Itoa(int(uid)) != pg.Uid {
			t.Errorf("data folder owned by uid %d, want the postgres user (%s)", uid, pg.Uid)
		}
	}

	s.Stop()
	if err := ping(ctx, s.URL()); err == nil {
		t.Fatal("server still answers after Stop")
	}
	s.Start()
	var x int
	if err := connect(t, s.URL()).QueryRow(ctx, "SELECT x FROM kept").Scan(&x); err != nil || x != 42 {
		t.Fatalf("after Start: x=%d err=%v, want 42", x, err)
	}
}

func TestPrivateRemovedAtCleanup(t *testing.T) {
	var dir string
	var port int
	t.Run("server", func(t *testing.T) {
		s := NewPrivate(t)
		dir, port = s.dir, s.port
	})
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("server folder %s still there after cleanup (err=%v)", dir, err)
	}
	if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
		c.Close()
		t.Errorf("something still listens on the private server's port %d", port)
	}
}

// fakeTB records Fatalf/Skipf and ends the goroutine like the real ones.
type fakeTB struct {
	testing.TB
	fatal, skip string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (f *fakeTB) Skipf(format string, args ...any) {
	f.skip = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func runFake(t *testing.T, fn func(tb testing.TB)) *fakeTB {
	f := &fakeTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f
}

func TestUnavailable(t *testing.T) {
	err := fmt.Errorf("no initdb/pg_ctl found")
	ci := runFake(t, func(tb testing.TB) { unavailable(tb, true, err) })
	if ci.fatal == "" || !strings.Contains(ci.fatal, "apt-get install postgresql") || !strings.Contains(ci.fatal, "no initdb") {
		t.Errorf("CI=true: fatal=%q skip=%q; want a failure saying what to install", ci.fatal, ci.skip)
	}
	local := runFake(t, func(tb testing.TB) { unavailable(tb, false, err) })
	if local.skip == "" || local.fatal != "" || !strings.Contains(local.skip, "apt-get install postgresql") {
		t.Errorf("CI unset: fatal=%q skip=%q; want a skip saying what to install", local.fatal, local.skip)
	}
}

func TestDatabaseURLUnreachableFailsWithoutPassword(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://someone:s3cr3t-pw@127.0.0.1:1/db?connect_timeout=2")
	f := runFake(t, func(tb testing.TB) { adminURL(tb) })
	if f.fatal == "" {
		t.Fatalf("no failure for an unreachable DATABASE_URL (skip=%q)", f.skip)
	}
	if strings.Contains(f.fatal, "s3cr3t-pw") {
		t.Errorf("message leaks the password: %s", f.fatal)
	}
	if !strings.Contains(f.fatal, "cannot be reached") || !strings.Contains(f.fatal, "127.0.0.1") {
		t.Errorf("message does not say what is wrong: %s", f.fatal)
	}
}

func TestFindBinDir(t *testing.T) {
	root := t.TempDir()
	mk := func(version string, names ...string) {
		d := filepath.Join(root, version, "bin")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if err := os.WriteFile(filepath.Join(d, n), []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	mk("9.6", "initdb", "pg_ctl")
	mk("15", "initdb", "pg_ctl")
	mk("16", "initdb", "pg_ctl")
	mk("17", "initdb") // incomplete: no pg_ctl
	got, err := findBinDir(filepath.Join(root, "*", "bin"))
	if err != nil || got != filepath.Join(root, "16", "bin") {
		t.Errorf("findBinDir = %q, %v; want the newest complete one (16)", got, err)
	}

	t.Setenv("PATH", t.TempDir())
	if got, err := findBinDir(filepath.Join(t.TempDir(), "*", "bin")); err == nil {
		t.Errorf("findBinDir found %q in an empty tree", got)
	}
}

func TestWithDatabaseAndRedact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"postgres://u:pw@h:5432/old?sslmode=disable", "postgres://u:pw@h:5432/new?sslmode=disable"},
		{"postgresql://h/", "postgresql://h/new"},
		{"host=h user=u dbname=old", "host=h user=u dbname=old dbname=new"},
	} {
		got, err := withDatabase(tc.in, "new")
		if err != nil || got != tc.want {
			t.Errorf("withDatabase(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
		cfg, err := pgx.ParseConfig(got)
		if err != nil || cfg.Database != "new" {
			t.Errorf("pgx reads database %q from %q (err %v), want new", cfg.Database, got, err)
		}
	}
	for _, in := range []string{
		"postgres://u:topsecret@h:5432/db",
		"host=h user=u password=topsecret dbname=db",
		"postgres://u:top secret@h:notaport/db",
	} {
		if got := redact(in); strings.Contains(got, "topsecret") || strings.Contains(got, "top secret") {
			t.Errorf("redact(%q) = %q leaks the password", in, got)
		}
	}
}

func TestReapStale(t *testing.T) {
	// A server whose owner is gone, as a killed test binary leaves it.
	s, err := startServer()
	if err != nil {
		unavailable(t, os.Getenv("CI") == "true", err)
	}
	t.Cleanup(func() { _ = s.shutdown() })
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.dir, ownerFile), []byte(strconv.Itoa(dead.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	reapStale(filepath.Dir(s.dir), s.bin, s.cred)
	if _, err := os.Stat(s.dir); !os.IsNotExist(err) {
		t.Errorf("stale server folder %s not removed (err=%v)", s.dir, err)
	}
	if err := ping(t.Context(), s.adminURL()); err == nil {
		t.Error("stale server still answers")
	}
	// The shared server of this binary (owner alive) is left alone.
	if os.Getenv("DATABASE_URL") == "" {
		u := URL(t)
		reapStale(filepath.Dir(s.dir), s.bin, s.cred)
		if err := ping(t.Context(), u); err != nil {
			t.Errorf("live server reaped: %v", err)
		}
	}
}
