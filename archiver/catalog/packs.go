package catalog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrPackCondemned is wrapped by the error of InsertChunked when a pack the
// run references was condemned (or removed) by a prune meanwhile: the run
// is not recorded; a retry writes it again.
var ErrPackCondemned = errors.New("a pack the run references was removed by a prune")

// RegisterPack records the pack id before the backup writes it into the
// store named storeRef (store.PacksRef; empty: unnamed), so a pack in the
// store always has a row: one no run comes to reference (a killed backup)
// is condemned by a prune after the grace period like any other.
func (db *DB) RegisterPack(ctx context.Context, id, storeRef string) error {
	ctx, cancel := db.bound(ctx)
	defer cancel()
	if _, err := db.pool.Exec(ctx, `INSERT INTO chunked_packs (pack_id, store_ref) VALUES ($1, NULLIF($2, ''))
		ON CONFLICT (pack_id) DO NOTHING`, id, storeRef); err != nil {
		return fmt.Errorf("registering pack %s: %w", id, err)
	}
	return nil
}

// InsertChunked records the chunked run r and the packs it references in
// one transaction. It first marks every pack used now, where no prune has
// condemned it: when one is condemned or gone, nothing is recorded and the
// error wraps ErrPackCondemned. It returns false, and records nothing, when
// r.RunID already has a row. An error wrapping ErrCommitUnknown may have
// recorded r.
func (db *DB) InsertChunked(ctx context.Context, r Record, packs []string) (inserted bool, err error) {
	ctx, cancel := db.bound(ctx)
	defer cancel()
	packs = slices.Clone(packs)
	slices.Sort(packs) // one lock order for every transaction
	packs = slices.Compact(packs)
	err = db.record(ctx, func(tx pgx.Tx) error {
		rows, _ := tx.Query(ctx, `UPDATE chunked_packs SET last_used = now()
			WHERE pack_id = ANY($1) AND condemned_at IS NULL RETURNING pack_id`, packs)
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("marking the run's packs used: %w", err)
		}
		if len(got) != len(packs) {
			slices.Sort(got)
			var gone []string
			for _, p := range packs {
				if _, ok := slices.BinarySearch(got, p); !ok {
					gone = append(gone, p)
				}
			}
			return fmt.Errorf("%w: %v", ErrPackCondemned, gone)
		}
		var id int64
		err = tx.QueryRow(ctx, `INSERT INTO world_backups
			(run_id, server, former_owner, archive_ref, size_bytes, sha256, compression, file_count, started_at, finished_at,
			 format, added_bytes, namespace)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'chunked', $11, NULLIF($12, ''))
			ON CONFLICT (run_id) DO NOTHING
			RETURNING id`,
			r.RunID, r.Server, r.FormerOwner, r.ArchiveRef, r.SizeBytes, r.SHA256, r.Compression,
			r.FileCount, r.StartedAt, r.FinishedAt, r.AddedBytes, r.Namespace).Scan(&id)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return nil
		case err != nil:
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO chunked_run_packs (run_id, pack_id) SELECT $1, unnest($2::text[])`, r.RunID, packs); err != nil {
			return fmt.Errorf("recording the run's packs: %w", err)
		}
		inserted = true
		db.log.Debug("recorded chunked run", "run_id", r.RunID, "id", id, "packs", len(packs))
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("inserting run %q: %w", r.RunID, err)
	}
	return inserted, nil
}

// CondemnPacks condemns the packs no run references and unused for grace
// that a prune of one store may take, and returns the condemned packs it
// may take (those of earlier prunes that did not finish too): the packs to
// remove from its store, then to forget with ForgetPacks.
//
// Several stores may share the catalog, and a pack's row only says which
// store it was registered for, not which holds it. held reports which of
// the packs asked about the prune's store holds (nil holds none); the
// grace period, at least the deadline of the store's backups, covers
// those. Only the packs registered for storeRef (the prune's store,
// store.PacksRef) or for no store are asked about. A pack is taken when
// held reports it, or when it was unused for horizon too, longer than any
// backup anywhere may run: a registration of a backup that died, in any
// store. Any other pack is left alone, condemned or not: another store's,
// whose backups this grace does not cover, or one of this store's that a
// backup registered and of which the store holds nothing yet.
//
// held is asked outside the transaction; the transaction then condemns
// what it allows with the same checks of references and last_used.
func (db *DB) CondemnPacks(ctx context.Context, grace, horizon time.Duration, storeRef string,
	held func(ctx context.Context, ids []string) ([]string, error)) ([]string, error) {
	graceIv := fmt.Sprintf("%d microseconds", grace.Microseconds())
	horizonIv := fmt.Sprintf("%d microseconds", horizon.Microseconds())
	type cand struct {
		id              string
		condemned, past bool
	}
	qctx, cancel := db.bound(ctx)
	rows, _ := db.pool.Query(qctx, `SELECT pack_id, condemned_at IS NOT NULL, last_used < now() - $2::interval
		FROM chunked_packs p
		WHERE (condemned_at IS NOT NULL
		       OR last_used < now() - $1::interval
		          AND NOT EXISTS (SELECT 1 FROM chunked_run_packs r WHERE r.pack_id = p.pack_id))
		  AND (last_used < now() - $2::interval OR store_ref IS NULL OR store_ref = $3)
		ORDER BY pack_id`, graceIv, horizonIv, storeRef)
	cands, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (c cand, err error) {
		return c, row.Scan(&c.id, &c.condemned, &c.past)
	})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("condemning packs: finding unreferenced packs: %w", err)
	}
	var ask, take, fresh, mine []string
	for _, c := range cands {
		if c.past {
			take = append(take, c.id)
		} else {
			ask = append(ask, c.id)
		}
	}
	if len(ask) > 0 && held != nil {
		if mine, err = held(ctx, ask); err != nil {
			return nil, fmt.Errorf("condemning packs: looking them up in the store: %w", err)
		}
		mine = slices.Clone(mine)
		slices.Sort(mine)
		take = append(take, mine...)
	}
	slices.Sort(take)
	for _, c := range cands {
		if _, ok := slices.BinarySearch(take, c.id); ok && !c.condemned {
			fresh = append(fresh, c.id)
		}
	}

	ctx, cancel = db.bound(ctx)
	defer cancel()
	var out []string
	err = pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		// First lock the candidates: a backup whose row transaction marked
		// one of them used holds its row lock until it commits, so this
		// waits for it. A pack of another store is taken only past the
		// horizon, whatever a backup made of it since the lookup.
		rows, _ := tx.Query(ctx, `SELECT pack_id FROM chunked_packs p
			WHERE pack_id = ANY($1) AND condemned_at IS NULL AND last_used < now() - $3::interval
			  AND (pack_id = ANY($2) OR last_used < now() - $4::interval)
			  AND NOT EXISTS (SELECT 1 FROM chunked_run_packs r WHERE r.pack_id = p.pack_id)
			ORDER BY pack_id FOR UPDATE`, fresh, mine, graceIv, horizonIv)
		locked, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("locking unreferenced packs: %w", err)
		}
		// Then check the references again in a new statement, whose
		// snapshot holds every backup that committed before the locks were
		// ours; a backup after them waits, then finds the pack condemned.
		if _, err := tx.Exec(ctx, `UPDATE chunked_packs p SET condemned_at = now()
			WHERE pack_id = ANY($1) AND last_used < now() - $3::interval
			  AND (pack_id = ANY($2) OR last_used < now() - $4::interval)
			  AND NOT EXISTS (SELECT 1 FROM chunked_run_packs r WHERE r.pack_id = p.pack_id)`,
			locked, mine, graceIv, horizonIv); err != nil {
			return fmt.Errorf("condemning unreferenced packs: %w", err)
		}
		rows, _ = tx.Query(ctx, `SELECT pack_id FROM chunked_packs
			WHERE pack_id = ANY($1) AND condemned_at IS NOT NULL ORDER BY pack_id`, take)
		out, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("condemning packs: %w", err)
	}
	return out, nil
}

// ForgetPacks deletes the rows of condemned packs whose objects are gone.
func (db *DB) ForgetPacks(ctx context.Context, ids []string) error {
	ctx, cancel := db.bound(ctx)
	defer cancel()
	if _, err := db.pool.Exec(ctx, `DELETE FROM chunked_packs WHERE pack_id = ANY($1) AND condemned_at IS NOT NULL`, ids); err != nil {
		return fmt.Errorf("forgetting removed packs: %w", err)
	}
	return nil
}

// KnownPacks returns those of ids that have a row in chunked_packs,
// condemned or not. A pack in the store without one is an orphan: its row
// was forgotten by a prune (it was condemned first, so no backup can
// record a run that references it: InsertChunked wants every pack's row
// there and not condemned), or lost with the catalog. A backup registers a
// pack before it writes the object, so a pack listed before this call and
// not known by it is never referenced again.
func (db *DB) KnownPacks(ctx context.Context, ids []string) ([]string, error) {
	ctx, cancel := db.bound(ctx)
	defer cancel()
	rows, _ := db.pool.Query(ctx, `SELECT pack_id FROM chunked_packs WHERE pack_id = ANY($1) ORDER BY pack_id`, ids)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("looking up packs: %w", err)
	}
	return out, nil
}
