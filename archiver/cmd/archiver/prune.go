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
)

const pruneHelp = `Usage: archiver prune --server S --min-keep K [--keep-last N] [--keep-hourly H]
         [--keep-daily D] [--keep-weekly W] [--keep-monthly M] [--keep-yearly Y]
         [--keep-within DURATION] [--grace DURATION] [--dry-run] [--json]
         [--archive-root DIR | --store s3://bucket/prefix [--s3-* flags]] [flags]

Expires a server's old archives with restic's "forget" rules: a run kept by
any rule is kept (the buckets go by the row's finished_at, in UTC). Whatever
the rules say, the newest run, the --min-keep newest runs and every run
finished within --grace (set it to at least the longest backup deadline)
stay. The rows go first, in one transaction under a per-server lock, then
their archives; archive files without a row that are older than --grace
(left by a crash between the two, or a failed run) are removed too.
--dry-run prints what would go and why each run stays, and changes nothing.
The archives are in the folder --archive-root, or in the S3 store --store
(settings: the --s3-* flags over [archive], as for backup), else in the
store of [archive].
`

// pruneSummary is the termination message of a prune.
type pruneSummary struct {
	Status       string `json:"status"` // done or failed
	Server       string `json:"server"`
	DryRun       bool   `json:"dry_run,omitempty"`
	RowsDeleted  int    `json:"rows_deleted"`
	FilesRemoved int    `json:"files_removed"`
	BytesFreed   int64  `json:"bytes_freed"`
	Error        string `json:"error,omitempty"`
}

// retentionFlags are the policy flags of prune, also taken by backup.
type retentionFlags struct {
	policy        retention.Policy
	within, grace string
}

// add registers the flags on fs.
func (r *retentionFlags) add(fs *flag.FlagSet) {
	fs.IntVar(&r.policy.Last, "keep-last", 0, "keep the N newest runs")
	fs.IntVar(&r.policy.Hourly, "keep-hourly", 0, "keep the newest run of each of the last N hours that have one")
	fs.IntVar(&r.policy.Daily, "keep-daily", 0, "keep the newest run of each of the last N days that have one")
	fs.IntVar(&r.policy.Weekly, "keep-weekly", 0, "keep the newest run of each of the last N ISO weeks that have one")
	fs.IntVar(&r.policy.Monthly, "keep-monthly", 0, "keep the newest run of each of the last N months that have one")
	fs.IntVar(&r.policy.Yearly, "keep-yearly", 0, "keep the newest run of each of the last N years that have one")
	fs.StringVar(&r.within, "keep-within", "", "keep every run finished within this long of the newest (30d, 2w, 36h)")
	fs.IntVar(&r.policy.MinKeep, "min-keep", 0, "never fewer runs than this, at least 1 (required with any keep rule)")
	fs.StringVar(&r.grace, "grace", prune.DefaultGrace.String(), "keep runs and archive files younger than this")
}

// given reports whether any retention flag was set on the command line.
func (r *retentionFlags) given(fs *flag.FlagSet) bool {
	for _, n := range []string{"keep-last", "keep-hourly", "keep-daily", "keep-weekly", "keep-monthly", "keep-yearly", "keep-within", "min-keep", "grace"} {
		if flagSet(fs, n) {
			return true
		}
	}
	return false
}

