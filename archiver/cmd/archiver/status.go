package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/worldbackup/worldbackup/archiver/catalog"
	"github.com/worldbackup/worldbackup/archiver/config"
	"github.com/worldbackup/worldbackup/jobapi"
)

const statusHelp = `Usage: archiver status --max-age DURATION [--server S]... [--json] [flags]

Shows each server's newest recorded archive and its age, and exits 1 when a
server's newest archive is older than --max-age, or a --server named has none:
for alerting from any cron job or CI (e.g. a daily backup: --max-age 26h).
Without --server, every server in the catalog is checked.
`

// serverStatus is one line of archiver status.
type serverStatus struct {
	Server     string     `json:"server"`
	NewestRun  string     `json:"newest_run,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	AgeSeconds float64    `json:"age_seconds,omitempty"`
	Runs       int64      `json:"runs"`
	OK         bool       `json:"ok"`
}

func cmdStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	format := logFormat("auto")
	var servers stringList
	fs := newFlagSet("status", statusHelp, stderr)
	configPath := fs.String("config", config.DefaultPath, "felis.toml")
	maxAge := fs.Duration("max-age", 0, "the oldest a server's newest archive may be, e.g. 26h (required)")
	fs.Var(&servers, "server", "a server that must have a recent archive, repeatable (default: every server in the catalog)")
	asJSON := fs.Bool("json", false, "print a JSON array")
	fs.Var(&format, "log-format", "json, text or auto (json when stderr is not a terminal)")
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return code
	}
	if *maxAge <= 0 {
		return usageError(stderr, "status", "%s is required and must be positive, e.g. %[1]s 26h", jobapi.Flag("max-age"))
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
	newest, err := db.NewestByServer(ctx)
	if err != nil {
		log.Error("status failed", "error", err)
		return exitFailed
	}
	st := statusOf(newest, servers.values, *maxAge, time.Now())
	if err := printStatus(stdout, st, *maxAge, *asJSON); err != nil {
		log.Error("writing the status", "error", err)
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
// empty, is the servers to judge (one without a run is not OK).
func statusOf(newest []catalog.Newest, want []string, maxAge time.Duration, now time.Time) []serverStatus {
	if len(want) == 0 {
		for _, n := range newest {
			want = append(want, n.Server)
		}
	}
	var out []serverStatus
	for _, server := range slices.Compact(slices.Sorted(slices.Values(want))) {
		s := serverStatus{Server: server}
		i := slices.IndexFunc(newest, func(n catalog.Newest) bool { return n.Server == server })
		if i >= 0 {
			n := newest[i]
			age := now.Sub(n.FinishedAt)
			s.NewestRun, s.FinishedAt, s.AgeSeconds, s.Runs = n.RunID, &n.FinishedAt, age.Seconds(), n.Runs
			s.OK = age <= maxAge
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
	for _, s := range st {
		verdict := "ok"
		switch {
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
