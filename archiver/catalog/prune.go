package catalog

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// PruneServer deletes rows of server in one transaction that holds a
// transaction-scoped advisory lock on the server, so two prunes of one
// server never interleave (the second waits, bounded by the session's
// lock_timeout if one is set, and by ctx). decide receives every row of the
// server, oldest first, and returns the run IDs to delete; an error from it
// rolls back. PruneServer returns the deleted rows. It deletes nothing once
// a lock of db was lost (ErrLockLost).
//
// The lock is a transaction lock, not a session lock, so it never outlives
// the transaction on a pooled connection and needs no second connection.
func (db *DB) PruneServer(ctx context.Context, server string, decide func([]Record) ([]string, error)) ([]Record, error) {
	ctx, cancel := db.bound(ctx)
	defer cancel()
	if err := db.checkLocks(ctx); err != nil {
		return nil, err
	}
	var deleted []Record
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('worldbackup.prune/' || $1, 0))`, server); err != nil {
			return fmt.Errorf("taking the prune lock: %w", err)
		}
		rows, _ := tx.Query(ctx, `SELECT `+columns+` FROM world_backups WHERE server = $1 ORDER BY finished_at, id`, server)
		recs, err := pgx.CollectRows(rows, pgx.RowToStructByName[Record])
		if err != nil {
			return fmt.Errorf("listing runs: %w", err)
		}
		ids, err := decide(recs)
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			return nil
		}
		rows, _ = tx.Query(ctx, `DELETE FROM world_backups WHERE server = $1 AND run_id = ANY($2)
			RETURNING `+columns, server, ids)
		deleted, err = pgx.CollectRows(rows, pgx.RowToStructByName[Record])
		if err != nil {
			return fmt.Errorf("deleting runs: %w", err)
		}
		if len(deleted) != len(ids) {
			return fmt.Errorf("deleting runs: %d of %d rows deleted; nothing changed", len(deleted), len(ids))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pruning server %q: %w", server, err)
	}
	db.log.Debug("pruned rows", "server", server, "deleted", len(deleted))
	return deleted, nil
}
