// Package prune expires a server's old archives: it decides with a
// retention policy which recorded runs to keep, deletes the other rows in
// one transaction under a per-server lock, then removes their archives, and
// removes orphan archives (files named like an archive, or a chunked run's
// manifest, with no row, older than the grace period) that an earlier prune
// or a failed run left.
//
// The order keeps the catalog's promise that a row never points at a
// missing archive: rows go first, files after. A crash between the two
// leaves orphan files, which the next prune removes. The grace period keeps
// the files of a run that is still writing (its archive is renamed into
// place a moment before its row is inserted) and the rows of recent runs:
// set it to at least the longest backup deadline.
//
// For the chunked store it then condemns, removes and forgets the packs no
// run references, and removes the packs in the store that have no row at
// all (see collectOrphanPacks).
package prune

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/worldbackup/worldbackup/archiver/catalog"
	"github.com/worldbackup/worldbackup/archiver/retention"
	"github.com/worldbackup/worldbackup/archiver/store"
	"github.com/worldbackup/worldbackup/jobapi"
)

// Catalog is what prune needs of the catalog.
type Catalog interface {
	List(ctx context.Context, server string) ([]catalog.Record, error)
	Lookup(ctx context.Context, runID string) (catalog.Record, error)
	PruneServer(ctx context.Context, server string, decide func([]catalog.Record) ([]string, error)) ([]catalog.Record, error)
	// CondemnPacks and ForgetPacks collect the chunked store's packs no
	// run references (see catalog.CondemnPacks).
	CondemnPacks(ctx context.Context, grace, horizon time.Duration, storeRef string,
		held func(ctx context.Context, ids []string) ([]string, error)) ([]string, error)
	ForgetPacks(ctx context.Context, ids []string) error
	// KnownPacks returns those of ids the catalog has a row for; a pack
	// in the store without one is an orphan (see collectOrphanPacks).
	KnownPacks(ctx context.Context, ids []string) ([]string, error)
	// RecordPrune records what a prune that ran for real deleted and
	// freed (world_prunes, which the exporter counts).
	RecordPrune(ctx context.Context, p catalog.PruneRecord) error
	// MarkMissing records which runs' archives the store does not hold,
	// and which it holds (again), so status and the exporter stop
	// counting a run that cannot be restored.
	MarkMissing(ctx context.Context, server string, missing, found []string, at time.Time) error
}

// Store is what prune needs of the archive store.
type Store interface {
	Ref(key string) string
	List(ctx context.Context, dir string) ([]store.Object, error)
	// Walk hands over the objects below dir at any depth, a page at a
	// time (the pack folder is walked so, in bounded memory).
	Walk(ctx context.Context, dir string, fn func([]store.Object) error) error
	Remove(ctx context.Context, key string) error
	// Holds reports whether the store holds key's object or temp data
	// of a Put of it: the catalog several stores may share does not say
	// which holds a pack.
	Holds(ctx context.Context, key string) (bool, error)
	// Lock takes the exclusive lock a backup takes on its run, waiting
	// for the current holder (store.S3: the catalog's advisory lock).
	Lock(ctx context.Context, key string) (unlock func(), err error)
}

var (
	_ Catalog = (*catalog.DB)(nil)
	_ Store   = (*store.Local)(nil)
	_ Store   = (*store.Mem)(nil)
	_ Store   = (*store.S3)(nil)
)

// PackHorizon is how long a pack no run references stays unused before a
// prune of any store condemns it, held by its store or not: longer than
// any backup may run (jobapi.MaxDeadline), with a day to spare, so it is
// the registration of a backup that died before it wrote or recorded the
// pack. Below it, a prune condemns only its own store's packs.
const PackHorizon = jobapi.MaxDeadline + 24*time.Hour

// DefaultGrace is the default grace period: longer than the default backup
// deadline (30 minutes) with room to spare.
const DefaultGrace = time.Hour

