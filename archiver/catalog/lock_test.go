package catalog

import (
	"context"
	"errors"
	"io"
	neturl "net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/worldbackup/worldbackup/internal/pgtest"
)

func TestInsertS3Ref(t *testing.T) {
	db := migrated(t)
	r := record("run-s3", "alpha", time.Now())
	r.ArchiveRef = "s3://felis-backups/prefix/alpha/run-s3.tar.zst"
	if ok, err := db.Insert(t.Context(), r); err != nil || !ok {
		t.Fatalf("Insert of an s3:// ref = %v, %v; want it recorded", ok, err)
	}
	got, err := db.Lookup(t.Context(), "run-s3")
	if err != nil || got.ArchiveRef != r.ArchiveRef {
		t.Fatalf("Lookup = %q, %v; want %q", got.ArchiveRef, err, r.ArchiveRef)
	}
}

// TestLockArchive: the lock is exclusive per name across connections (as
// two archivers would hold it), waits until its context ends, and is free
// again after unlock or when the holder's connection is gone.
func TestLockArchive(t *testing.T) {
	db := migrated(t)
	other := open(t, db.pool.Config().ConnString())
	const name = "s3://bucket/srv/run.tar.zst"
	unlock, err := db.LockArchive(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	u2, err := other.LockArchive(t.Context(), "s3://bucket/srv/other.tar.zst")
	if err != nil {
		t.Fatalf("lock of another name: %v", err)
	}
	u2()
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if _, err := other.LockArchive(ctx, name); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second LockArchive: %v, want it to wait until its context ends", err)
	}
	unlock()
	unlock() // harmless
	u3, err := other.LockArchive(t.Context(), name)
	if err != nil {
		t.Fatalf("LockArchive after unlock: %v", err)
	}
	// The holder's session ends (its archiver was killed): the lock is free.
	defer u3()
	if _, err := db.pool.Exec(t.Context(), `SELECT pg_terminate_backend(pid) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND pid <> pg_backend_pid()
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`); err != nil {
		t.Fatal(err)
	}
	wait, cancelWait := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancelWait()
	u4, err := db.LockArchive(wait, name)
	if err != nil {
		t.Fatalf("LockArchive after the holder's connection closed: %v", err)
	}
	u4()
}

