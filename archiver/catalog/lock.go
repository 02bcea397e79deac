package catalog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
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
	return db.namedLock(ctx, "archive", name)
}

// LockServer takes an exclusive session-level advisory lock on the game
// server named, as LockArchive does, for the time its world is read with
// autosave off: two runs of one server (an on-demand backup and a
// scheduled one, say) into any stores sharing this catalog must not
// quiesce it at once, or the first one's save-on would let the game write
// the world while the second reads it.
func (db *DB) LockServer(ctx context.Context, server string) (unlock func(), err error) {
	return db.namedLock(ctx, "quiesce", server)
}

// namedLock takes the session-level advisory lock of name in the space
// kind (worldbackup.<kind>/<name>), waiting until ctx ends.
func (db *DB) namedLock(ctx context.Context, kind, name string) (unlock func(), err error) {
	key := "worldbackup." + kind + "/" + name
	conn, ended, err := db.pollLock(ctx, lockPoll, func(call context.Context, conn *pgxpool.Conn) (bool, error) {
		var got bool
		err := conn.QueryRow(call, `SELECT pg_try_advisory_lock(hashtextextended($1, 0))`, key).Scan(&got)
		return got, err
	})
	switch {
	case ended:
		return nil, ctx.Err()
	case err != nil:
		return nil, fmt.Errorf("taking the %s lock of %s: %w", kind, name, err)
	}
	return db.unlocker(conn, kind, name, `SELECT pg_advisory_unlock(hashtextextended($1, 0))`, key), nil
}

// pollLock takes a pooled connection and calls try on it (one round of
// pg_try_advisory_lock, each call bounded) every poll until try takes a lock
// or ctx ends, and returns the connection that holds the lock. ended says
// that ctx ended first; err is a connection's or a query's error. On either
// the connection is given back.
func (db *DB) pollLock(ctx context.Context, poll time.Duration, try func(call context.Context, conn *pgxpool.Conn) (bool, error)) (conn *pgxpool.Conn, ended bool, err error) {
	conn, err = db.pool.Acquire(ctx)
	if err != nil {
		return nil, false, err
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		call, cancel := db.bound(ctx)
		got, err := try(call, conn)
		cancel()
		switch {
		case err != nil:
			conn.Release()
			return nil, ctx.Err() != nil, err
		case got:
			return conn, false, nil
		}
		select {
		case <-ctx.Done():
			conn.Release()
			return nil, true, nil
		case <-t.C:
		}
	}
}

// unlocker returns the function that releases the advisory lock conn holds
// (the query unlock, with args, says whether it did) and gives conn back to
// the pool; it may be called more than once. A lock it cannot release is
// released by closing conn, which drops every lock of its session.
func (db *DB) unlocker(conn *pgxpool.Conn, kind, name, unlock string, args ...any) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), closeWait)
			defer cancel()
			var released bool
			err := conn.QueryRow(ctx, unlock, args...).Scan(&released)
			if err != nil || !released {
				db.log.Warn("releasing the "+kind+" lock failed; closing its connection", kind, name,
					"error", errors.Join(err, errNotHeld(released)))
				_ = conn.Conn().Close(ctx)
			}
			conn.Release()
		})
	}
}

// errNotHeld is the error of an unlock that found the lock not held.
func errNotHeld(released bool) error {
	if released {
		return nil
	}
	return errors.New("the session did not hold the lock")
}
