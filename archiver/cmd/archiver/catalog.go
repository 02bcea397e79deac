package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/worldbackup/worldbackup/archiver/catalog"
	"github.com/worldbackup/worldbackup/archiver/config"
	"github.com/worldbackup/worldbackup/jobapi"
)

const migrateHelp = `Usage: archiver migrate [flags]

Applies the catalog's schema migrations (embedded in the binary) that the
database lacks. Safe to run concurrently; a no-op when up to date.
`

func cmdMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	format := logFormat("auto")
	fs := newFlagSet("migrate", migrateHelp, stderr)
	configPath := fs.String("config", config.DefaultPath, "felis.toml")
	fs.Var(&format, "log-format", "json, text or auto (json when stderr is not a terminal)")
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return code
	}
	log := newLogger(format, stderr)
	db, applied, code := openMigrated(ctx, log, *configPath, stderr)
	if db == nil {
		return code
	}
	defer db.Close()
	if len(applied) == 0 {
		fmt.Fprintln(stdout, "catalog schema is up to date")
	}
	for _, m := range applied {
		fmt.Fprintf(stdout, "applied %s\n", m)
	}
	return exitOK
}

const listHelp = `Usage: archiver list [--server S] [--namespace NS] [--limit N] [--json | --wide] [flags]

Lists the recorded runs and the failed backup attempts (never restorable;
with their reason), newest first: all servers, or one with --server; with
--namespace, those recorded from NS or without a namespace. The
table shortens checksums and reasons; --wide prints them whole, --json
prints every field. A run whose archive the last prune found missing from
the store has the status "missing" (and missing_since in --json).
`

// defaultListLimit is list's default --limit.
const defaultListLimit = 100

// listedRun is a run as printed by list --json.
type listedRun struct {
	ID          int64     `json:"id"`
	RunID       string    `json:"run_id"`
	Server      string    `json:"server"`
	FormerOwner *string   `json:"former_owner"`
	Namespace   string    `json:"namespace,omitempty"` // "": recorded without one
	ArchiveRef  string    `json:"archive_ref"`
	SizeBytes   int64     `json:"size_bytes"`
	SHA256      string    `json:"sha256"`
	Compression string    `json:"compression"`
	FileCount   int64     `json:"file_count"`
	StartedAt   time.Time `json:"started_at"`
	FinishedAt  time.Time `json:"finished_at"`
	CreatedAt   time.Time `json:"created_at"`
	Format      string    `json:"format"`
	AddedBytes  *int64    `json:"added_bytes"`
	Status      string    `json:"status"` // listOK or listMissing
	// MissingSince is when a prune first found the archive missing.
	MissingSince *time.Time `json:"missing_since,omitempty"`
}

