package catalog

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// The reads of the exporter (archiver metrics): each is bounded, by the
// caller's limit and by MaxServers, and needs only SELECT on the tables of
// jobapi.MetricsTables (these and PrunesAfter's world_prunes).

// MaxServers bounds the servers one Overview reports.
const MaxServers = 1000

// Event is a row of world_backups or world_backup_failures, reduced to
// what the exporter counts. IDs grow with each insert (bigserial), so the
// rows after an ID are the ones inserted since.
type Event struct {
	ID              int64   `db:"id"`
	Server          string  `db:"server"`
	DurationSeconds float64 `db:"duration_seconds"`
}

// RunsAfter returns the runs whose id is above afterID, in id order, at
// most limit.
func (db *DB) RunsAfter(ctx context.Context, afterID int64, limit int) ([]Event, error) {
	return db.eventsAfter(ctx, "world_backups", afterID, limit)
}

// FailuresAfter returns the failed attempts whose id is above afterID, in
// id order, at most limit.
func (db *DB) FailuresAfter(ctx context.Context, afterID int64, limit int) ([]Event, error) {
	return db.eventsAfter(ctx, "world_backup_failures", afterID, limit)
}

func (db *DB) eventsAfter(ctx context.Context, table string, afterID int64, limit int) ([]Event, error) {
	ctx, cancel := db.bound(ctx)
	defer cancel()
	rows, _ := db.pool.Query(ctx, `SELECT id, server,
		extract(epoch FROM finished_at - started_at)::float8 AS duration_seconds
		FROM `+table+` WHERE id > $1 ORDER BY id LIMIT $2`, afterID, limit)
	es, err := pgx.CollectRows(rows, pgx.RowToStructByName[Event])
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", table, schemaErr(err))
	}
	return es, nil
}

// ServerOverview is one server as the exporter shows it.
type ServerOverview struct {
	Server string
	// Runs are the server's newest runs not finished in the future and
	// not found missing by a prune (MarkMissing), newest first, at most
	// the asked number: Runs[0] is its newest successful run whose archive
	// the store holds, as far as the catalog knows.
	Runs []Record
	// Failures are its newest failed attempts not finished in the future
	// (the same rule as Runs: a failure's time is its pod's clock),
	// newest first.
	Failures   []Failure
	RunCount   int64 // every run of the server in the catalog
	StoreBytes int64 // the sum of its runs' added_bytes (what it holds in the store)
	// ArchivesMissing counts its runs whose archive the last prune found
	// missing from the store.
	ArchivesMissing int64
}

// Overview returns every server that has a run or a failed attempt,
// except those of leaveOut (retired ones: RetiredServers), at most
// MaxServers, ordered by name, with its newest runs (at most
// runs) and its newest failed attempts (at most failures), both finished
// at most FutureTolerance after now. A row further in the future (a node
// with a wrong clock) would stay the newest until its time came: a failure
// would hold the server's last status at failed through every success.
func (db *DB) Overview(ctx context.Context, now time.Time, runs, failures int, leaveOut []string) ([]ServerOverview, error) {
	ctx, cancel := db.bound(ctx)
	defer cancel()
	latest := now.Add(FutureTolerance)
	var out []ServerOverview
	err := pgx.BeginTxFunc(ctx, db.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		type agg struct {
			Server          string `db:"server"`
			RunCount        int64  `db:"run_count"`
			StoreBytes      int64  `db:"store_bytes"`
			ArchivesMissing int64  `db:"archives_missing"`
		}
		rows, _ := tx.Query(ctx, `WITH s AS (
				SELECT server FROM world_backups UNION SELECT server FROM world_backup_failures
				EXCEPT SELECT unnest($2::text[])
				ORDER BY server LIMIT $1)
			SELECT s.server, count(w.id) AS run_count, coalesce(sum(w.added_bytes), 0)::bigint AS store_bytes,
				count(w.id) FILTER (WHERE w.missing_since IS NOT NULL) AS archives_missing
			FROM s LEFT JOIN world_backups w ON w.server = s.server
			GROUP BY s.server ORDER BY s.server`, MaxServers, leaveOut)
		aggs, err := pgx.CollectRows(rows, pgx.RowToStructByName[agg])
		if err != nil {
			return err
		}
		names := make([]string, len(aggs))
		index := make(map[string]int, len(aggs))
		out = make([]ServerOverview, len(aggs))
		for i, a := range aggs {
			names[i], index[a.Server] = a.Server, i
			out[i] = ServerOverview{Server: a.Server, RunCount: a.RunCount, StoreBytes: a.StoreBytes,
				ArchivesMissing: a.ArchivesMissing}
		}
		rows, _ = tx.Query(ctx, `SELECT w.* FROM unnest($1::text[]) AS s(server)
			CROSS JOIN LATERAL (SELECT `+columns+` FROM world_backups
				WHERE server = s.server AND finished_at <= $2 AND missing_since IS NULL
				ORDER BY finished_at DESC, id DESC LIMIT $3) w`, names, latest, runs)
		recs, err := pgx.CollectRows(rows, pgx.RowToStructByName[Record])
		if err != nil {
			return err
		}
		for _, r := range recs {
			o := &out[index[r.Server]]
			o.Runs = append(o.Runs, r)
		}
		rows, _ = tx.Query(ctx, `SELECT f.* FROM unnest($1::text[]) AS s(server)
			CROSS JOIN LATERAL (SELECT `+failureColumns+` FROM world_backup_failures
				WHERE server = s.server AND finished_at <= $2
				ORDER BY finished_at DESC, id DESC LIMIT $3) f`, names, latest, failures)
		fs, err := pgx.CollectRows(rows, pgx.RowToStructByName[Failure])
		if err != nil {
			return err
		}
		for _, f := range fs {
			o := &out[index[f.Server]]
			o.Failures = append(o.Failures, f)
		}
		for i := range out {
			slices.SortFunc(out[i].Runs, func(a, b Record) int {
				return cmp.Or(b.FinishedAt.Compare(a.FinishedAt), cmp.Compare(b.ID, a.ID))
			})
			slices.SortFunc(out[i].Failures, func(a, b Failure) int {
				return cmp.Or(b.FinishedAt.Compare(a.FinishedAt), cmp.Compare(b.ID, a.ID))
			})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the catalog's overview: %w", schemaErr(err))
	}
	return out, nil
}