// Options are the settings of one prune.
type Options struct {
	Server string
	// Namespace is the Job's namespace: only the server's runs recorded
	// from it or without one are judged; another namespace's runs of a
	// server of the same name (a catalog the namespaces share) are kept,
	// and their archives are not orphans. "": every namespace's
	// (catalog.Record.In).
	Namespace string
	Policy    retention.Policy
	// Grace: runs finished and files written less than this long ago are
	// kept, whatever the policy says.
	Grace time.Duration
	// DryRun decides and reports without deleting anything.
	DryRun bool
	// RemoveOrphans removes the orphans (archives and packs without a row)
	// also when they outnumber the recorded ones (see tooManyOrphans).
	RemoveOrphans bool
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.Grace == 0 {
		o.Grace = DefaultGrace
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Validate checks the options a user typed.
func (o Options) Validate() error {
	var errs []error
	if err := jobapi.CheckServer(o.Server); err != nil {
		errs = append(errs, err)
	}
	if err := jobapi.CheckNamespace(o.Namespace); err != nil {
		errs = append(errs, err)
	}
	if err := o.Policy.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.Grace < 0 {
		errs = append(errs, fmt.Errorf("grace is %s: want 0 or more", o.Grace))
	}
	return errors.Join(errs...)
}

// Run is the verdict on one recorded run.
type Run struct {
	RunID      string    `json:"run_id"`
	FinishedAt time.Time `json:"finished_at"`
	ArchiveRef string    `json:"archive_ref"`
	SizeBytes  int64     `json:"size_bytes"`
	Keep       bool      `json:"keep"`
	Reasons    []string  `json:"reasons,omitempty"` // why it is kept

	rec catalog.Record
}

// Orphan is an archive file without a row.
type Orphan struct {
	Ref       string    `json:"archive_ref"`
	SizeBytes int64     `json:"size_bytes"`
	ModTime   time.Time `json:"mod_time"`
	Removed   bool      `json:"removed"`
	Reason    string    `json:"reason,omitempty"` // why it stays
}

// Report says what a prune did (or, in a dry run, would do).
type Report struct {
	Server      string `json:"server"`
	DryRun      bool   `json:"dry_run"`
	Runs        []Run  `json:"runs"` // newest first
	RowsDeleted int    `json:"rows_deleted"`
	// FilesRemoved counts the archive files removed (of deleted rows and
	// orphans), BytesFreed their sizes as listed.
	FilesRemoved int   `json:"files_removed"`
	BytesFreed   int64 `json:"bytes_freed"`
	// FilesMissing counts the deleted rows (in a dry run: the rows to
	// delete) whose archive was already gone: nothing to remove.
	FilesMissing int `json:"files_missing"`
	// RecordedAgain counts the deleted rows whose run a backup recorded
	// again while the prune ran: their new archives stay.
	RecordedAgain int `json:"recorded_again,omitempty"`
	// Future counts the runs finished in the future (see plan): kept.
	Future int `json:"future_runs,omitempty"`
	// ClockBehind counts the runs recorded by a node whose clock was
	// behind (catalog.Record.ClockBehind): judged by their created_at.
	ClockBehind int `json:"clock_behind_runs,omitempty"`
	// ArchivesMissing counts the rows whose archive the store does not
	// hold (see plan): kept, and judged by no rule.
	ArchivesMissing int      `json:"archives_missing,omitempty"`
	OrphansFound    int      `json:"orphans_found"`
	Orphans         []Orphan `json:"orphans,omitempty"`
	FailedRemoves   []string `json:"failed_removes,omitempty"`
	// PacksRemoved counts the chunked store's packs removed: no run
	// references them and none was used for the grace period.
	PacksRemoved int `json:"packs_removed,omitempty"`
	// OrphanPacks counts the packs found in the store without a row in
	// the catalog and written before the grace period (removed, unless
	// this is a dry run; a removed one counts in PacksRemoved too).
	OrphanPacks int `json:"orphan_packs,omitempty"`
}

// Prune applies opts to one server's runs and archives. On error the
// report says what was done before it.
func Prune(ctx context.Context, cat Catalog, st Store, opts Options, log hclog.Logger) (Report, error) {
	if err := opts.Validate(); err != nil {
		return Report{}, err
	}
	opts = opts.withDefaults()
	log = log.Named("prune").With("server", opts.Server)
	rep := Report{Server: opts.Server, DryRun: opts.DryRun}
	now := opts.Now()

	// What the store holds, listed before the rows are read: a row whose
	// archive is not there is judged by no rule (see plan). A backup that
	// commits its archive after this listing records its row within the
	// grace period: the store is asked again about such rows, so that a run
	// recorded meanwhile is judged as any other.
	objs, err := listArchives(ctx, st, opts.Server)
	if err != nil {
		return rep, err
	}
	listed := byKey(objs)
	// A key the listing lacks is asked about on its own: its run may have
	// committed after the listing (recent), or the listing missed it (a
	// page lost, a store whose listings lag its writes); a run is found
	// missing, and left out of `latest` (MarkMissing), only when the
	// store says so of its key. Missing runs are few, so are the asks.
	holds := func(key string) (bool, error) {
		if _, ok := listed[key]; ok {
			return true, nil
		}
		return st.Holds(ctx, key)
	}

	// The keys of the rows that stay and of those planned to go: neither
	// is an orphan.
	remaining, planned := map[string]bool{}, map[string]bool{}
	// The runs whose archives the store does not hold, and those it holds.
	var missing, found []string
	decide := func(recs []catalog.Record) ([]string, error) {
		v, err := plan(recs, opts.Namespace, st, holds, opts.Policy, now, now.Add(-opts.Grace))
		if err != nil {
			return nil, err
		}
		rep.Runs = v.runs
		rep.Future = len(v.future)
		for _, r := range v.future {
			log.Warn("run finished in the future (a node with a wrong clock?): kept, and left out of the policy",
				"run_id", r.RunID, "finished_at", r.FinishedAt, "tolerance", catalog.FutureTolerance.String())
		}
		rep.ClockBehind = len(v.behind)
		for _, r := range v.behind {
			log.Warn("run recorded by a node whose clock was behind: judged by when the catalog recorded it, "+
				"not by its finished_at", "run_id", r.RunID, "finished_at", r.FinishedAt, "created_at", r.CreatedAt,
				"tolerance", catalog.FutureTolerance.String())
		}
		rep.ArchivesMissing = len(v.missing)
		missing, found = missing[:0], v.found
		for _, r := range v.missing {
			missing = append(missing, r.RunID)
			log.Warn("a run's archive is not in the store: nothing can be restored from it; its row is kept and left out "+
				"of the policy (no bucket, no place of the floor). Bring the archive back (a snapshot of the volume, "+
				"the bucket's object versions), or, if it is lost for good, delete the row",
				"run_id", r.RunID, "archive", r.ArchiveRef, "finished_at", r.FinishedAt)
		}
		clear(remaining)
		clear(planned)
		for _, r := range v.runs {
			if key := keyOf(r.rec); key != "" {
				if r.Keep {
					remaining[key] = true
				} else {
					planned[key] = true
				}
			}
		}
		return v.remove, nil
	}
	var deleted []catalog.Record
	if opts.DryRun {
		recs, err := cat.List(ctx, opts.Server)
		if err != nil {
			return rep, err
		}
		if _, err := decide(recs); err != nil {
			return rep, err
		}
	} else {
		var err error
		if deleted, err = cat.PruneServer(ctx, opts.Server, decide); err != nil {
			return rep, err
		}
	}
	rep.RowsDeleted = len(deleted)
	if !opts.DryRun {
		// A report, not a step of the prune, as RecordPrune below.
		if err := cat.MarkMissing(ctx, opts.Server, missing, found, now); err != nil {
			log.Warn("recording which archives are missing failed: status and the exporter still count those runs",
				"error", err)
		}
	}

	// The listing, taken after the rows went, says which archives exist:
	// what is not listed is not removed (a backup re-running the run may
	// write it from now on) and is reported missing.
	if objs, err = listArchives(ctx, st, opts.Server); err != nil {
		return rep, err
	}
	listed = byKey(objs)
	if opts.DryRun {
		for key := range planned {
			if _, ok := listed[key]; !ok {
				rep.FilesMissing++
			}
		}
	}
	for _, r := range deleted {
		key := keyOf(r)
		o, ok := listed[key]
		if !ok {
			rep.FilesMissing++
			log.Info("the archive of a deleted row was already missing", "run_id", r.RunID, "archive", r.ArchiveRef)
			continue
		}
		removed, err := removeUnrecorded(ctx, cat, st, opts.Server, r.RunID, key)
		switch {
		case err != nil:
			// The row is gone: the file is an orphan the next prune removes.
			log.Warn("removing an archive whose row was deleted; the next prune retries", "archive", r.ArchiveRef, "error", err)
			rep.FailedRemoves = append(rep.FailedRemoves, r.ArchiveRef)
		case !removed:
			rep.RecordedAgain++
			log.Warn("a backup recorded the run again while it was pruned; its new archive stays", "run_id", r.RunID, "archive", r.ArchiveRef)
		default:
			rep.FilesRemoved++
			rep.BytesFreed += o.Size
			log.Info("removed archive", "run_id", r.RunID, "archive", r.ArchiveRef, "size_bytes", o.Size)
		}
	}

	// The orphans past the grace period against the archives that have a
	// row: a catalog that lost its rows (restored from an older dump,
	// emptied, or another database named) makes recorded runs look
	// orphaned, and they stay then (tooManyOrphans).
	var old, recorded int
	for _, o := range objs {
		_, ok := runOfKey(opts.Server, o.Key)
		switch {
		case !ok:
		case remaining[o.Key] || planned[o.Key]:
			recorded++
		case !o.ModTime.After(now.Add(-opts.Grace)):
			old++
		}
	}
	var errOrphans error
	holdOrphans := !opts.RemoveOrphans && !opts.DryRun && tooManyOrphans(old, recorded)
	if holdOrphans {
		errOrphans = fmt.Errorf("%w: %d of the server's archives in the store have no row in the catalog, more than the %d "+
			"that have one. A catalog restored from an older dump, emptied, or another database than the "+
			"backups' would make recorded runs look like this; check [database]. If the catalog is right, "+
			"remove them with archiver prune --server %s --remove-orphans (and the rules)", errOrphansKept, old, recorded, opts.Server)
		log.Error("orphan archives kept", "orphans", old, "recorded", recorded, "error", errOrphans)
	}
	for _, o := range objs {
		runID, ok := runOfKey(opts.Server, o.Key)
		if !ok || remaining[o.Key] || planned[o.Key] {
			continue
		}
		orphan := Orphan{Ref: st.Ref(o.Key), SizeBytes: o.Size, ModTime: o.ModTime}
		rep.OrphansFound++
		switch {
		case o.ModTime.After(now.Add(-opts.Grace)):
			orphan.Reason = fmt.Sprintf("written less than %s ago: a run may be recording it", opts.Grace)
		case opts.DryRun:
			orphan.Reason = "dry run"
		case holdOrphans:
			orphan.Reason = "more orphans than recorded archives: kept (--remove-orphans removes them)"
		default:
			removed, err := removeUnrecorded(ctx, cat, st, opts.Server, runID, o.Key)
			if err != nil {
				log.Warn("removing an orphan archive", "archive", orphan.Ref, "error", err)
				rep.FailedRemoves = append(rep.FailedRemoves, orphan.Ref)
				orphan.Reason = err.Error()
				break
			}
			if !removed {
				orphan.Reason = "recorded by a backup while pruned"
				break
			}
			orphan.Removed = true
			rep.FilesRemoved++
			rep.BytesFreed += o.Size
			log.Info("removed orphan archive", "archive", orphan.Ref, "size_bytes", o.Size)
		}
		rep.Orphans = append(rep.Orphans, orphan)
	}
	if !opts.DryRun {
		if err := collectPacks(ctx, cat, st, opts.Grace, log, &rep); err != nil {
			return rep, err
		}
	}
	switch err := collectOrphanPacks(ctx, cat, st, now.Add(-opts.Grace), opts.DryRun, opts.RemoveOrphans, log, &rep); {
	case errors.Is(err, errOrphansKept):
		errOrphans = errors.Join(errOrphans, err)
	case err != nil:
		return rep, err
	}
	log.Info("prune done", "dry_run", opts.DryRun, "runs", len(rep.Runs), "rows_deleted", rep.RowsDeleted,
		"files_removed", rep.FilesRemoved, "bytes_freed", rep.BytesFreed, "files_missing", rep.FilesMissing,
		"archives_missing", rep.ArchivesMissing, "recorded_again", rep.RecordedAgain, "orphans_found", rep.OrphansFound,
		"packs_removed", rep.PacksRemoved, "orphan_packs", rep.OrphanPacks)
	if rep.FilesMissing > 0 {
		log.Warn("archives of rows were already missing: nothing to remove for them", "files_missing", rep.FilesMissing)
	}
	if rep.ArchivesMissing > 0 {
		log.Warn("rows whose archives are not in the store were kept (see the warnings above)",
			"archives_missing", rep.ArchivesMissing)
	}
	if !opts.DryRun {
		// A report, not a step of the prune: it has pruned either way.
		if err := cat.RecordPrune(ctx, catalog.PruneRecord{Server: opts.Server, StartedAt: now, FinishedAt: opts.Now(),
			RunsDeleted: rep.RowsDeleted, BytesFreed: rep.BytesFreed}); err != nil {
			log.Warn("recording the prune in the catalog failed: the exporter will not count it", "error", err)
		}
	}
	if n := len(rep.FailedRemoves); n > 0 {
		return rep, errors.Join(errOrphans, fmt.Errorf("%d archive(s) could not be removed (their rows are gone; the next prune retries): %v", n, rep.FailedRemoves))
	}
	return rep, errOrphans
}

// errOrphansKept is the error of a prune that kept orphans because they
// outnumber the recorded objects (tooManyOrphans); it still did the rest.
var errOrphansKept = errors.New("orphans kept")

// MinOrphans is how many orphans (archives of one server, or packs) a
// prune removes whatever the recorded ones number: those of a few killed
// or failed runs of a store whose first runs failed.
const MinOrphans = 8

// tooManyOrphans reports whether orphans, the objects without a row past
// the grace period, are too many to remove beside the recorded ones: more
// than MinOrphans and than recorded. Killed and failed runs leave a few;
// a catalog that lost its rows (restored from an older dump, emptied, the
// wrong database) leaves most of the store looking orphaned, and removing
// them would lose every run it forgot.
func tooManyOrphans(orphans, recorded int) bool {
	return orphans > MinOrphans && orphans > recorded
}

// tempCleaner is a store that can remove the temp data of a key's
// unfinished writes (store.Local's temp files, store.S3's multipart
// uploads).
type tempCleaner interface {
	CleanTemps(ctx context.Context, key string) ([]string, error)
}

// collectPacks removes the chunked store's packs that no run references
// and none used for grace: condemned in the catalog first (a backup that
// would reuse one then fails instead of recording a run that needs it),
// then removed from the store, then forgotten. A pack left condemned by an
// interrupted prune is removed by the next.
//
// Only the packs st holds are taken, and those unused for PackHorizon in
// any store (catalog.CondemnPacks): a catalog shared with other stores
// holds their packs' rows too, and this grace does not cover their
// backups. st is asked only about the packs registered for it (or for no
// store), so a prune's requests do not grow with the other stores'.
func collectPacks(ctx context.Context, cat Catalog, st Store, grace time.Duration, log hclog.Logger, rep *Report) error {
	held := func(ctx context.Context, ids []string) ([]string, error) {
		var out []string
		for _, id := range ids {
			key, err := jobapi.PackKey(id)
			if err != nil {
				continue // not a pack's name: in no store
			}
			ok, err := st.Holds(ctx, key)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, id)
			}
		}
		return out, nil
	}
	ids, err := cat.CondemnPacks(ctx, grace, PackHorizon, store.PacksRef(st), held)
	if err != nil {
		return err
	}
	var gone []string
	for _, id := range ids {
		key, err := jobapi.PackKey(id)
		if err == nil {
			err = st.Remove(ctx, key)
		}
		if err != nil {
			log.Warn("removing a condemned pack; the next prune retries", "pack", id, "error", err)
			rep.FailedRemoves = append(rep.FailedRemoves, st.Ref(key))
			continue
		}
		if c, ok := st.(tempCleaner); ok {
			// A backup killed while writing the pack left its temp data.
			if rm, err := c.CleanTemps(ctx, key); err != nil {
				log.Warn("removing the temp data of a condemned pack", "pack", id, "error", err)
			} else if len(rm) > 0 {
				log.Info("removed the temp data of a condemned pack", "pack", id, "temps", rm)
			}
		}
		gone = append(gone, id)
		log.Info("removed pack", "pack", st.Ref(key))
	}
	if len(gone) == 0 {
		return nil
	}
	if err := cat.ForgetPacks(ctx, gone); err != nil {
		return err
	}
	rep.PacksRemoved += len(gone)
	return nil
}

