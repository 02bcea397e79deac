package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/worldbackup/worldbackup/archiver/catalog"
	"github.com/worldbackup/worldbackup/archiver/config"
	"github.com/worldbackup/worldbackup/archiver/prune"
	"github.com/worldbackup/worldbackup/archiver/retention"
	"github.com/worldbackup/worldbackup/archiver/store"
	"github.com/worldbackup/worldbackup/jobapi"
)

// pruneHelp is a format: %[1]s is catalog.FutureTolerance, %[2]d
// prune.MinOrphans.
const pruneHelp = `Usage: archiver prune --server S --min-keep K [--keep-last N] [--keep-hourly H]
         [--keep-daily D] [--keep-weekly W] [--keep-monthly M] [--keep-yearly Y]
         [--keep-within DURATION] [--grace DURATION] [--namespace NS] [--dry-run] [--remove-orphans] [--json]
         [--archive-root DIR | --store s3://bucket/prefix [--s3-* flags]] [flags]

Expires a server's old archives with restic's "forget" rules: a run kept by
any rule is kept (the buckets go by the row's finished_at, in UTC). Whatever
the rules say, the newest run, the --min-keep newest runs and every run
finished within --grace (set it to at least the longest backup deadline)
stay. The rules and the floor count only the runs whose archives this store
holds: a row of another store (a shared catalog) or whose archive is missing
from the store stays, left out of the rules (a warning names each missing
one); so does, with --namespace, a row recorded from another namespace (a
server of the same name there), whose archive is not an orphan either. The rows go first, in one transaction under a per-server lock, then
their archives, each under its run's lock (the lock a backup of the run
holds) and only when no row points at it again; archive files and chunked
manifests without a row that are older than --grace (left by a crash between
the two, or a failed run) are removed too, unless they outnumber the recorded
ones (more than %[2]d): a catalog restored from an older dump, emptied, or the
wrong database makes recorded runs look orphaned, so they are kept and the
prune fails saying so (--remove-orphans removes them). A run finished more than %[1]s in the future (a node with
a wrong clock) is kept and left out of the rules, with a warning; one recorded
by the catalog more than %[1]s after it finished (a node whose clock was
behind) is judged by when the catalog recorded it, with a warning.
--dry-run prints what would go and why each run stays, and changes nothing.
The archives are in the folder --archive-root, or in the S3 store --store
(settings: the --s3-* flags over [archive], as for backup), else in the
store of [archive].
`

// summaryOf returns the termination message of the prune that made rep.
func summaryOf(rep prune.Report, err error) jobapi.PruneResult {
	s := jobapi.PruneResult{Status: jobapi.StatusDone, Server: rep.Server, DryRun: rep.DryRun, RowsDeleted: rep.RowsDeleted,
		FilesRemoved: rep.FilesRemoved, BytesFreed: rep.BytesFreed, FilesMissing: rep.FilesMissing,
		ArchivesMissing: rep.ArchivesMissing}
	if err != nil {
		s.Status, s.Error = jobapi.StatusFailed, err.Error()
	}
	return s
}

