package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/worldbackup/worldbackup/archiver/catalog"
	"github.com/worldbackup/worldbackup/jobapi"
)

const resolveHelp = `Usage: archiver resolve --server S --from-run (RUN_ID | latest) [--namespace NS] [--within ROOT] [--out FILE] [flags]

Finds a run of server S in the catalog, by its run ID or, with latest, the
server's newest successful run (one finished in the future, more than the
clock skew allowed ahead of this clock, is never the newest, nor is one whose
archive a prune found missing from the store; with --namespace, the newest of
the runs recorded from NS or without a namespace), and writes its
archive ref and SHA-256 as one JSON object to --out (atomically) or stdout.
A restore by run runs it in its init container, the only container of the
pod that reads the config Secret; the extractor then reads the file
(restore --archive-from) and still checks every byte against the checksum.

Exit 2, with the reason, for a run ID the catalog does not have, a run of
another server, a server without a successful run, or an archive outside
--within (the backup claim's mount the restore reads, or s3:// for an S3
store); exit 1 when the catalog cannot be read. With --allow-gone (the
restore Job's), a run ID the catalog does not have is written as gone
({"gone":true}, exit 0): the restore then does nothing if the world's marker
shows this restore done (a Job re-created after a prune removed the run),
and fails otherwise (the run was never recorded, or pruned before the
restore ran).
`

// newResolveFlags returns the flag set of resolve and the request it fills.
func newResolveFlags(stderr io.Writer) (*flag.FlagSet, *jobapi.Resolve) {
	r := &jobapi.Resolve{}
	fs := newFlagSet(jobapi.KindResolve, resolveHelp, stderr)
	r.Bind(fs)
	return fs, r
}

// cmdResolve runs `archiver resolve`.
func cmdResolve(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, r := newResolveFlags(stderr)
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return code
	}
	r.Parsed(fs)
	var problems []error
	if err := jobapi.CheckServer(r.Server); err != nil {
		problems = append(problems, flagErrorf(jobapi.FlagServer, ": %w", err))
	}
	if err := jobapi.CheckNamespace(r.Namespace); err != nil {
		problems = append(problems, flagErrorf(jobapi.FlagNamespace, ": %w", err))
	}
	if err := jobapi.CheckRunRef(r.FromRun); err != nil {
		problems = append(problems, flagErrorf(jobapi.FlagFromRun, ": %w", err))
	}
	if w := r.Within; w != "" && !jobapi.IsS3URL(w) && !filepath.IsAbs(w) {
		problems = append(problems, flagErrorf(jobapi.FlagWithin, "%q: want an absolute folder or an s3:// URL prefix", w))
	}
	if len(problems) > 0 {
		return usageError(stderr, jobapi.KindResolve, "%s", errors.Join(problems...))
	}
	log := newLogger(r.LogFormat, stderr).Named(jobapi.KindResolve)
	db, code := openCatalog(ctx, log, r.Config, stderr)
	if db == nil {
		return code
	}
	defer db.Close()
	rec, err := db.Resolve(ctx, r.Server, r.Namespace, r.FromRun, time.Now())
	switch {
	case errors.Is(err, catalog.ErrNotFound) && r.AllowGone:
		// A restore Job re-created after a prune removed its run: the
		// restore's marker decides whether there is anything to do.
		log.Warn("the catalog does not have this run (pruned since the restore was asked for, or never recorded): "+
			"handing it on as gone; the restore does nothing if the world's marker shows it done, and fails otherwise",
			"server", r.Server, "from_run", r.FromRun)
		return writeResolved(log, r, jobapi.ResolvedRun{Server: r.Server, RunID: r.FromRun, Gone: true}, stdout)
	case errors.Is(err, catalog.ErrNotFound):
		log.Error("no such run: see `archiver list --server "+r.Server+"` for the server's runs, or use "+jobapi.RunLatest,
			"server", r.Server, "from_run", r.FromRun, "error", err)
		return exitUsage
	case errors.Is(err, catalog.ErrOtherServer):
		log.Error("the run is another server's: name a run of this server, or set the server the run is from (the restore's fromServer)",
			"server", r.Server, "from_run", r.FromRun, "error", err)
		return exitUsage
	case errors.Is(err, catalog.ErrNoRun):
		log.Error("the server has no successful run to restore: back it up first, or name a run ID",
			"server", r.Server, "from_run", r.FromRun, "error", err)
		return exitUsage
	case err != nil:
		log.Error("resolving the run failed", "server", r.Server, "from_run", r.FromRun, "error", err)
		return exitFailed
	}
	if rec.MissingSince != nil {
		// A run named by its ID: the restore reads the store itself and
		// fails cleanly if the archive is still gone.
		log.Warn("a prune found this run's archive missing from the store: the restore fails unless it is back",
			"run_id", rec.RunID, "archive_ref", rec.ArchiveRef, "missing_since", rec.MissingSince.UTC().Format(time.RFC3339))
	}
	res := jobapi.ResolvedRun{Server: rec.Server, RunID: rec.RunID, ArchiveRef: rec.ArchiveRef, SHA256: rec.SHA256}
	if err := res.Validate(); err != nil {
		log.Error("the catalog's row of the run is invalid", "run_id", rec.RunID, "error", err)
		return exitFailed
	}
	if !jobapi.RefWithin(res.ArchiveRef, r.Within) {
		log.Error("the run's archive is not where this restore can read it: restore it with the store it was written to "+
			"(the backup claim mounted at the same backupRoot, or the S3 store)",
			"run_id", rec.RunID, "archive_ref", res.ArchiveRef, "within", r.Within)
		return exitUsage
	}
	if code := writeResolved(log, r, res, stdout); code != exitOK {
		return code
	}
	log.Info("resolved", "server", rec.Server, "from_run", r.FromRun, "run_id", rec.RunID, "archive_ref", rec.ArchiveRef,
		"sha256", rec.SHA256, "finished_at", rec.FinishedAt.UTC().Format(time.RFC3339))
	return exitOK
}

// writeResolved writes res to r.Out (atomically), or to stdout without one.
func writeResolved(log hclog.Logger, r *jobapi.Resolve, res jobapi.ResolvedRun, stdout io.Writer) int {
	if r.Out == "" {
		if _, err := stdout.Write(res.Encode()); err != nil {
			return exitFailed
		}
		return exitOK
	}
	if err := writeFileAtomic(r.Out, res.Encode()); err != nil {
		log.Error("writing the resolved run", "out", r.Out, "error", err)
		return exitFailed
	}
	return exitOK
}

// writeFileAtomic writes b to name through a temporary file in its folder
// and a rename, so a reader never sees a part of it.
func writeFileAtomic(name string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(name), ".resolve-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o444); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), name)
}

// resolvedArchive reads the restore's --archive-from file: the archive and
// checksum archiver resolve found.
func resolvedArchive(name string) (jobapi.ResolvedRun, error) {
	r, err := jobapi.ReadResolvedRun(name)
	if err != nil {
		return jobapi.ResolvedRun{}, fmt.Errorf("%s %s: %w", jobapi.Flag(jobapi.FlagArchiveFrom), name, err)
	}
	return r, nil
}
