package main

import (
	"context"
	"encoding/json"
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
	db, code := openCatalog(ctx, log, *configPath, stderr)
	if db == nil {
		return code
	}
	defer db.Close()
	applied, err := db.Migrate(ctx)
	if err != nil {
		log.Error("migration failed", "error", err)
		return exitFailed
	}
	if len(applied) == 0 {
		fmt.Fprintln(stdout, "catalog schema is up to date")
	}
	for _, m := range applied {
		fmt.Fprintf(stdout, "applied %s\n", m)
	}
	return exitOK
}

const listHelp = `Usage: archiver list [--server S] [--json] [flags]

Lists the recorded runs, oldest first: all servers, or one with --server.
`

// listedRun is a row as printed by list --json.
type listedRun struct {
	ID          int64     `json:"id"`
	RunID       string    `json:"run_id"`
	Server      string    `json:"server"`
	FormerOwner *string   `json:"former_owner"`
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
}

func cmdList(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	format := logFormat("auto")
	fs := newFlagSet("list", listHelp, stderr)
	configPath := fs.String("config", config.DefaultPath, "felis.toml")
	server := fs.String("server", "", "only this server's runs")
	asJSON := fs.Bool("json", false, "print a JSON array")
	fs.Var(&format, "log-format", "json, text or auto (json when stderr is not a terminal)")
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return code
	}
	if *server != "" {
		if err := jobapi.CheckServer(*server); err != nil {
			return usageError(stderr, "list", "%s: %s", jobapi.Flag(jobapi.FlagServer), err)
		}
	}
	log := newLogger(format, stderr)
	db, code := openCatalog(ctx, log, *configPath, stderr)
	if db == nil {
		return code
	}
	defer db.Close()
	recs, err := db.List(ctx, *server)
	if err != nil {
		log.Error("listing failed", "error", err)
		return exitFailed
	}
	if *asJSON {
		out := make([]listedRun, len(recs))
		for i, r := range recs {
			out[i] = listedRun(r)
		}
		if err := json.NewEncoder(stdout).Encode(out); err != nil {
			log.Error("writing the list", "error", err)
			return exitFailed
		}
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN ID\tSERVER\tFINISHED\tFORMAT\tSIZE\tADDED\tFILES\tSHA256\tARCHIVE")
	for _, r := range recs {
		added := "-"
		if r.AddedBytes != nil {
			added = strconv.FormatInt(*r.AddedBytes, 10)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%d\t%.12s\t%s\n", r.RunID, r.Server,
			r.FinishedAt.UTC().Format(time.RFC3339), r.Format, r.SizeBytes, added, r.FileCount, r.SHA256, r.ArchiveRef)
	}
	if err := tw.Flush(); err != nil {
		log.Error("writing the list", "error", err)
		return exitFailed
	}
	return exitOK
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
