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