// listedFailure is a failed attempt as printed by list --json.
type listedFailure struct {
	ID         int64     `json:"id"`
	RunID      string    `json:"run_id"`
	Server     string    `json:"server"`
	Namespace  string    `json:"namespace,omitempty"` // "": recorded without one
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`
	CreatedAt  time.Time `json:"created_at"`
	Status     string    `json:"status"` // listFailed
	Reason     string    `json:"reason"`
}

// The status field of list's entries.
const (
	listOK     = "ok"
	listFailed = "failed"
	// listMissing: a run whose archive a prune found missing from the
	// store (catalog.Record.MissingSince).
	listMissing = "missing"
)

// listEntry is a run or a failed attempt.
type listEntry struct {
	run  *catalog.Record
	fail *catalog.Failure
}

func (e listEntry) finished() time.Time {
	if e.run != nil {
		return e.run.FinishedAt
	}
	return e.fail.FinishedAt
}

// mergeNewest merges runs and fails (each newest first) into one list,
// newest first, at most limit (<= 0: all).
func mergeNewest(runs []catalog.Record, fails []catalog.Failure, limit int) []listEntry {
	out := []listEntry{}
	i, j := 0, 0
	for (i < len(runs) || j < len(fails)) && (limit <= 0 || len(out) < limit) {
		if j >= len(fails) || (i < len(runs) && !runs[i].FinishedAt.Before(fails[j].FinishedAt)) {
			out = append(out, listEntry{run: &runs[i]})
			i++
		} else {
			out = append(out, listEntry{fail: &fails[j]})
			j++
		}
	}
	return out
}

func cmdList(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	format := logFormat("auto")
	fs := newFlagSet("list", listHelp, stderr)
	configPath := fs.String(jobapi.FlagConfig, config.DefaultPath, "felis.toml")
	server := fs.String(jobapi.FlagServer, "", "only this server's runs")
	namespace := fs.String(jobapi.FlagNamespace, "", "only the runs and attempts that namespace's Jobs see: recorded from it, or without a namespace")
	limit := fs.Int(jobapi.FlagLimit, defaultListLimit, "the newest N entries; 0: every one")
	asJSON := fs.Bool(jobapi.FlagJSON, false, "print a JSON array (full checksums, every field)")
	wide := fs.Bool(jobapi.FlagWide, false, "a table with every column and full checksums and reasons")
	fs.Var(&format, jobapi.FlagLogFormat, "json, text or auto (json when stderr is not a terminal)")
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return code
	}
	if *server != "" {
		if err := jobapi.CheckServer(*server); err != nil {
			return usageError(stderr, "list", "%s: %s", jobapi.Flag(jobapi.FlagServer), err)
		}
	}
	if err := jobapi.CheckNamespace(*namespace); err != nil {
		return usageError(stderr, "list", "%s: %s", jobapi.Flag(jobapi.FlagNamespace), err)
	}
	if *limit < 0 {
		return usageError(stderr, "list", "%s must be 0 (every entry) or positive", jobapi.Flag(jobapi.FlagLimit))
	}
	if *asJSON && *wide {
		return usageError(stderr, "list", "%s and %s exclude each other", jobapi.Flag(jobapi.FlagJSON), jobapi.Flag(jobapi.FlagWide))
	}
	log := newLogger(format, stderr)
	db, code := openCatalog(ctx, log, *configPath, stderr)
	if db == nil {
		return code
	}
	defer db.Close()
	// One more than asked tells whether the list was cut.
	ask := *limit
	if ask > 0 {
		ask++
	}
	runs, err := db.NewestRuns(ctx, *server, *namespace, ask)
	var fails []catalog.Failure
	if err == nil {
		fails, err = db.Failures(ctx, *server, *namespace, ask)
	}
	if errors.Is(err, catalog.ErrNoSchema) {
		fmt.Fprintf(stderr, "archiver list: %s\n", catalog.ErrNoSchema)
		return exitFailed
	}
	if err != nil {
		log.Error("listing failed", "error", err)
		return exitFailed
	}
	entries := mergeNewest(runs, fails, ask)
	cut := *limit > 0 && len(entries) > *limit
	if cut {
		entries = entries[:*limit]
	}
	switch {
	case *asJSON:
		err = printListJSON(stdout, entries)
	default:
		err = printListTable(stdout, entries, *wide)
	}
	if err != nil {
		log.Error("writing the list", "error", err)
		return exitFailed
	}
	if cut {
		fmt.Fprintf(stderr, "archiver list: showing the newest %d; %s 0 lists every one\n", *limit, jobapi.Flag(jobapi.FlagLimit))
	}
	return exitOK
}

func printListJSON(w io.Writer, entries []listEntry) error {
	out := make([]any, len(entries))
	for i, e := range entries {
		if r := e.run; r != nil {
			out[i] = listedRun{ID: r.ID, RunID: r.RunID, Server: r.Server, FormerOwner: r.FormerOwner, Namespace: r.Namespace,
				ArchiveRef: r.ArchiveRef, SizeBytes: r.SizeBytes, SHA256: r.SHA256, Compression: r.Compression,
				FileCount: r.FileCount, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, CreatedAt: r.CreatedAt,
				Format: r.Format, AddedBytes: r.AddedBytes, Status: runStatus(*r), MissingSince: r.MissingSince}
			continue
		}
		f := e.fail
		out[i] = listedFailure{ID: f.ID, RunID: f.RunID, Server: f.Server, Namespace: f.Namespace, StartedAt: f.StartedAt,
			FinishedAt: f.FinishedAt, CreatedAt: f.CreatedAt, Status: listFailed, Reason: f.Reason}
	}
	return json.NewEncoder(w).Encode(out)
}

// runStatus is a run's STATUS in the list: listMissing when a prune found
// its archive missing from the store, else listOK.
func runStatus(r catalog.Record) string {
	if r.MissingSince != nil {
		return listMissing
	}
	return listOK
}

// orDash is s, or "-" for an empty one (a table's empty cell).
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// shortReason is the length of a reason in the narrow table.
const shortReason = 60

func printListTable(w io.Writer, entries []listEntry, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if wide {
		fmt.Fprintln(tw, "RUN ID\tSERVER\tNAMESPACE\tSTARTED\tFINISHED\tDURATION\tSTATUS\tFORMAT\tCOMPRESSION\tSIZE\tADDED\tFILES\tSHA256\tARCHIVE / REASON")
	} else {
		fmt.Fprintln(tw, "RUN ID\tSERVER\tFINISHED\tSTATUS\tFORMAT\tSIZE\tADDED\tFILES\tSHA256\tARCHIVE / REASON")
	}
	for _, e := range entries {
		if r := e.run; r != nil {
			added := "-"
			if r.AddedBytes != nil {
				added = strconv.FormatInt(*r.AddedBytes, 10)
			}
			if wide {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%d\t%s\t%s\n", r.RunID, r.Server, orDash(r.Namespace),
					r.StartedAt.UTC().Format(time.RFC3339), r.FinishedAt.UTC().Format(time.RFC3339),
					r.FinishedAt.Sub(r.StartedAt).Round(time.Second), runStatus(*r), r.Format, r.Compression,
					r.SizeBytes, added, r.FileCount, r.SHA256, r.ArchiveRef)
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%d\t%.12s\t%s\n", r.RunID, r.Server,
				r.FinishedAt.UTC().Format(time.RFC3339), runStatus(*r), r.Format, r.SizeBytes, added, r.FileCount, r.SHA256, r.ArchiveRef)
			continue
		}
		f := e.fail
		reason := f.Reason
		if wide {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\tFAILED\t-\t-\t-\t-\t-\t-\t%s\n", f.RunID, f.Server, orDash(f.Namespace),
				f.StartedAt.UTC().Format(time.RFC3339), f.FinishedAt.UTC().Format(time.RFC3339),
				f.FinishedAt.Sub(f.StartedAt).Round(time.Second), reason)
			continue
		}
		if r := []rune(reason); len(r) > shortReason {
			reason = string(r[:shortReason-3]) + "..."
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\tFAILED\t-\t-\t-\t-\t-\t%s\n", f.RunID, f.Server,
			f.FinishedAt.UTC().Format(time.RFC3339), reason)
	}
	return tw.Flush()
}

// openCatalog loads the config and connects. On failure it returns a nil
// DB and the exit code (2 for the config, 1 for the connection).
func openCatalog(ctx context.Context, log hclog.Logger, configPath string, stderr io.Writer) (*catalog.DB, int) {
	cfg, err := config.Load(configPath)
	if err != nil {
		fmt.Fprintf(stderr, "archiver: %s\n", err)
		return nil, exitUsage
	}
	db, err := catalog.Open(ctx, cfg.Database.URL, log)
	if err != nil {
		log.Error("cannot open the catalog", "error", err)
		return nil, exitFailed
	}
	return db, exitOK
}

// openMigrated is openCatalog, then the catalog's migrations applied: the
// DB and the migrations applied now, or a nil DB and the exit code.
func openMigrated(ctx context.Context, log hclog.Logger, configPath string, stderr io.Writer) (*catalog.DB, []string, int) {
	db, code := openCatalog(ctx, log, configPath, stderr)
	if db == nil {
		return nil, nil, code
	}
	applied, err := db.Migrate(ctx)
	if err != nil {
		db.Close()
		log.Error("migrating the catalog failed", "error", err)
		return nil, nil, exitFailed
	}
	return db, applied, exitOK
}
