package catalog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// lockPoll is how often LockArchive retries a lock another session holds.
const lockPoll = 50 * time.Millisecond

// LockArchive takes an exclusive session-level advisory lock on the archive
// named (an archive store's ref, e.g. s3://bucket/prefix/srv/run.tar.zst),
// waiting while another session holds it, until ctx ends. It is the lock of
// the stores that have none of their own (S3). The lock keeps one pooled
// connection until unlock is called; a killed process loses its connection
// and with it the lock, as with flock(2). unlock may be called more than
// once.
func (db *DB) LockArchive(ctx context.Context, name string) (unlock func(), err error) {
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("taking the archive lock of %s: %w", name, err)
	}
	t := time.NewTicker(lockPoll)
	defer t.Stop()
	for {
		var got bool
		call, cancel := db.bound(ctx)
		err := conn.QueryRow(call, `SELECT pg_try_advisory_lock(hashtextextended('worldbackup.archive/' || $1, 0))`, name).Scan(&got)
		cancel()
		if err != nil {
			conn.Release()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("taking the archive lock of %s: %w", name, err)
		}
		if got {
			break
		}
		select {
		case <-ctx.Done():
			conn.Release()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), closeWait)
			defer cancel()
			var released bool
			err := conn.QueryRow(ctx, `SELECT pg_advisory_unlock(hashtextextended('worldbackup.archive/' || $1, 0))`, name).Scan(&released)
			if err != nil || !released {
				// The session may still hold it: close the connection,
				// which drops every lock it has.
				db.log.Warn("releasing the archive lock failed; closing its connection", "archive", name,
					"error", errors.Join(err, errNotHeld(released)))
				_ = conn.Conn().Close(ctx)
			}
			conn.Release()
		})
	}, nil
}

// errNotHeld is the error of an unlock that found the lock not held.
func errNotHeld(released bool) error {
	if released {
		return nil
	}
	return errors.New("the session did not hold the lock")
}