// collectOrphanPacks removes the packs in the store that have no row in the
// catalog and were written before notAfter: those of a backup killed after
// a prune condemned and forgot the pack it was writing (its row), or kept
// after the catalog lost their rows. The pack folder is walked a page at a
// time, each page looked up in one query, so memory stays one page however
// large the store.
//
// It is safe against a backup that reuses a pack: a backup registers each
// pack (its row) before it writes it, so a pack this walk lists had its row
// before the lookup; not found, the row was forgotten by a prune, which
// condemned it first, and InsertChunked never records a run with a pack
// that is condemned or has no row. A pack with a row, condemned or not, is
// collectPacks' business. Keys below the pack folder that are not a pack's
// key are left alone.
func collectOrphanPacks(ctx context.Context, cat Catalog, st Store, notAfter time.Time, dryRun, force bool, log hclog.Logger, rep *Report) error {
	// First the counts (tooManyOrphans), then the removals.
	var orphans, recorded int
	err := walkPacks(ctx, cat, st, func(o store.Object, _ string, known bool) error {
		switch {
		case known:
			recorded++
		case o.ModTime.Before(notAfter):
			orphans++
		}
		return nil
	})
	if err != nil || orphans == 0 {
		return err
	}
	if !force && !dryRun && tooManyOrphans(orphans, recorded) {
		rep.OrphanPacks = orphans
		err := fmt.Errorf("%w: %d packs in the store have no row in the catalog, more than the %d that have one. "+
			"A catalog restored from an older dump, emptied, or another database than the backups' would make "+
			"recorded packs look like this; check [database]. If the catalog is right, remove them with "+
			"archiver prune --remove-orphans", errOrphansKept, orphans, recorded)
		log.Error("orphan packs kept", "orphan_packs", orphans, "recorded_packs", recorded, "error", err)
		return err
	}
	return walkPacks(ctx, cat, st, func(o store.Object, id string, known bool) error {
		if known || !o.ModTime.Before(notAfter) {
			return nil
		}
		rep.OrphanPacks++
		if dryRun {
			log.Info("orphan pack: no row in the catalog (dry run: kept)", "pack", st.Ref(o.Key), "size_bytes", o.Size)
			return nil
		}
		if err := st.Remove(ctx, o.Key); err != nil {
			log.Warn("removing an orphan pack; the next prune retries", "pack", st.Ref(o.Key), "error", err)
			rep.FailedRemoves = append(rep.FailedRemoves, st.Ref(o.Key))
			return nil
		}
		if c, ok := st.(tempCleaner); ok {
			if rm, err := c.CleanTemps(ctx, o.Key); err != nil {
				log.Warn("removing the temp data of an orphan pack", "pack", id, "error", err)
			} else if len(rm) > 0 {
				log.Info("removed the temp data of an orphan pack", "pack", id, "temps", rm)
			}
		}
		rep.PacksRemoved++
		rep.BytesFreed += o.Size
		log.Info("removed orphan pack: no row in the catalog", "pack", st.Ref(o.Key), "size_bytes", o.Size,
			"mod_time", o.ModTime)
		return nil
	})
}