// options checks the flags and returns the prune options for server.
func (r *retentionFlags) options(fs *flag.FlagSet, server string) (prune.Options, error) {
	opts := prune.Options{Server: server, Policy: r.policy}
	var errs []error
	if !flagSet(fs, "min-keep") {
		errs = append(errs, errors.New("--min-keep is required: the number of archives never removed (e.g. --min-keep 3)"))
	}
	if r.within != "" {
		d, err := retention.ParseDuration(r.within)
		if err != nil {
			errs = append(errs, fmt.Errorf("--keep-within: %w", err))
		}
		opts.Policy.Within = d
	}
	g, err := retention.ParseDuration(r.grace)
	switch {
	case err != nil:
		errs = append(errs, fmt.Errorf("--grace: %w", err))
	case g <= 0:
		errs = append(errs, errors.New("--grace must be positive: at least the longest backup deadline, so a run that is still writing keeps its archive"))
	}
	opts.Grace = g
	if len(errs) == 0 {
		if err := opts.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return opts, errors.Join(errs...)
}

func cmdPrune(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	format := logFormat("auto")
	var rf retentionFlags
	var server, archiveRoot, storeURL, tlogPath string
	var s3 s3Flags
	var asJSON, dryRun bool
	fs := newFlagSet("prune", pruneHelp, stderr)
	configPath := fs.String("config", config.DefaultPath, "felis.toml")
	fs.StringVar(&server, "server", "", "server whose archives to expire (required)")
	rf.add(fs)
	fs.BoolVar(&dryRun, "dry-run", false, "decide and print, change nothing")
	fs.BoolVar(&asJSON, "json", false, "print the report as JSON")
	fs.StringVar(&archiveRoot, "archive-root", "", "archive root folder; overrides [archive] store and local_path")
	fs.StringVar(&storeURL, "store", "", "s3://bucket/prefix: prune this S3 store (settings: the --s3-* flags over [archive]); overrides [archive] store and local_path")
	s3.add(fs)
	fs.StringVar(&tlogPath, "termination-log", defaultTerminationLog, "file for the one-line JSON summary")
	fs.Var(&format, "log-format", "json, text or auto (json when stderr is not a terminal)")
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return code
	}
	tlog := terminationLog{path: tlogPath, explicit: flagSet(fs, "termination-log")}
	log := newLogger(format, stderr)
	fail := func(code int, err error) int {
		ps := pruneSummary{Status: "failed", Server: server, DryRun: dryRun, Error: err.Error()}
		tlog.writeBounded(log, &ps, &ps.Error)
		return code
	}

	opts, err := rf.options(fs, server)
	opts.DryRun = dryRun
	if server == "" {
		err = errors.Join(errors.New("--server is required"), err)
	}
	var cfg config.Config
	var spec storeSpec
	if err == nil {
		cfg, spec, err = loadArchiveConfig(fs, *configPath, archiveRoot, storeURL, &s3)
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
	st, err := spec.open(nil) // prune takes no archive lock
	if err != nil {
		return fail(exitUsage, err)
	}
	rep, err := prune.Prune(ctx, db, st, opts, log)
	if err != nil {
		log.Error("prune failed", "server", opts.Server, "error", err)
	}
	if perr := printPruneReport(stdout, rep, asJSON); perr != nil && err == nil {
		err = fmt.Errorf("writing the report: %w", perr)
	}
	if errors.Is(err, store.ErrNoRoot) || errors.Is(err, store.ErrDenied) {
		return fail(exitUsage, err) // as for backup: no retry can help
	}
	if err != nil {
		return fail(exitFailed, err)
	}
	tlog.writeBounded(log, &pruneSummary{Status: "done", Server: rep.Server, DryRun: rep.DryRun,
		RowsDeleted: rep.RowsDeleted, FilesRemoved: rep.FilesRemoved, BytesFreed: rep.BytesFreed})
	return exitOK
}

// loadArchiveConfig loads felis.toml and returns it with the archive store:
// the folder archiveRoot when given, else the S3 store storeURL (--store)
// with the --s3-* flags s3 over [archive], else [archive] store or
// local_path. Its errors are usage errors.
func loadArchiveConfig(fs *flag.FlagSet, configPath, archiveRoot, storeURL string, s3 *s3Flags) (config.Config, storeSpec, error) {
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
		return config.Config{}, storeSpec{}, fmt.Errorf("no archive root: pass --archive-root or set [archive] local_path (or store) in %s", cfg.Path())
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
		_, err := fmt.Fprintf(w, "%s %d of %d runs\n", what, n, len(rep.Runs))
		return err
	}
	_, err := fmt.Fprintf(w, "%s %d runs and %d files, %d bytes freed\n", what, rep.RowsDeleted, rep.FilesRemoved, rep.BytesFreed)
	return err
}
