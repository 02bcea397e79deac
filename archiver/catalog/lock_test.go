package catalog

import (
	"context"
	"errors"
	"testing"
	"time"
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
