// Package backup performs one backup run: it streams the world into the
// archive store and records the archive in the catalog, so that there is
// never an archive without a row nor a row without an archive.
//
// A run is idempotent by run ID. Its order:
//
//  1. look up the run ID in the catalog: a row means the run is done, and
//     nothing is written;
//  2. lock the run, <server>/<run id>, in the store (a retry of the same
//     run waits for the attempt in progress, then finds its row, whatever
//     compression either asked for);
//  3. remove the temp files of killed earlier attempts;
//  4. stream world → tar → compression → SHA-256 into a temp file, then
//     fsync, rename to <server>/<run id>.tar.zst (jobapi) and
//     fsync the folder; a world without files is refused (it would restore
//     as an empty world) unless AllowEmpty;
//  5. insert the row (ON CONFLICT DO NOTHING); if that fails, remove the
//     archive, unless the COMMIT was sent and its answer lost: then look
//     the run up again once that COMMIT has ended: its row there, the run
//     is recorded; no row, remove the archive; no answer, keep it for a
//     prune to judge.
package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/worldbackup/worldbackup/archiver/catalog"
	"github.com/worldbackup/worldbackup/archiver/crashguard"
	"github.com/worldbackup/worldbackup/archiver/crypt"
	"github.com/worldbackup/worldbackup/archiver/store"
	"github.com/worldbackup/worldbackup/archiver/tarstream"
	"github.com/worldbackup/worldbackup/jobapi"
)

// Store is the archive store a run writes to (store.Local, store.Mem).
type Store interface {
	// Ref returns the archive reference recorded in the catalog.
	Ref(key string) string
	// Lock takes an exclusive lock on key, waiting for the current holder.
	Lock(ctx context.Context, key string) (unlock func(), err error)
	// CleanTemps removes temp data left by earlier attempts to write key.
	CleanTemps(ctx context.Context, key string) (removed []string, err error)
	// Put atomically stores what write writes under key, or nothing.
	Put(ctx context.Context, key string, write func(io.Writer) error) (size int64, err error)
	// Remove deletes key's archive; a missing one is not an error.
	Remove(ctx context.Context, key string) error
	// Open reads key's object (a chunked run reads its previous run).
	Open(ctx context.Context, key string) (io.ReadCloser, error)
	// Holds reports whether key's object is in the store (a chunked run
	// checks that its previous run's packs still are).
	Holds(ctx context.Context, key string) (bool, error)
}

// Catalog records runs (catalog.DB).
type Catalog interface {
	// Lookup returns the run's row or an error wrapping catalog.ErrNotFound.
	Lookup(ctx context.Context, runID string) (catalog.Record, error)
	// LookupSettled is Lookup once no insert is under way: a missing row
	// is not one whose COMMIT is still being applied.
	LookupSettled(ctx context.Context, runID string) (catalog.Record, error)
	// Insert records a run; false when the run ID already had a row.
	Insert(ctx context.Context, r catalog.Record) (inserted bool, err error)
	// LatestChunked returns the server's newest chunked run that namespace
	// sees (catalog.InNamespace) for which in is true, or an error wrapping
	// catalog.ErrNotFound.
	LatestChunked(ctx context.Context, server, namespace string, in func(catalog.Record) bool) (catalog.Record, error)
	// NewestRuns returns the server's runs that namespace sees, newest
	// first, at most limit.
	NewestRuns(ctx context.Context, server, namespace string, limit int) ([]catalog.Record, error)
	// RegisterPack records a pack before a chunked run writes it.
	RegisterPack(ctx context.Context, id, storeRef string) error
	// InsertChunked records a chunked run and the packs it references,
	// or fails wrapping catalog.ErrPackCondemned.
	InsertChunked(ctx context.Context, r catalog.Record, packs []string) (inserted bool, err error)
}

// Serialized returns q with lock taken before the server is quiesced and
// released after it is resumed (or when quiescing fails, or finds the
// server stopped): two runs of one server must not quiesce it at once
// (catalog.DB.LockServer). A process that dies loses the lock with its
// connection.
func Serialized(q Quiescer, lock func(ctx context.Context) (unlock func(), err error)) Quiescer {
	return serialized{q, lock}
}