// TestLockServer: one quiesce lock per server across connections, apart
// from the archive locks of the same names.
func TestLockServer(t *testing.T) {
	db := migrated(t)
	other := open(t, db.pool.Config().ConnString())
	unlock, err := db.LockServer(t.Context(), "survival")
	if err != nil {
		t.Fatal(err)
	}
	for name, lock := range map[string]func(context.Context) (func(), error){
		"another server":               func(ctx context.Context) (func(), error) { return other.LockServer(ctx, "creative") },
		"the archive lock of the name": func(ctx context.Context) (func(), error) { return other.LockArchive(ctx, "survival") },
	} {
		u, err := lock(t.Context())
		if err != nil {
			t.Fatalf("%s: %v, want it free", name, err)
		}
		u()
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if _, err := other.LockServer(ctx, "survival"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second LockServer: %v, want it to wait until its context ends", err)
	}
	unlock()
	u, err := other.LockServer(t.Context(), "survival")
	if err != nil {
		t.Fatalf("LockServer after unlock: %v", err)
	}
	u()
}

// withParam returns url with the query parameter name=value (a run-time
// parameter of the sessions pgx opens).
func withParam(t *testing.T, u, name, value string) string {
	t.Helper()
	parsed, err := neturl.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	q := parsed.Query()
	q.Set(name, value)
	parsed.RawQuery = q.Encode()
	return parsed.String()
}

// TestLockKeepAlive: a held lock's session is kept from idling into the
// server's idle_session_timeout, which would end it and free the lock for
// another run; without the keep-alive the lock is lost, and the writes
// that record a run say so (ErrLockLost) and record nothing.
func TestLockKeepAlive(t *testing.T) {
	url := pgtest.URL(t)
	if _, err := open(t, url).Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	idle := withParam(t, url, "idle_session_timeout", "1000") // ms
	other := open(t, url)
	const name = "s3://bucket/srv/run"
	tests := []struct {
		name      string
		keepAlive time.Duration
		held      bool
	}{
		{"kept alive", 50 * time.Millisecond, true},
		{"left idle", time.Hour, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, err := OpenWith(t.Context(), idle, hclog.NewNullLogger(), Timeouts{LockKeepAlive: tt.keepAlive})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			wait, cancelWait := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancelWait()
			unlock, err := db.LockArchive(wait, name)
			if err != nil {
				t.Fatal(err)
			}
			defer unlock()
			time.Sleep(2500 * time.Millisecond) // over two idle_session_timeouts
			ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
			defer cancel()
			u, err := other.LockArchive(ctx, name)
			if err == nil {
				defer u()
			}
			if tt.held {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("another session took the lock (%v): the holder's session idled out", err)
				}
				if err := db.checkLocks(t.Context()); err != nil {
					t.Fatalf("checkLocks of a held lock: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("the lock of an idle session that ended: %v, want it free", err)
			}
			r := record("idle-run", "alpha", time.Now())
			if _, err := db.Insert(t.Context(), r); !errors.Is(err, ErrLockLost) {
				t.Fatalf("Insert under a lost lock: %v, want ErrLockLost", err)
			}
			if _, err := other.Lookup(t.Context(), r.RunID); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Lookup after the refused Insert: %v, want no row", err)
			}
		})
	}
}

// TestLockLost: a lock whose session ends while held (a killed backend, a
// failover) is found by the keep-alive; from then on this DB records no run
// and prunes no row (ErrLockLost), also after the unlock; a concurrency
// slot's loss is only logged.
func TestLockLost(t *testing.T) {
	url := pgtest.URL(t)
	admin := open(t, url)
	if _, err := admin.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	var mu sync.Mutex
	log := hclog.New(&hclog.LoggerOptions{Output: lockedWriter{&mu, &logs}, Level: hclog.Warn})
	db, err := OpenWith(t.Context(), url, log, Timeouts{LockKeepAlive: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	terminate := func(t *testing.T) {
		t.Helper()
		if _, err := admin.pool.Exec(t.Context(), `SELECT pg_terminate_backend(pid) FROM pg_locks
			WHERE locktype = 'advisory' AND granted AND pid <> pg_backend_pid()
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`); err != nil {
			t.Fatal(err)
		}
	}

	release, err := db.Slots("nightly", 1).Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	terminate(t)
	time.Sleep(200 * time.Millisecond)
	release()
	if _, err := db.Insert(t.Context(), record("after-slot", "alpha", time.Now())); err != nil {
		t.Fatalf("Insert after a lost slot: %v, want it recorded", err)
	}

	unlock, err := db.LockServer(t.Context(), "alpha")
	if err != nil {
		t.Fatal(err)
	}
	terminate(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		found := strings.Contains(logs.String(), "lost while held")
		mu.Unlock()
		if found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log of the lost lock within 10s:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	unlock()
	if _, err := db.Insert(t.Context(), record("after-quiesce", "alpha", time.Now())); !errors.Is(err, ErrLockLost) {
		t.Fatalf("Insert after a lost quiesce lock: %v, want ErrLockLost", err)
	}
	if _, err := db.PruneServer(t.Context(), "alpha", func([]Record) ([]string, error) { return []string{"after-slot"}, nil }); !errors.Is(err, ErrLockLost) {
		t.Fatalf("PruneServer after a lost lock: %v, want ErrLockLost", err)
	}
	if _, err := admin.Lookup(t.Context(), "after-slot"); err != nil {
		t.Fatalf("the run a refused prune would have deleted: %v", err)
	}
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
