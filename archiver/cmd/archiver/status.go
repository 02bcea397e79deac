package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/worldbackup/worldbackup/archiver/catalog"
	"github.com/worldbackup/worldbackup/archiver/config"
	"github.com/worldbackup/worldbackup/jobapi"
)

// statusHelp is a format: %s is catalog.FutureTolerance.
const statusHelp = `Usage: archiver status --max-age DURATION [--server S]... [--json] [flags]

Shows each server's newest recorded archive and its age, and exits 1 when a
server's newest archive is older than --max-age, or a --server named has none:
for alerting from any cron job or CI (e.g. a daily backup: --max-age 26h).
Without --server, every server in the catalog is checked, and a catalog
without any run is stale (exit 1; --json prints []). A run finished in the
future (more than %s ahead of this clock: a node with a wrong clock) is
never fresh: it is left out of the judgement, with a warning naming it. So is
a run whose archive a prune found missing from the store (archives_missing
in --json): nothing can be restored from it. A server retired with
archiver retire is shown as retired and not judged (unless a --server
names it) until it records a run or a failed attempt again.
`

// serverStatus is one line of archiver status.
type serverStatus struct {
	Server     string     `json:"server"`
	NewestRun  string     `json:"newest_run,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	AgeSeconds float64    `json:"age_seconds,omitempty"`
	Runs       int64      `json:"runs"`
	// ArchivesMissing counts the runs whose archive a prune found missing
	// from the store: not counted as backups.
	ArchivesMissing int64 `json:"archives_missing,omitempty"`
	// RetiredAt is when archiver retire retired the server: it is not
	// judged (OK), unless a --server named it.
	RetiredAt *time.Time `json:"retired_at,omitempty"`
	OK        bool       `json:"ok"`
}

func cmdStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	format := logFormat("auto")
	var servers stringList
	fs := newFlagSet("status", fmt.Sprintf(statusHelp, catalog.FutureTolerance), stderr)
	configPath := fs.String(jobapi.FlagConfig, config.DefaultPath, "felis.toml")
	maxAge := fs.Duration(jobapi.FlagMaxAge, 0, "the oldest a server's newest archive may be, e.g. 26h (required)")
	fs.Var(&servers, jobapi.FlagServer, "a server that must have a recent archive, repeatable (default: every server in the catalog)")
	asJSON := fs.Bool(jobapi.FlagJSON, false, "print a JSON array")
	fs.Var(&format, "log-format", "json, text or auto (json when stderr is not a terminal)")
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return code
	}
	if *maxAge <= 0 {
		return usageError(stderr, "status", "%s is required and must be positive, e.g. %[1]s 26h", jobapi.Flag(jobapi.FlagMaxAge))
	}
	for _, s := range servers.values {
		if err := jobapi.CheckServer(s); err != nil {
			return usageError(stderr, "status", "%s: %s", jobapi.Flag(jobapi.FlagServer), err)
		}
	}
	log := newLogger(format, stderr)
	db, code := openCatalog(ctx, log, *configPath, stderr)
	if db == nil {
		return code
	}
	defer db.Close()
	now := time.Now()
	newest, err := db.NewestByServer(ctx, now)
	if err != nil {
		log.Error("status failed", "error", err)
		return exitFailed
	}
	for _, n := range newest {
		if n.Future > 0 {
			log.Warn("runs finished in the future (a node with a wrong clock?) are not counted as fresh",
				"server", n.Server, "runs", n.Future, "run_id", n.FutureRunID, "tolerance", catalog.FutureTolerance.String())
		}
		if n.Missing > 0 {
			log.Warn("runs whose archive a prune found missing from the store are not counted as fresh: "+
				"bring the archives back, or delete their rows if they are lost for good (`archiver list` names them)",
				"server", n.Server, "runs", n.Missing, "run_id", n.MissingRunID)
		}
	}
	retired := map[string]time.Time{}
	if len(servers.values) == 0 {
		retired, err = db.RetiredServers(ctx)
		switch {
		case errors.Is(err, catalog.ErrNotPermitted):
			log.Warn("retired servers are judged as the others", "error", err)
		case err != nil:
			log.Error("status failed", "error", err)
			return exitFailed
		}
	}
	st := statusOf(newest, servers.values, retired, *maxAge, now)
	if err := printStatus(stdout, st, *maxAge, *asJSON); err != nil {
		log.Error("writing the status", "error", err)
		return exitFailed
	}
	if len(st) == 0 {
		log.Error("the catalog holds no run: no server has a backup")
		return exitFailed
	}
	for _, s := range st {
		if !s.OK {
			return exitFailed
		}
	}
	return exitOK
}

// statusOf judges the newest runs against maxAge at now; want, when not
// empty, is the servers to judge (one without a run is not OK); the servers
// of retired are shown retired and OK.
func statusOf(newest []catalog.Newest, want []string, retired map[string]time.Time, maxAge time.Duration, now time.Time) []serverStatus {
	if len(want) == 0 {
		for _, n := range newest {
			want = append(want, n.Server)
		}
	}
	out := []serverStatus{}
	for _, server := range slices.Compact(slices.Sorted(slices.Values(want))) {
		s := serverStatus{Server: server}
		i := slices.IndexFunc(newest, func(n catalog.Newest) bool { return n.Server == server })
		if i >= 0 {
			n := newest[i]
			s.Runs, s.ArchivesMissing = n.Runs, n.Missing
			if n.FinishedAt != nil {
				age := now.Sub(*n.FinishedAt)
				s.NewestRun, s.FinishedAt, s.AgeSeconds = n.RunID, n.FinishedAt, age.Seconds()
				s.OK = age <= maxAge
			}
		}
		if at, ok := retired[server]; ok {
			s.RetiredAt, s.OK = &at, true
		}
		out = append(out, s)
	}
	return out
}

func printStatus(w io.Writer, st []serverStatus, maxAge time.Duration, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(st)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tNEWEST RUN\tFINISHED\tAGE\tRUNS\tSTATUS")
	if len(st) == 0 {
		fmt.Fprintln(tw, "-\t-\t-\t-\t0\tSTALE: the catalog holds no run")
	}
	for _, s := range st {
		verdict := "ok"
		switch {
		case s.RetiredAt != nil:
			newest, finished, age := "-", "-", "-"
			if s.FinishedAt != nil {
				newest, finished = s.NewestRun, s.FinishedAt.UTC().Format(time.RFC3339)
				age = (time.Duration(s.AgeSeconds) * time.Second).Round(time.Second).String()
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\tretired %s\n", s.Server, newest, finished, age, s.Runs,
				s.RetiredAt.UTC().Format(time.RFC3339))
			continue
		case s.FinishedAt == nil && s.Runs > 0:
			why := "every run finished in the future"
			if s.ArchivesMissing > 0 {
				why = "no run whose archive is in the store (" + strconv.FormatInt(s.ArchivesMissing, 10) + " missing)"
			}
			fmt.Fprintf(tw, "%s\t-\t-\t-\t%d\tSTALE: %s\n", s.Server, s.Runs, why)
			continue
		case s.FinishedAt == nil:
			fmt.Fprintf(tw, "%s\t-\t-\t-\t0\tSTALE: no archive\n", s.Server)
			continue
		case !s.OK:
			verdict = "STALE: older than " + maxAge.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", s.Server, s.NewestRun, s.FinishedAt.UTC().Format(time.RFC3339),
			(time.Duration(s.AgeSeconds) * time.Second).Round(time.Second), s.Runs, verdict)
	}
	return tw.Flush()
}