// retentionOptions checks the retention flags r (jobapi.Retention, of
// prune and backup) and returns the prune options for server as namespace's
// Jobs see it.
func retentionOptions(fs *flag.FlagSet, r jobapi.Retention, server, namespace string) (prune.Options, error) {
	opts := prune.Options{Server: server, Namespace: namespace, Policy: retention.Policy{
		Last: r.KeepLast, Hourly: r.KeepHourly, Daily: r.KeepDaily, Weekly: r.KeepWeekly,
		Monthly: r.KeepMonthly, Yearly: r.KeepYearly, MinKeep: r.MinKeep,
	}}
	var errs []error
	if !flagSet(fs, jobapi.FlagMinKeep) {
		errs = append(errs, fmt.Errorf("%s is required: the number of archives never removed (e.g. %s 3)", jobapi.Flag(jobapi.FlagMinKeep), jobapi.Flag(jobapi.FlagMinKeep)))
	}
	if r.KeepWithin != "" {
		d, err := jobapi.ParseDuration(r.KeepWithin)
		if err != nil {
			errs = append(errs, flagErrorf(jobapi.FlagKeepWithin, ": %w", err))
		}
		opts.Policy.Within = d
	}
	g, err := jobapi.ParseDuration(r.Grace)
	switch {
	case err != nil:
		errs = append(errs, flagErrorf(jobapi.FlagGrace, ": %w", err))
	case g <= 0:
		errs = append(errs, flagErrorf(jobapi.FlagGrace, "must be positive: at least the longest backup deadline, so a run that is still writing keeps its archive"))
	}
	opts.Grace = g
	if len(errs) == 0 {
		if err := opts.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return opts, errors.Join(errs...)
}

// pruneFlags are the flags of prune: the contract's request (what the prune
// Job passes) and the local flags of a run by hand.
type pruneFlags struct {
	jobapi.Prune
	asJSON         bool
	terminationLog string
	removeOrphans  bool
}

// pruneLocalFlags are the flags of prune that are not the Job's.
func pruneLocalFlags() []string { return []string{"json", "termination-log", "remove-orphans"} }

// newPruneFlags returns the flag set of prune and the flags it fills.
func newPruneFlags(stderr io.Writer) (*flag.FlagSet, *pruneFlags) {
	f := &pruneFlags{}
	fs := newFlagSet(jobapi.KindPrune, fmt.Sprintf(pruneHelp, catalog.FutureTolerance, prune.MinOrphans), stderr)
	f.Bind(fs)
	fs.BoolVar(&f.asJSON, "json", false, "print the report as JSON")
	fs.StringVar(&f.terminationLog, "termination-log", defaultTerminationLog, "file for the one-line JSON summary")
	fs.BoolVar(&f.removeOrphans, "remove-orphans", false, "remove the archives and packs without a row also when they outnumber the recorded ones (by hand, once the catalog is known to be right)")
	return fs, f
}

func cmdPrune(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, f := newPruneFlags(stderr)
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return code
	}
	f.Parsed(fs)
	server, dryRun := f.Server, f.DryRun
	tlog := terminationLog{path: f.terminationLog, explicit: flagSet(fs, "termination-log")}
	log := newLogger(f.LogFormat, stderr)
	fail := func(code int, err error) int {
		ps := jobapi.PruneResult{Status: jobapi.StatusFailed, Server: server, DryRun: dryRun, Error: err.Error()}
		tlog.writeBounded(log, &ps, &ps.Error)
		return code
	}

	opts, err := retentionOptions(fs, f.Retention, server, f.Namespace)
	opts.DryRun, opts.RemoveOrphans = dryRun, f.removeOrphans
	if server == "" {
		err = errors.Join(flagErrorf(jobapi.FlagServer, "is required"), err)
	}
	var cfg config.Config
	var spec storeSpec
	if err == nil {
		cfg, spec, err = loadArchiveConfig(fs, f.Config, f.ArchiveRoot, f.Store, f.S3)
	}
	if err == nil {
		warnOverrides(log, fs, cfg)
	}
	if err != nil {
		fmt.Fprintf(stderr, "archiver prune: %s\n", err)
		return fail(exitUsage, err)
	}
	db, err := catalog.Open(ctx, cfg.Database.URL, log)
	if err != nil {
		log.Error("cannot open the catalog", "error", err)
		return fail(exitFailed, err)
	}
	defer db.Close()
	// The catalog is the run lock of an S3 store: prune takes it before
	// removing a run's archive, as backup does before writing one.
	st, err := spec.open(db)
	if err != nil {
		return fail(exitUsage, err)
	}
	rep, err := prune.Prune(ctx, db, st, opts, log)
	if err != nil {
		log.Error("prune failed", "server", opts.Server, "error", err)
	}
	if perr := printPruneReport(stdout, rep, f.asJSON); perr != nil && err == nil {
		err = fmt.Errorf("writing the report: %w", perr)
	}
	ps := summaryOf(rep, err)
	if ps.Server == "" {
		ps.Server, ps.DryRun = server, dryRun
	}
	tlog.writeBounded(log, &ps, &ps.Error)
	if errors.Is(err, store.ErrNoRoot) || errors.Is(err, store.ErrDenied) {
		return exitUsage // as for backup: no retry can help
	}
	if err != nil {
		return exitFailed
	}
	return exitOK
}