type serialized struct {
	q    Quiescer
	lock func(ctx context.Context) (unlock func(), err error)
}

func (s serialized) Quiesce(ctx context.Context, log hclog.Logger) (func(context.Context) error, error) {
	log.Debug("taking the server's quiesce lock (another run of the server may be reading its world)")
	unlock, err := s.lock(ctx)
	if err != nil {
		return nil, fmt.Errorf("waiting for another run of the server to resume it: %w", err)
	}
	resume, err := s.q.Quiesce(ctx, log)
	if err != nil || resume == nil {
		unlock()
		return nil, err
	}
	return func(ctx context.Context) error {
		defer unlock()
		return resume(ctx)
	}, nil
}

// Quiescer makes the game server stop writing the world while it is read
// (RCON save-off and save-all flush). Quiesce returns the function that
// turns writing back on, which the run calls on every exit path once, or nil
// when there is nothing to resume (a server that is stopped).
type Quiescer interface {
	Quiesce(ctx context.Context, log hclog.Logger) (resume func(context.Context) error, err error)
}

// Turn is the door of a concurrency cap (catalog.Slots): Wait returns once
// the run may start, with the function that ends its turn.
type Turn interface {
	Wait(ctx context.Context) (release func(), err error)
}

// Params describe one run.
type Params struct {
	Server      string // DNS-1123 label
	RunID       string // the idempotency key; becomes the archive's file name
	FormerOwner string // optional, recorded as is ("" = none)
	// Namespace is the Kubernetes namespace of the Job, recorded in the
	// row; the server's runs the run builds on are that namespace's and
	// those recorded without one, and a run ID another namespace recorded
	// for a server of the same name is refused (catalog.InNamespace). ""
	// (a run by hand): every namespace's.
	Namespace   string
	World       string // the world folder
	Compression tarstream.Compression
	Excludes    []string
	// Avoid are folders never archived, found by device and inode (see
	// tarstream.Options.Avoid): the archive root.
	Avoid []string
	// AllowEmpty records a world without files; by default such a run fails.
	AllowEmpty bool
	// ProgressInterval is the time between progress log lines; default 5s.
	ProgressInterval time.Duration
	// Format is jobapi.FormatTar (the default) or jobapi.FormatChunked.
	Format string
	// FullRead has a chunked run read every file, even those its
	// server's previous chunked run holds unchanged.
	FullRead bool
	// FullReadEvery > 0 makes every Nth chunked run of the server a full
	// read.
	FullReadEvery int
	// Keys, when set, encrypt the run (package crypt): a tar archive with
	// age to the key file's identity, <run id>.tar.zst.age; a chunked run's
	// blobs and manifest with the server's data key, which Keys wrap.
	Keys *crypt.Keys
}

// DefaultProgressInterval is the default time between progress log lines.
const DefaultProgressInterval = 5 * time.Second

func (p Params) withDefaults() Params {
	if p.Compression == "" {
		p.Compression = tarstream.Zstd
	}
	if p.ProgressInterval <= 0 {
		p.ProgressInterval = DefaultProgressInterval
	}
	if p.Format == "" {
		p.Format = jobapi.DefaultFormat
	}
	return p
}

