package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/worldbackup/worldbackup/archiver/catalog"
	"github.com/worldbackup/worldbackup/archiver/config"
	"github.com/worldbackup/worldbackup/jobapi"
)

const retireHelp = `Usage: archiver retire --server S [--server S]... [--undo] [flags]

Retires servers that left the fleet from archiver status and the exporter
(archiver metrics), so that they are no longer judged stale and their
WorldBackupStale alert ends. Nothing is deleted: their runs stay in the
catalog and in the store, archiver list, prune, verify and restore work on
them as before (remove their archives with a prune, their key objects as
README's "When a customer leaves" says). A retirement holds until the server
records a run or a failed attempt again (a schedule left running, a server
that came back); --undo ends it at once. A server that has neither a run nor
a failed attempt in the catalog is refused (exit 2). Applies the catalog's
migrations first, as backup does.
`

func cmdRetire(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	format := logFormat("auto")
	var servers stringList
	fs := newFlagSet("retire", retireHelp, stderr)
	configPath := fs.String(jobapi.FlagConfig, config.DefaultPath, "felis.toml")
	fs.Var(&servers, jobapi.FlagServer, "a server to retire, repeatable (required)")
	undo := fs.Bool("undo", false, "end the retirement of the servers instead")
	fs.Var(&format, "log-format", "json, text or auto (json when stderr is not a terminal)")
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return code
	}
	if len(servers.values) == 0 {
		return usageError(stderr, "retire", "%s is required: the server to retire (archiver status lists them)", jobapi.Flag(jobapi.FlagServer))
	}
	for _, s := range servers.values {
		if err := jobapi.CheckServer(s); err != nil {
			return usageError(stderr, "retire", "%s: %s", jobapi.Flag(jobapi.FlagServer), err)
		}
	}
	log := newLogger(format, stderr).Named("retire")
	db, applied, code := openMigrated(ctx, log, *configPath, stderr)
	if db == nil {
		return code
	}
	defer db.Close()
	if len(applied) > 0 {
		log.Info("applied catalog migrations", "migrations", applied)
	}
	code = exitOK
	for _, s := range servers.values {
		if *undo {
			was, err := db.Unretire(ctx, s)
			switch {
			case err != nil:
				log.Error("ending the retirement failed", "server", s, "error", err)
				code = max(code, exitFailed)
			case was:
				fmt.Fprintf(stdout, "%s: no longer retired\n", s)
			default:
				fmt.Fprintf(stdout, "%s: was not retired\n", s)
			}
			continue
		}
		r, err := db.Retire(ctx, s)
		switch {
		case errors.Is(err, catalog.ErrUnknownServer):
			log.Error("nothing to retire: check the name and the catalog (archiver status lists the servers)", "server", s, "error", err)
			code = exitUsage
		case err != nil:
			log.Error("retiring failed", "server", s, "error", err)
			code = max(code, exitFailed)
		default:
			fmt.Fprintf(stdout, "%s: retired at %s; its %d runs and %d failed attempts stay in the catalog\n",
				s, r.RetiredAt.UTC().Format(time.RFC3339), r.Runs, r.Failures)
		}
	}
	return code
}
