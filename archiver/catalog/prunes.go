package catalog

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// PruneRecord is one row of world_prunes: a prune of Server that ran for
// real, the runs it deleted and the bytes it freed in the store (archives,
// orphans and packs).
type PruneRecord struct {
	Server      string
	StartedAt   time.Time
	FinishedAt  time.Time
	RunsDeleted int
	BytesFreed  int64
}

// RecordPrune records the prune p. A negative count is recorded as 0, a
// finish before the start as the start.
func (db *DB) RecordPrune(ctx context.Context, p PruneRecord) error {
	ctx, cancel := db.bound(ctx)
	defer cancel()
	if p.FinishedAt.Before(p.StartedAt) {
		p.FinishedAt = p.StartedAt
	}
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO world_prunes (server, started_at, finished_at, runs_deleted, bytes_freed)
			VALUES ($1, $2, $3, $4, $5)`, p.Server, p.StartedAt, p.FinishedAt, max(p.RunsDeleted, 0), max(p.BytesFreed, 0))
		return err
	})
	if err != nil {
		return fmt.Errorf("recording the prune of server %q: %w", p.Server, schemaErr(err))
	}
	return nil
}

// PruneEvent is a recorded prune as the exporter counts it.
type PruneEvent struct {
	ID          int64  `db:"id"`
	Server      string `db:"server"`
	RunsDeleted int64  `db:"runs_deleted"`
	BytesFreed  int64  `db:"bytes_freed"`
}

// PrunesAfter returns the recorded prunes whose id is above afterID, in id
// order, at most limit.
func (db *DB) PrunesAfter(ctx context.Context, afterID int64, limit int) ([]PruneEvent, error) {
	ctx, cancel := db.bound(ctx)
	defer cancel()
	rows, _ := db.pool.Query(ctx, `SELECT id, server, runs_deleted::bigint AS runs_deleted, bytes_freed
		FROM world_prunes WHERE id > $1 ORDER BY id LIMIT $2`, afterID, limit)
	es, err := pgx.CollectRows(rows, pgx.RowToStructByName[PruneEvent])
	if err != nil {
		return nil, fmt.Errorf("reading world_prunes: %w", schemaErr(err))
	}
	return es, nil
}

// MarkMissing records what a prune of server found in its store: each run
// of missing whose archive the store does not hold gets missing_since (at,
// or the time an earlier prune found it gone, which stays), and each run of
// found whose archive it holds again loses it. Other rows are not touched:
// in a catalog shared by several stores, another store's prune judges them.
// `archiver status` and the exporter count no run with missing_since as a
// backup (NewestByServer, Overview). Like RecordPrune, a report: a prune
// that could not mark still pruned.
func (db *DB) MarkMissing(ctx context.Context, server string, missing, found []string, at time.Time) error {
	if len(missing) == 0 && len(found) == 0 {
		return nil
	}
	ctx, cancel := db.bound(ctx)
	defer cancel()
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE world_backups
			SET missing_since = CASE WHEN run_id = ANY($2) THEN coalesce(missing_since, $4) END
			WHERE server = $1 AND (run_id = ANY($2) OR run_id = ANY($3) AND missing_since IS NOT NULL)`,
			server, missing, found, at)
		return err
	})
	if err != nil {
		return fmt.Errorf("marking the missing archives of server %q: %w", server, schemaErr(err))
	}
	return nil
}
