package catalog

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// slotPoll is how often TakeSlot looks again for a free slot.
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
	conn, err := s.db.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("taking a slot of %q: %w", s.group, err)
	}
	t := time.NewTicker(slotPoll)
	defer t.Stop()
	for {
		for i := range s.n {
			var got bool
			call, cancel := s.db.bound(ctx)
			err := conn.QueryRow(call, `SELECT pg_try_advisory_lock(hashtext('worldbackup.concurrency/' || $1), $2)`, s.group, i).Scan(&got)
			cancel()
			if err != nil {
				conn.Release()
				if ctx.Err() != nil {
					return nil, fmt.Errorf("waiting for a slot of %q: %w", s.group, context.Cause(ctx))
				}
				return nil, fmt.Errorf("taking a slot of %q: %w", s.group, err)
			}
			if got {
				return s.releaser(conn, i), nil
			}
		}
		select {
		case <-ctx.Done():
			conn.Release()
			return nil, fmt.Errorf("waiting for a slot of %q: %w", s.group, context.Cause(ctx))
		case <-t.C:
		}
	}
}

// releaser returns the function that gives slot i, held by conn, back.
func (s Slots) releaser(conn *pgxpool.Conn, i int) func() {
	return s.db.unlocker(conn, "slot", fmt.Sprintf("%s/%d", s.group, i),
		`SELECT pg_advisory_unlock(hashtext('worldbackup.concurrency/' || $1), $2)`, s.group, i)
}
