package catalog

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestSlots: a group of two slots lets two holders in (across connections,
// as two archivers), a third waits until its context ends or a slot is
// given back; another group, and the archive locks, are apart; a holder
// whose connection is gone (its archiver was killed) frees its slot.
func TestSlots(t *testing.T) {
	db := migrated(t)
	other := open(t, db.pool.Config().ConnString())
	const group = "https://10.0.0.1:6443"
	a, err := db.Slots(group, 2).Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	b, err := other.Slots(group, 2).Wait(t.Context())
	if err != nil {
		t.Fatalf("the second slot: %v", err)
	}
	waitShort := func(db *DB, group string, n int) (func(), error) {
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		return db.Slots(group, n).Wait(ctx)
	}
	if _, err := waitShort(other, group, 2); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a third holder of two slots: %v, want it to wait until its context ends", err)
	}
	if u, err := waitShort(other, "another cluster", 2); err != nil {
		t.Fatalf("a slot of another group: %v", err)
	} else {
		u()
	}
	if u, err := other.LockArchive(t.Context(), group); err != nil {
		t.Fatalf("an archive lock named as the group: %v", err)
	} else {
		u()
	}
	a()
	a() // harmless
	c, err := waitShort(other, group, 2)
	if err != nil {
		t.Fatalf("a slot given back is not taken: %v", err)
	}
	defer c()

	// b's session ends, as a killed archiver's does: its slot is free.
	b()
	hold, err := db.Slots(group, 2).Wait(t.Context()) // slot 1, b's
	if err != nil {
		t.Fatal(err)
	}
	defer hold()
	if _, err := db.pool.Exec(t.Context(), `SELECT pg_terminate_backend(pid) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND pid <> pg_backend_pid() AND objid = 1
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`); err != nil {
		t.Fatal(err)
	}
	wait, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	d, err := other.Slots(group, 2).Wait(wait)
	if err != nil {
		t.Fatalf("a slot whose holder's connection closed: %v", err)
	}
	d()
	if _, err := db.Slots(group, 0).Wait(t.Context()); err == nil {
		t.Error("a group of 0 slots is accepted")
	}
}