// Validate checks the parameters.
func (p Params) Validate() error {
	var errs []error
	if err := jobapi.CheckServer(p.Server); err != nil {
		errs = append(errs, err)
	}
	if err := jobapi.CheckRunID(p.RunID); err != nil {
		errs = append(errs, err)
	}
	if err := jobapi.CheckFormerOwner(p.FormerOwner); err != nil {
		errs = append(errs, err)
	}
	if err := jobapi.CheckNamespace(p.Namespace); err != nil {
		errs = append(errs, err)
	}
	if p.World == "" {
		errs = append(errs, errors.New("world folder: missing"))
	}
	if _, err := tarstream.ParseCompression(string(p.Compression)); err != nil {
		errs = append(errs, fmt.Errorf("compression: %w", err))
	}
	if err := tarstream.ValidateExcludes(p.Excludes); err != nil {
		errs = append(errs, err)
	}
	if p.Format != "" {
		if err := jobapi.CheckFormat(p.Format); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Status is the outcome of a run.
type Status = jobapi.Status

// The outcomes of a run.
const (
	StatusDone            = jobapi.StatusDone            // archived and recorded now
	StatusAlreadyRecorded = jobapi.StatusAlreadyRecorded // the run ID had a row: nothing written
	StatusFailed          = jobapi.StatusFailed
)

// Summary describes a run; it is written as one JSON line to the
// termination-message path (inside jobapi.BackupResult).
type Summary = jobapi.BackupRun

// Runner performs runs against one store and one catalog.
type Runner struct {
	store   Store
	cat     Catalog
	quiesce Quiescer // nil: the world is read as it is
	turn    Turn     // nil: the run starts at once
	log     hclog.Logger
	now     func() time.Time
}

// New returns a Runner.
func New(store Store, cat Catalog, log hclog.Logger) *Runner {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Runner{store: store, cat: cat, log: log.Named("backup"), now: time.Now}
}

// WithQuiescer has each run quiesce the game server through q from before
// the world is read until the archive is written, before the row is
// inserted.
func (r *Runner) WithQuiescer(q Quiescer) *Runner {
	r.quiesce = q
	return r
}

// WithTurn has each run wait for its turn through t before anything else
// (before it looks at the catalog, takes the run's lock or quiesces the
// server), and end it when the run ends. The wait is not part of the run's
// duration.
func (r *Runner) WithTurn(t Turn) *Runner {
	r.turn = t
	return r
}

// cleanupTimeout bounds the removal of an archive whose row could not be
// inserted, which runs even when the run's context was canceled.
const cleanupTimeout = 30 * time.Second

// Run performs the run p. The Summary is filled in also on error, with
// StatusFailed and the error text.
func (r *Runner) Run(ctx context.Context, p Params) (Summary, error) {
	p = p.withDefaults()
	s := Summary{Server: p.Server, RunID: p.RunID, Compression: string(p.Compression)}
	release, err := r.waitTurn(ctx, p)
	defer release()
	start := r.now()
	if err == nil {
		err = r.run(ctx, p, &s)
	}
	s.DurationSeconds = r.now().Sub(start).Seconds()
	if err != nil {
		s.Status = StatusFailed
		s.Error = err.Error()
	}
	return s, err
}

// waitTurn waits for the run's turn when the runner has a Turn; release
// ends it (a no-op without one, or when the wait failed).
func (r *Runner) waitTurn(ctx context.Context, p Params) (release func(), err error) {
	if r.turn == nil {
		return func() {}, nil
	}
	log := r.log.With("server", p.Server, "run_id", p.RunID)
	log.Info("waiting for the run's turn")
	start := r.now()
	release, err = r.turn.Wait(ctx)
	if err != nil {
		return func() {}, err
	}
	log.Info("the run's turn has come", "waited_seconds", r.now().Sub(start).Seconds())
	return release, nil
}

func (r *Runner) run(ctx context.Context, p Params, s *Summary) (err error) {
	if err := p.Validate(); err != nil {
		return err
	}
	log := r.log.With("server", p.Server, "run_id", p.RunID)

	if done, err := r.recorded(ctx, log, p, s); done || err != nil {
		return err
	}

	// The run's key, whose store Ref is its row's archive_ref: the one rule
	// the components predict their archiveRef output by.
	key, err := jobapi.SealedRunKey(p.Server, p.RunID, p.Format, string(p.Compression), p.Keys != nil)
	if err != nil {
		return err
	}
	// The lock is the run's, not the archive's: two attempts of one run
	// with different compressions must not both write.
	runKey := jobapi.RunLockKey(p.Server, p.RunID)
	log.Debug("locking the run", "key", runKey)
	unlock, err := r.store.Lock(ctx, runKey)
	if err != nil {
		return fmt.Errorf("locking the run: %w", err)
	}
	defer unlock()
	// An attempt that held the lock may have finished the run meanwhile.
	if done, err := r.recorded(ctx, log, p, s); done || err != nil {
		return err
	}
	// Earlier attempts may have used another compression, or the chunked
	// format's manifest.
	var keys, removed []string
	for _, c := range tarstream.Compressions {
		k, err := jobapi.ArchiveName(p.Server, p.RunID, string(c))
		if err != nil {
			return err
		}
		keys = append(keys, k, k+jobapi.EncryptedExt)
	}
	if p.Format == jobapi.FormatChunked {
		keys = append(keys, key) // the manifest's
	}
	for _, k := range keys {
		rm, err := r.store.CleanTemps(ctx, k)
		removed = append(removed, rm...)
		if err != nil {
			return fmt.Errorf("removing temp files of earlier attempts: %w", err)
		}
	}
	if len(removed) > 0 {
		log.Info("removed temp files of an earlier attempt", "paths", removed)
	}

	if err := r.checkClear(ctx, log, p); err != nil {
		return err
	}

	// From here on the server may have autosave off: resume it on every
	// exit path (an error, a canceled context, a panic), once.
	resume, err := r.startQuiesce(ctx, log)
	if err != nil {
		return err
	}
	if resume != nil {
		// A panic on a goroutine of the pipeline ends the process without
		// running this function's defers.
		quiesced := resume
		unguard := crashguard.OnPanic(func() {
			if err := quiesced(context.WithoutCancel(ctx)); err != nil {
				log.Error("a goroutine panicked, and turning autosave back on failed", "error", err)
				return
			}
			log.Warn("a goroutine panicked: autosave is back on")
		})
		defer unguard()
	}
	defer func() {
		if resume == nil {
			return
		}
		if rerr := resume(ctx); rerr != nil {
			// First: a shortened termination message keeps the autosave-OFF part.
			err = errors.Join(fmt.Errorf("turning autosave back on: %w", rerr), err)
		}
	}()

	started := r.now()
	prog := new(tarstream.Progress)
	stop := r.progress(log, prog, started, p.ProgressInterval)
	var w written
	if p.Format == jobapi.FormatChunked {
		w, err = r.writeChunked(ctx, log, p, key, prog)
	} else {
		w, err = r.writeTar(ctx, log, p, key, prog)
	}
	stop()
	if err != nil {
		return err
	}
	ref, res := w.ref, w.res
	finished := r.now()
	// The archive is complete: let the server save again before the row
	// is inserted. A server left with autosave off fails the run.
	if resume != nil {
		rerr := resume(ctx)
		resume = nil
		if rerr != nil {
			return r.discard(ctx, log, w, fmt.Errorf("turning autosave back on: %w", rerr))
		}
	}

	rec := catalog.Record{
		RunID:       p.RunID,
		Server:      p.Server,
		ArchiveRef:  ref,
		SizeBytes:   res.Size,
		SHA256:      res.SHA256,
		Compression: string(p.Compression),
		FileCount:   res.Files,
		StartedAt:   started,
		FinishedAt:  finished,
		Format:      p.Format,
		AddedBytes:  &w.added,
		Namespace:   p.Namespace,
	}
	if p.FormerOwner != "" {
		rec.FormerOwner = &p.FormerOwner
	}
	var inserted bool
	if p.Format == jobapi.FormatChunked {
		inserted, err = r.cat.InsertChunked(ctx, rec, w.packs)
	} else {
		inserted, err = r.cat.Insert(ctx, rec)
	}
	var other *catalog.Record // the run's row, when another attempt's
	switch {
	case errors.Is(err, catalog.ErrCommitUnknown):
		if inserted, other, err = r.afterLostCommit(ctx, log, p, w, err); err != nil {
			return err
		}
	case isArchiveLockLost(err):
		// Another attempt may hold the run's lock now and have written
		// and recorded this key: the archive is not this one's to remove.
		return fmt.Errorf("recording the run in the catalog: %w; the archive %s was kept (another attempt "+
			"may own it now); a retry records the run", err, ref)
	case err != nil:
		return r.discard(ctx, log, w, fmt.Errorf("recording the run in the catalog: %w", err))
	}
	if !inserted {
		// Only an attempt that did not share our lock (another server, or
		// another store on the same catalog) can get here.
		if other == nil {
			if rec, err := r.cat.Lookup(ctx, p.RunID); err == nil {
				other = &rec
			}
		}
		if other != nil && notOurs(p, *other) {
			return r.discard(ctx, log, w, runIDTaken(p, *other))
		}
		return fmt.Errorf("run %q was recorded by another attempt while this one ran; "+
			"this attempt's archive %s was kept, but may not match the row: check it with `archiver verify --run-id %s`",
			p.RunID, ref, p.RunID)
	}

	d := finished.Sub(started)
	*s = Summary{
		Status:          StatusDone,
		Server:          p.Server,
		RunID:           p.RunID,
		ArchiveRef:      ref,
		SizeBytes:       res.Size,
		SHA256:          res.SHA256,
		Compression:     string(p.Compression),
		Format:          p.Format,
		AddedBytes:      w.added,
		FileCount:       res.Files,
		InputBytes:      res.InputBytes,
		Warnings:        res.Warnings,
		DurationSeconds: d.Seconds(),
		MBPerSecond:     mbps(res.InputBytes, d),
	}
	log.Info("backup done", "archive", ref, "files", res.Files, "dirs", res.Dirs,
		"bytes", res.InputBytes, "size", res.Size, "sha256", res.SHA256,
		"excluded", res.Excluded, "skipped", res.Skipped, "warnings", res.Warnings,
		"duration", d.Round(time.Millisecond).String(), "mb_per_s", s.MBPerSecond)
	return nil
}

// isArchiveLockLost says that err is a lost archive lock's (the S3 store's
// run lock, in the catalog): another attempt may own the run's key now.
func isArchiveLockLost(err error) bool {
	lost, ok := errors.AsType[*catalog.LockLostError](err)
	return ok && lost.Archive()
}

// ErrRunIDTaken is wrapped by the error of a run whose run ID is recorded
// for another server (notOurs): run IDs are unique across servers, so no
// retry can record it.
var ErrRunIDTaken = errors.New("run IDs are unique across servers")

// notOurs reports whether rec, the row of p's run ID, is another server's:
// another name, or the same name recorded from another namespace (two
// servers of one name in two namespaces that share a catalog). A row or a
// run without a namespace (recorded before migration 0009, or run by hand)
// is the server's whatever namespace the other names.
func notOurs(p Params, rec catalog.Record) bool {
	return rec.Server != p.Server || !rec.In(p.Namespace)
}

// runIDTaken is the error of run p, whose run ID rec records for another
// server (notOurs).
func runIDTaken(p Params, rec catalog.Record) error {
	if rec.Server == p.Server {
		return fmt.Errorf("run ID %q is already recorded for server %q of namespace %q, not of namespace %q (%w): "+
			"choose another run ID (a schedule's run ID is its Job's name: give the two schedules different minutes); "+
			"the two namespaces share a catalog, where their servers of one name share the run IDs, so give one of "+
			"them another name, or its namespace a catalog of its own",
			p.RunID, rec.Server, rec.Namespace, p.Namespace, ErrRunIDTaken)
	}
	return fmt.Errorf("run ID %q is already recorded for server %q, not %q (%w): choose another run ID",
		p.RunID, rec.Server, p.Server, ErrRunIDTaken)
}

// ErrEmptyWorld is wrapped by the error of a run whose world has no files
// (empty, or everything excluded) and that did not allow it.
var ErrEmptyWorld = errors.New("refusing an empty backup")

func excludedNote(excluded int64) string {
	if excluded == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d entries excluded)", excluded)
}

// startQuiesce quiesces the game server when the runner has a Quiescer.
func (r *Runner) startQuiesce(ctx context.Context, log hclog.Logger) (func(context.Context) error, error) {
	if r.quiesce == nil {
		return nil, nil
	}
	resume, err := r.quiesce.Quiesce(ctx, log)
	if err != nil {
		return nil, fmt.Errorf("quiescing the game server: %w", err)
	}
	return resume, nil
}

// recorded looks the run up; when it has a row it fills s and returns true.
func (r *Runner) recorded(ctx context.Context, log hclog.Logger, p Params, s *Summary) (bool, error) {
	rec, err := r.cat.Lookup(ctx, p.RunID)
	if errors.Is(err, catalog.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("looking up the run in the catalog: %w", err)
	}
	if notOurs(p, rec) {
		return false, runIDTaken(p, rec)
	}
	log.Info("run already recorded; nothing to do", "archive", rec.ArchiveRef, "finished_at", rec.FinishedAt)
	*s = Summary{
		Status:      StatusAlreadyRecorded,
		Server:      rec.Server,
		RunID:       rec.RunID,
		ArchiveRef:  rec.ArchiveRef,
		SizeBytes:   rec.SizeBytes,
		SHA256:      rec.SHA256,
		Compression: rec.Compression,
		FileCount:   rec.FileCount,
	}
	return true, nil
}

// lookupAgainTimeout bounds the lookup of a run whose insert failed, which
// runs even when the run's context was canceled (SIGTERM).
const lookupAgainTimeout = 30 * time.Second

// afterLostCommit decides what becomes of what the run wrote when the
// insert of its row failed with cause, after its COMMIT was sent
// (catalog.ErrCommitUnknown): it may have been applied and its answer lost
// (a dropped connection, the call's deadline, SIGTERM), so the run is
// looked up again, once that COMMIT has ended on the server
// (catalog.DB.LookupSettled), before anything a row may point at is
// removed:
//   - its row, with this archive and checksum: the run is recorded (inserted);
//   - no row: what it wrote is discarded, and the error says so;
//   - the lookup fails: what it wrote is kept, and the error says so: a
//     prune removes it, under the run's lock, if no row points at it (the
//     manifest or archive as an orphan past the grace period, the new packs
//     as packs no run references);
//   - another row (another attempt's): other, for the caller to judge.
func (r *Runner) afterLostCommit(ctx context.Context, log hclog.Logger, p Params, w written, cause error) (inserted bool, other *catalog.Record, err error) {
	cause = fmt.Errorf("recording the run in the catalog: %w", cause)
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lookupAgainTimeout)
	rec, lerr := r.cat.LookupSettled(lctx, p.RunID)
	cancel()
	switch {
	case errors.Is(lerr, catalog.ErrNotFound):
		return false, nil, r.discard(ctx, log, w, cause)
	case lerr != nil:
		kept := w.ref
		if n := len(w.newPacks); n > 0 {
			kept += fmt.Sprintf(" and its %d new packs", n)
		}
		log.Error("the insert failed and the catalog does not say whether the run's row exists: "+
			"kept what the run wrote; a prune removes it if no row points at it",
			"archive", w.ref, "new_packs", len(w.newPacks), "packs", store.PacksRef(r.store),
			"insert_error", cause, "lookup_error", lerr)
		return false, nil, fmt.Errorf("%w; looking the run up again: %w (kept %s: the row may exist; "+
			"a retry of the run finds it, a prune removes what no row points at)", cause, lerr, kept)
	case rec.ArchiveRef == w.ref && rec.SHA256 == w.res.SHA256:
		log.Warn("the catalog's answer to the insert was lost, but the run's row is there", "error", cause)
		return true, nil, nil
	default:
		return false, &rec, nil
	}
}

