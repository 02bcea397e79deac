package catalog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/worldbackup/worldbackup/jobapi"
)

// ErrOtherServer is wrapped by Resolve's error when the run ID names a run
// of another server.
var ErrOtherServer = errors.New("the run belongs to another server")

// ErrNoRun is wrapped by Resolve's error for RunLatest when the server has
// no successful run (none at all, or only runs finished in the future,
// whose archives a prune found missing, or made just before a restore).
var ErrNoRun = errors.New("the server has no successful run")

// Resolve returns the run that ref (a run reference, jobapi.CheckRunRef)
// names among server's runs: the row of that run ID, whatever namespace
// recorded it (a fleet move restores a run another namespace made), or for
// jobapi.RunLatest the newest run of the server that namespace sees
// (InNamespace; "" for every namespace) (by Record.EndedAt: a run
// recorded by a node whose clock was behind is as new as its row) that
// finished at most FutureTolerance after now and whose archive no prune
// found missing from the store (MarkMissing), and that is not a backup
// made just before a restore (jobapi.IsPreRestore): the newest that can be
// restored, as status and the exporter count them. The errors wrap ErrNotFound
// (no such run ID), ErrOtherServer (a run of another server) and ErrNoRun
// (latest of a server without a run).
func (db *DB) Resolve(ctx context.Context, server, namespace, ref string, now time.Time) (Record, error) {
	if err := jobapi.CheckRunRef(ref); err != nil {
		return Record{}, err
	}
	if ref != jobapi.RunLatest {
		r, err := db.Lookup(ctx, ref)
		if err != nil {
			return Record{}, err
		}
		if r.Server != server {
			return Record{}, fmt.Errorf("run %q is a run of server %q, not of %q: %w", ref, r.Server, server, ErrOtherServer)
		}
		return r, nil
	}
	ctx, cancel := db.bound(ctx)
	defer cancel()
	// The newest run held first; a run found missing only when every
	// run is, to name it in the error.
	rows, _ := db.pool.Query(ctx, `SELECT `+columns+` FROM world_backups
		WHERE server = $1 AND finished_at <= $2 AND strpos(run_id, $3) = 0 AND `+InNamespace(4)+`
		ORDER BY missing_since IS NULL DESC, `+endedAtSQL+` DESC, id DESC LIMIT 1`,
		server, now.Add(FutureTolerance), "."+jobapi.PreRestorePrefix, namespace)
	r, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Record])
	if errors.Is(err, pgx.ErrNoRows) && namespace != "" {
		return Record{}, fmt.Errorf("server %q, among the runs recorded from namespace %q or without one "+
			"(another namespace's run is restored by its run ID): %w", server, namespace, ErrNoRun)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return Record{}, fmt.Errorf("server %q: %w", server, ErrNoRun)
	}
	if err != nil {
		return Record{}, fmt.Errorf("finding the newest run of %q: %w", server, schemaErr(err))
	}
	if r.MissingSince != nil {
		return Record{}, fmt.Errorf("server %q: the archive of every run was found missing from the store by a prune "+
			"(the newest, %s, since %s): %w", server, r.RunID, r.MissingSince.UTC().Format(time.RFC3339), ErrNoRun)
	}
	return r, nil
}