// walkPacks calls fn for each pack in the store's pack folder, with its ID
// and whether the catalog has its row: a page of the walk at a time, each
// page looked up in one query, so memory stays one page however large the
// store. Keys below the pack folder that are not a pack's are passed over.
func walkPacks(ctx context.Context, cat Catalog, st Store, fn func(o store.Object, id string, known bool) error) error {
	return st.Walk(ctx, jobapi.PacksDir, func(page []store.Object) error {
		ids := make([]string, 0, len(page))
		for _, o := range page {
			if id, ok := jobapi.PackIDOfKey(o.Key); ok {
				ids = append(ids, id)
			}
		}
		if len(ids) == 0 {
			return nil
		}
		known, err := cat.KnownPacks(ctx, ids)
		if err != nil {
			return err
		}
		slices.Sort(known)
		for _, o := range page {
			id, ok := jobapi.PackIDOfKey(o.Key)
			if !ok {
				continue
			}
			_, isKnown := slices.BinarySearch(known, id)
			if err := fn(o, id, isKnown); err != nil {
				return err
			}
		}
		return nil
	})
}

// removeUnrecorded removes key, the archive of run runID of server, under
// the run's lock (jobapi.RunLockKey), the lock a backup holds from before
// it writes the archive until its row is in: a backup re-running the run
// either finishes first, and then its row is found and its archive stays
// (removed false), or starts after, and then writes its archive anew.
func removeUnrecorded(ctx context.Context, cat Catalog, st Store, server, runID, key string) (removed bool, err error) {
	unlock, err := st.Lock(ctx, jobapi.RunLockKey(server, runID))
	if err != nil {
		return false, fmt.Errorf("locking run %s: %w", runID, err)
	}
	defer unlock()
	rec, err := cat.Lookup(ctx, runID)
	switch {
	case err == nil && rec.ArchiveRef == st.Ref(key):
		return false, nil
	case err != nil && !errors.Is(err, catalog.ErrNotFound):
		return false, err
	}
	if err := st.Remove(ctx, key); err != nil {
		return false, err
	}
	return true, nil
}

