package catalog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A retired server (archiver retire, table world_retired_servers) is one that
// left the fleet: its rows stay, list and prune work on them, but `archiver
// status` and the exporter no longer judge it, so its staleness alert ends.
// The retirement holds while the server records nothing newer than what it
// had when it was retired (compared by row id, never by clock): a run or a
// failed attempt recorded later brings it back.

// ErrUnknownServer is returned by Retire for a server that has neither a
// run nor a failed attempt in the catalog (a typo, or the wrong catalog).
var ErrUnknownServer = errors.New("the catalog has no run and no failed attempt of this server")

// ErrNotPermitted is wrapped by RetiredServers' error when the role may not
// read world_retired_servers (an exporter's read-only role made before the table
// existed): callers that can go on without it branch on it with errors.Is.
var ErrNotPermitted = errors.New("the role may not read world_retired_servers")

// Retirement is the retirement of a server.
type Retirement struct {
	Server    string
	RetiredAt time.Time
	// Runs and Failures count the server's rows at retirement.
	Runs, Failures int64
}

// Retire retires server from status and the exporter until it records a
// run or a failed attempt again; retiring it again moves its retirement to
// now. It returns ErrUnknownServer when the server has no row at all.
func (db *DB) Retire(ctx context.Context, server string) (Retirement, error) {
	ctx, cancel := db.bound(ctx)
	defer cancel()
	var r Retirement
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		var lastRun, lastFailure int64
		err := tx.QueryRow(ctx, `SELECT
				(SELECT count(*) FROM world_backups WHERE server = $1),
				(SELECT coalesce(max(id), 0) FROM world_backups WHERE server = $1),
				(SELECT count(*) FROM world_backup_failures WHERE server = $1),
				(SELECT coalesce(max(id), 0) FROM world_backup_failures WHERE server = $1)`,
			server).Scan(&r.Runs, &lastRun, &r.Failures, &lastFailure)
		switch {
		case err != nil:
			return err
		case r.Runs+r.Failures == 0:
			return ErrUnknownServer
		}
		r.Server = server
		return tx.QueryRow(ctx, `INSERT INTO world_retired_servers (server, last_run_id, last_failure_id)
			VALUES ($1, $2, $3)
			ON CONFLICT (server) DO UPDATE SET retired_at = now(),
				last_run_id = EXCLUDED.last_run_id, last_failure_id = EXCLUDED.last_failure_id
			RETURNING retired_at`, server, lastRun, lastFailure).Scan(&r.RetiredAt)
	})
	if err != nil {
		return Retirement{}, fmt.Errorf("retiring %s: %w", server, schemaErr(err))
	}
	return r, nil
}

// Unretire ends server's retirement at once; it returns false when the
// server was not retired (or was back already).
func (db *DB) Unretire(ctx context.Context, server string) (bool, error) {
	ctx, cancel := db.bound(ctx)
	defer cancel()
	var was bool
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		rows, _ := tx.Query(ctx, `DELETE FROM world_retired_servers r WHERE server = $1 RETURNING `+retiredNow, server)
		held, err := pgx.CollectRows(rows, pgx.RowTo[bool])
		was = len(held) == 1 && held[0]
		return err
	})
	if err != nil {
		return false, fmt.Errorf("ending the retirement of %s: %w", server, schemaErr(err))
	}
	return was, nil
}

// retiredNow is true for a row r of world_retired_servers whose server recorded
// nothing since.
const retiredNow = `NOT EXISTS (SELECT 1 FROM world_backups w WHERE w.server = r.server AND w.id > r.last_run_id)
	AND NOT EXISTS (SELECT 1 FROM world_backup_failures f WHERE f.server = r.server AND f.id > r.last_failure_id)`

// RetiredServers returns the servers whose retirement holds, with the time
// each was retired, by name (at most MaxServers). A catalog not migrated
// to world_retired_servers yet has none; a role without SELECT on it gets an
// error wrapping ErrNotPermitted.
func (db *DB) RetiredServers(ctx context.Context) (map[string]time.Time, error) {
	ctx, cancel := db.bound(ctx)
	defer cancel()
	type row struct {
		Server    string    `db:"server"`
		RetiredAt time.Time `db:"retired_at"`
	}
	rows, _ := db.pool.Query(ctx, `SELECT server, retired_at FROM world_retired_servers r WHERE `+retiredNow+`
		ORDER BY server LIMIT $1`, MaxServers)
	rs, err := pgx.CollectRows(rows, pgx.RowToStructByName[row])
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		switch pe.Code {
		case "42P01": // undefined_table: not migrated since the archiver that added it
			return map[string]time.Time{}, nil
		case "42501": // insufficient_privilege
			return nil, fmt.Errorf("reading the retired servers: %w (GRANT SELECT ON world_retired_servers to it): %s", ErrNotPermitted, pe.Message)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("reading the retired servers: %w", err)
	}
	out := make(map[string]time.Time, len(rs))
	for _, r := range rs {
		out[r.Server] = r.RetiredAt
	}
	return out, nil
}
