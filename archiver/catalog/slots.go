package catalog

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// slotPoll is how often Slots.Wait looks again for a free slot.
const slotPoll = 100 * time.Millisecond

// Slots are the n slots of a concurrency group: at most n backups of the
// group hold one at a time. A slot is a session-level advisory lock (the
// two-key form, so no archive lock can collide with it) on
// ('worldbackup.concurrency/' || group, i) for i in [0, n), held by one
// pooled connection: a killed process loses its connection and with it the
// slot, as with flock(2).
type Slots struct {
	db    *DB
	group string
	n     int
}

// Slots returns the n slots of group in the catalog.
func (db *DB) Slots(group string, n int) Slots { return Slots{db: db, group: group, n: n} }

// Wait takes a free slot, looking again every 100 ms while all are held,
// until ctx ends (its cause is returned then). release gives the slot back;
// it may be called more than once.
func (s Slots) Wait(ctx context.Context) (release func(), err error) {
	if s.n < 1 {
		return nil, fmt.Errorf("a concurrency group has at least 1 slot, not %d", s.n)
	}
	slot := -1
	conn, ended, err := s.db.pollLock(ctx, slotPoll, func(call context.Context, conn *pgxpool.Conn) (bool, error) {
		for i := range s.n {
			var got bool
			if err := conn.QueryRow(call, `SELECT pg_try_advisory_lock(hashtext('worldbackup.concurrency/' || $1), $2)`, s.group, i).Scan(&got); err != nil || got {
				slot = i
				return got, err
			}
		}
		return false, nil
	})
	switch {
	case ended:
		return nil, fmt.Errorf("waiting for a slot of %q: %w", s.group, context.Cause(ctx))
	case err != nil:
		return nil, fmt.Errorf("taking a slot of %q: %w", s.group, err)
	}
	return s.releaser(conn, slot), nil
}

// releaser returns the function that gives slot i, held by conn, back.
func (s Slots) releaser(conn *pgxpool.Conn, i int) func() {
	return s.db.hold(conn, "slot", fmt.Sprintf("%s/%d", s.group, i), false,
		`SELECT pg_advisory_unlock(hashtext('worldbackup.concurrency/' || $1), $2)`, s.group, i)
}