// verdicts are what plan decides.
type verdicts struct {
	runs   []Run    // newest first
	remove []string // the run IDs to delete
	// Kept and left out of the policy, to be warned about: runs finished
	// in the future, and runs whose archive the store does not hold.
	future, missing []catalog.Record
	// Judged by their created_at, to be warned about (ClockBehind).
	behind []catalog.Record
	// The run IDs whose archives the store holds (judged by the policy).
	found []string
}

// plan decides on recs (one server's rows) for the prune of namespace
// (catalog.Record.In). holds reports whether the store holds an archive. A run finished after notBefore
// is kept whatever the policy says, and judged by it. A run's time is its
// catalog.Record.EndedAt: the created_at of a run recorded by a node whose
// clock was behind, which its finished_at would make look days older than
// it is (and the first prune would delete the newest state of the world).
// Some runs are kept and left out of the policy, so that they take neither
// a bucket nor a place of the floor from the runs that can be restored:
//   - another namespace's run (a server of the same name there, the catalog
//     shared), judged by that namespace's prune; its archive is not an
//     orphan, and is not looked for in the store (a folder store is the
//     namespace's own volume);
//   - a run whose archive is not in st (its ref is another store's: a
//     catalog shared by several stores), judged by that store's prune;
//   - a run finished in the future (catalog.FutureTolerance past now: a
//     node with a wrong clock), which would also push the real runs out of
//     keep-within;
//   - a run whose archive the store does not hold: lost by the store (a
//     lifecycle rule, a volume rolled back, a backup that removed its
//     archive after a commit whose answer was lost), or the wrong volume
//     is mounted. Deleting its row frees nothing, and with a wrong volume
//     it would lose the right volume's rows, so it stays.
func plan(recs []catalog.Record, namespace string, st Store, holds func(key string) (bool, error), p retention.Policy,
	now, notBefore time.Time) (verdicts, error) {
	var v verdicts
	byID := make(map[string]catalog.Record, len(recs))
	rr := make([]retention.Run, 0, len(recs))
	var ds []retention.Decision // the runs left out of the policy: kept
	unjudged := func(r catalog.Record, why string) {
		ds = append(ds, retention.Decision{Run: retention.Run{ID: r.RunID, FinishedAt: r.EndedAt()}, Keep: true,
			Reasons: []string{why}})
	}
	for _, r := range recs {
		byID[r.RunID] = r
		if !r.In(namespace) {
			unjudged(r, "recorded from namespace "+r.Namespace+": judged by that namespace's prune")
			continue
		}
		key := keyOf(r)
		if key == "" || st.Ref(key) != r.ArchiveRef {
			unjudged(r, "archive is not in this store: not judged here")
			continue
		}
		if r.InFuture(now) {
			v.future = append(v.future, r)
			unjudged(r, "finished in the future (a node with a wrong clock?): not judged")
			continue
		}
		held, err := holds(key)
		if err != nil {
			return verdicts{}, fmt.Errorf("run %s's archive: %w", r.RunID, err)
		}
		if !held {
			v.missing = append(v.missing, r)
			unjudged(r, "archive is missing from the store: not judged")
			continue
		}
		v.found = append(v.found, r.RunID)
		if r.ClockBehind() {
			v.behind = append(v.behind, r)
		}
		rr = append(rr, retention.Run{ID: r.RunID, FinishedAt: r.EndedAt()})
	}
	ds = append(ds, retention.Apply(rr, p)...)
	// Newest first, ties by ID, as retention.Apply orders its verdicts.
	slices.SortStableFunc(ds, func(a, b retention.Decision) int {
		if c := b.FinishedAt.Compare(a.FinishedAt); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	for _, d := range ds {
		r := byID[d.ID]
		if r.EndedAt().After(notBefore) && !r.InFuture(now) {
			d.Keep, d.Reasons = true, append(d.Reasons, "finished within the grace period")
		}
		v.runs = append(v.runs, Run{RunID: r.RunID, FinishedAt: r.FinishedAt, ArchiveRef: r.ArchiveRef,
			SizeBytes: r.SizeBytes, Keep: d.Keep, Reasons: d.Reasons, rec: r})
		if !d.Keep {
			v.remove = append(v.remove, r.RunID)
		}
	}
	return v, nil
}

// runOfKey returns the run ID of the archive of server that key names: a
// tar archive in the server's folder, or a chunked run's manifest. ok is
// false for any other key.
func runOfKey(server, key string) (runID string, ok bool) {
	if s, id, ok := jobapi.SplitManifestKey(key); ok {
		return id, s == server
	}
	if path.Dir(key) != server {
		return "", false
	}
	runID, _, ok = jobapi.ParseArchiveName(path.Base(key))
	return runID, ok
}

// keyOf returns the store key of r's archive, a chunked run's manifest
// ("" when the row's fields do not make one, which the catalog's
// constraints prevent).
func keyOf(r catalog.Record) string {
	if r.Format == jobapi.FormatChunked {
		key, err := jobapi.ManifestKey(r.Server, r.RunID)
		if err != nil {
			return ""
		}
		return key
	}
	key, err := jobapi.ArchiveName(r.Server, r.RunID, r.Compression)
	if err != nil {
		return ""
	}
	if strings.HasSuffix(r.ArchiveRef, jobapi.EncryptedExt) {
		key += jobapi.EncryptedExt // an encrypted tar run: its ref says so
	}
	return key
}

// byKey indexes objs by their keys.
func byKey(objs []store.Object) map[string]store.Object {
	m := make(map[string]store.Object, len(objs))
	for _, o := range objs {
		m[o.Key] = o
	}
	return m
}

// listArchives lists what st holds of server's runs: the tar archives in
// the folder <server>/ and the chunked runs' manifests
// (jobapi.ManifestDir), each sorted by key.
func listArchives(ctx context.Context, st Store, server string) ([]store.Object, error) {
	objs, err := st.List(ctx, server)
	if err != nil {
		return nil, err
	}
	dir, err := jobapi.ManifestDir(server)
	if err != nil {
		return nil, err
	}
	manifests, err := st.List(ctx, dir)
	if err != nil {
		return nil, err
	}
	return append(objs, manifests...), nil
}