// loadArchiveConfig loads felis.toml and returns it with the archive store:
// the folder archiveRoot when given, else the S3 store storeURL (--store)
// with the --s3-* flags s3 over [archive], else [archive] store or
// local_path. Its errors are usage errors.
func loadArchiveConfig(fs *flag.FlagSet, configPath, archiveRoot, storeURL string, s3 jobapi.S3) (config.Config, storeSpec, error) {
	cfg, err := config.Load(configPath)
	if err == nil {
		cfg, err = storeOverrides(fs, storeURL, s3, cfg)
	}
	if err != nil {
		return config.Config{}, storeSpec{}, err
	}
	spec, err := archiveStoreSpec(cfg, archiveRoot)
	if err != nil || spec.S3 != nil {
		return cfg, spec, err
	}
	switch {
	case spec.Root == "":
		return config.Config{}, storeSpec{}, fmt.Errorf("no archive root: pass %s or set [archive] local_path (or store) in %s", jobapi.Flag(jobapi.FlagArchiveRoot), cfg.Path())
	case !filepath.IsAbs(spec.Root):
		return config.Config{}, storeSpec{}, fmt.Errorf("archive root %q is not an absolute path", spec.Root)
	}
	return cfg, storeSpec{Root: filepath.Clean(spec.Root)}, nil
}

// printPruneReport prints rep as JSON or as a table of the runs and the
// orphans, then the totals.
func printPruneReport(w io.Writer, rep prune.Report, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(rep)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN ID\tFINISHED\tSIZE\tVERDICT\tWHY")
	for _, r := range rep.Runs {
		verdict := "remove"
		if r.Keep {
			verdict = "keep"
		} else if !rep.DryRun {
			verdict = "removed"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", r.RunID, r.FinishedAt.UTC().Format(time.RFC3339), r.SizeBytes, verdict, strings.Join(r.Reasons, ", "))
	}
	for _, o := range rep.Orphans {
		verdict := "orphan kept"
		if o.Removed {
			verdict = "orphan removed"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", filepath.Base(o.Ref), o.ModTime.UTC().Format(time.RFC3339), o.SizeBytes, verdict, o.Reason)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	what := "removed"
	if rep.DryRun {
		what = "would remove (dry run)"
		n := 0
		for _, r := range rep.Runs {
			if !r.Keep {
				n++
			}
		}
		_, err := fmt.Fprintf(w, "%s %d of %d runs (%d of their archives already missing)%s%s\n", what, n, len(rep.Runs), rep.FilesMissing,
			archivesMissingNote(rep), orphanPacksNote(rep))
		return err
	}
	packs := ""
	if rep.PacksRemoved > 0 {
		packs = fmt.Sprintf("; %d chunked packs removed", rep.PacksRemoved)
	}
	_, err := fmt.Fprintf(w, "%s %d runs and %d files, %d bytes freed; %d archives were already missing%s%s%s\n",
		what, rep.RowsDeleted, rep.FilesRemoved, rep.BytesFreed, rep.FilesMissing, archivesMissingNote(rep), packs, orphanPacksNote(rep))
	return err
}

// archivesMissingNote says how many rows the prune kept because the store
// does not hold their archives.
func archivesMissingNote(rep prune.Report) string {
	if rep.ArchivesMissing == 0 {
		return ""
	}
	return fmt.Sprintf("; %d runs kept whose archives are not in the store (nothing to restore: see the log)", rep.ArchivesMissing)
}

// orphanPacksNote says how many packs without a row the prune found.
func orphanPacksNote(rep prune.Report) string {
	if rep.OrphanPacks == 0 {
		return ""
	}
	return fmt.Sprintf("; %d orphan packs (no row in the catalog, past the grace period)", rep.OrphanPacks)
}
