package catalog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/worldbackup/worldbackup/archiver/crashguard"
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
	return db.namedLock(ctx, lockArchive, name)
}

// LockServer takes an exclusive session-level advisory lock on the game
// server named, as LockArchive does, for the time its world is read with
// autosave off: two runs of one server (an on-demand backup and a
// scheduled one, say) into any stores sharing this catalog must not
// quiesce it at once, or the first one's save-on would let the game write
// the world while the second reads it.
func (db *DB) LockServer(ctx context.Context, server string) (unlock func(), err error) {
	return db.namedLock(ctx, lockQuiesce, server)
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
	return db.hold(conn, kind, name, true, `SELECT pg_advisory_unlock(hashtextextended($1, 0))`, key), nil
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

// ErrLockLost is wrapped by the errors of the writes that record what was
// done under a lock (Insert, InsertChunked, PruneServer) once an archive or
// quiesce lock of this DB was found lost while held: its session ended (a
// failover, an idle_session_timeout, a killed backend), so another run may
// have taken the lock meanwhile, and what this one did under it is not
// recorded. A retry takes the lock again.
var ErrLockLost = errors.New("a lock this run held was lost: its database session ended (a failover, a killed backend, idle_session_timeout)")

// LockLostError is the error of a lost lock: it wraps ErrLockLost and says
// which lock it was.
type LockLostError struct {
	Kind, Name string
	Err        error // what showed the loss, if anything
}

func (e *LockLostError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("the %s lock of %s: %s", e.Kind, e.Name, ErrLockLost)
	}
	return fmt.Sprintf("the %s lock of %s: %s: %s", e.Kind, e.Name, ErrLockLost, e.Err)
}

func (e *LockLostError) Unwrap() []error { return []error{ErrLockLost, e.Err} }

// Archive says that the lost lock was an archive's (LockArchive): another
// attempt may have written what it guarded.
func (e *LockLostError) Archive() bool { return e.Kind == lockArchive }

// The kinds of the named locks.
const (
	lockArchive = "archive"
	lockQuiesce = "quiesce"
)

// DefaultLockKeepAlive is how often a held lock's session is asked whether
// it still holds its lock (Timeouts.LockKeepAlive): the query also keeps the
// session from idling into the server's idle_session_timeout, which would
// end it and drop the lock.
const DefaultLockKeepAlive = 30 * time.Second

// heldQuery is true while the session holds an advisory lock. Each lock
// has a connection of its own, so any advisory lock is this one.
const heldQuery = `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted)`

// heldLock is a session-level advisory lock held by conn.
type heldLock struct {
	kind, name string
	// critical: losing it fails the run's recording (ErrLockLost); a
	// concurrency slot's loss is only logged.
	critical bool

	mu       sync.Mutex // one query at a time on conn
	conn     *pgxpool.Conn
	lost     error // the session was found gone, under mu
	released bool  // under mu
}

// locks are the locks a DB holds, and the first critical one found lost.
type locks struct {
	mu   sync.Mutex
	held map[*heldLock]struct{}
	lost error
}

// probe asks h's session whether it still holds the lock, unless h was
// released or found lost; it returns h's loss.
func (db *DB) probe(ctx context.Context, h *heldLock) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released || h.lost != nil {
		return h.lost
	}
	var held bool
	err := h.conn.QueryRow(ctx, heldQuery).Scan(&held)
	switch {
	case err == nil && held:
		return nil
	case err != nil && ctx.Err() != nil && !h.conn.Conn().IsClosed():
		return ctx.Err() // the caller gave up; the session is as it was
	case err == nil:
		err = errors.New("the session holds no advisory lock")
	}
	h.lost = &LockLostError{Kind: h.kind, Name: h.name, Err: err}
	db.lockLost(h)
	return h.lost
}

// lockLost logs h's loss and, for a critical lock, keeps it as the DB's.
func (db *DB) lockLost(h *heldLock) {
	if !h.critical {
		db.log.Warn("a lock was lost: its database session ended", "lock", h.kind, "name", h.name, "error", h.lost)
		return
	}
	db.log.Error("a lock was lost while held: this run will not be recorded", "lock", h.kind, "name", h.name, "error", h.lost)
	db.locks.mu.Lock()
	if db.locks.lost == nil {
		db.locks.lost = h.lost
	}
	db.locks.mu.Unlock()
}

// checkLocks returns an error wrapping ErrLockLost when a critical lock of
// db was found lost, or is found lost now: each held one is asked.
func (db *DB) checkLocks(ctx context.Context) error {
	db.locks.mu.Lock()
	lost := db.locks.lost
	var held []*heldLock
	for h := range db.locks.held {
		if h.critical {
			held = append(held, h)
		}
	}
	db.locks.mu.Unlock()
	if lost != nil {
		return lost
	}
	for _, h := range held {
		if err := db.probe(ctx, h); err != nil {
			return err
		}
	}
	return nil
}

// hold keeps the lock conn holds (unlock, with args, releases it and says
// whether it did): a goroutine asks its session every db.keepAlive whether
// it still holds it, until the returned function releases it and gives
// conn back to the pool; that function may be called more than once. A
// lock it cannot release is released by closing conn, which drops every
// lock of its session.
func (db *DB) hold(conn *pgxpool.Conn, kind, name string, critical bool, unlock string, args ...any) func() {
	h := &heldLock{kind: kind, name: name, critical: critical, conn: conn}
	db.locks.mu.Lock()
	if db.locks.held == nil {
		db.locks.held = map[*heldLock]struct{}{}
	}
	db.locks.held[h] = struct{}{}
	db.locks.mu.Unlock()
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer crashguard.Recover()
		defer close(stopped)
		t := time.NewTicker(db.keepAlive)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			ctx, cancel := db.bound(context.Background())
			err := db.probe(ctx, h)
			cancel()
			if err != nil {
				return
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(stop)
			<-stopped
			db.locks.mu.Lock()
			delete(db.locks.held, h)
			db.locks.mu.Unlock()
			h.mu.Lock()
			defer h.mu.Unlock()
			h.released = true
			ctx, cancel := context.WithTimeout(context.Background(), closeWait)
			defer cancel()
			err := h.lost
			if err == nil {
				// A session that cannot say it released the lock may have
				// lost it while held.
				var released bool
				if err = conn.QueryRow(ctx, unlock, args...).Scan(&released); err == nil && !released {
					err = errors.New("the session did not hold the lock")
				}
				if err != nil {
					h.lost = &LockLostError{Kind: kind, Name: name, Err: err}
					db.lockLost(h)
				}
			}
			if err != nil {
				db.log.Warn("releasing the "+kind+" lock failed; closing its connection", kind, name, "error", err)
				_ = conn.Conn().Close(ctx)
			}
			conn.Release()
		})
	}
}