// discard removes what the run wrote after cause made it unrecordable, and
// returns cause (joined with the removal's error, if any).
func (r *Runner) discard(ctx context.Context, log hclog.Logger, w written, cause error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := w.remove(ctx); err != nil {
		log.Error("could not remove the unrecorded archive", "archive", w.ref, "error", err)
		return errors.Join(cause, fmt.Errorf("removing the unrecorded archive: %w", err))
	}
	log.Info("removed the unrecorded archive", "archive", w.ref)
	return fmt.Errorf("%w (archive removed)", cause)
}

// progress logs prog every interval until the returned stop is called.
func (r *Runner) progress(log hclog.Logger, prog *tarstream.Progress, started time.Time, interval time.Duration) (stop func()) {
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer crashguard.Recover()
		defer close(exited)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				in := prog.InputBytes.Load()
				log.Info("progress", "files", prog.Files.Load(), "bytes", in,
					"written", prog.OutputBytes.Load(), "mb_per_s", mbps(in, r.now().Sub(started)))
			}
		}
	}()
	return func() {
		close(done)
		<-exited
	}
}

// mbps returns the rate of n bytes in d in MB/s (10^6 bytes), to 0.1.
func mbps(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(int64(float64(n)/d.Seconds()/1e5)) / 10
}
