package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/worldbackup/worldbackup/archiver/config"
	"github.com/worldbackup/worldbackup/archiver/exporter"
	"github.com/worldbackup/worldbackup/jobapi"
)

const metricsHelp = `Usage: archiver metrics [--listen :9090] [--cluster NAME] [--max-age 36h]
                        [--server-max-age S=26h]... [flags]

Serves the catalog as Prometheus metrics on /metrics and as a status page
on /: every server's newest successful run and its age, its last runs'
sizes, its failed attempts, and the command that restores its newest run.
Each scrape re-reads the catalog (at most every 5s, each read bounded). It
reads only [database] of felis.toml, and never migrates: on a database
without the tables, worldbackup_exporter_catalog_up is 0 and the log says to
run archiver migrate. It needs only SELECT (a read-only role, as
archiver/exporter/readonly_role.sql makes) on ` + jobapi.MetricsTables + `.
`

// metricsFlags are the flags of metrics.
type metricsFlags struct {
	jobapi.Metrics
}

func newMetricsFlags(stderr io.Writer) (*flag.FlagSet, *metricsFlags) {
	f := &metricsFlags{}
	fs := newFlagSet(jobapi.KindMetrics, metricsHelp, stderr)
	f.Bind(fs)
	return fs, f
}

// metricsConfig checks the flags and returns the exporter's config.
func metricsConfig(f *metricsFlags) (exporter.Config, error) {
	var errs []error
	cfg := exporter.Config{Cluster: f.Cluster, ServerMaxAge: map[string]time.Duration{}}
	if err := jobapi.CheckListen(f.Listen); err != nil {
		errs = append(errs, flagErrorf(jobapi.FlagListen, ": %w", err))
	}
	if f.MaxAge != "" {
		d, err := jobapi.ParseMaxAge(f.MaxAge)
		if err != nil {
			errs = append(errs, flagErrorf(jobapi.FlagMaxAge, ": %w", err))
		}
		cfg.MaxAge = d
	}
	for _, s := range f.ServerMaxAges {
		server, d, err := jobapi.ParseServerMaxAge(s)
		if err != nil {
			errs = append(errs, flagErrorf(jobapi.FlagServerMaxAge, ": %w", err))
			continue
		}
		cfg.ServerMaxAge[server] = d
	}
	if len(errs) == 0 {
		errs = append(errs, cfg.Validate())
	}
	return cfg, errors.Join(errs...)
}

// metricsShutdown bounds the graceful stop of the exporter's server.
const metricsShutdown = 5 * time.Second

func cmdMetrics(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, f := newMetricsFlags(stderr)
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return code
	}
	f.Parsed(fs)
	ecfg, err := metricsConfig(f)
	if err != nil {
		return usageError(stderr, jobapi.KindMetrics, "%s", err)
	}
	cfg, err := config.Load(f.Config)
	if err != nil {
		fmt.Fprintf(stderr, "archiver: %s\n", err)
		return exitUsage
	}
	log := newLogger(f.LogFormat, stderr)
	// The catalog may be down at start: the exporter serves catalog_up 0
	// and connects again at each scrape.
	cat := &lazyCatalog{url: cfg.Database.URL, log: log}
	defer cat.close()
	e, err := exporter.New(cat, ecfg, log)
	if err != nil {
		return usageError(stderr, jobapi.KindMetrics, "%s", err)
	}
	l, err := net.Listen("tcp", f.Listen)
	if err != nil {
		log.Error("cannot listen", "address", f.Listen, "error", err)
		return exitFailed
	}
	srv := &http.Server{Handler: e.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 120 * time.Second, MaxHeaderBytes: 16 << 10}
	log.Info("serving the catalog's metrics", "address", l.Addr().String(), "cluster", ecfg.Cluster)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	select {
	case err := <-done:
		log.Error("serving failed", "error", err)
		return exitFailed
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), metricsShutdown)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("stopping the server", "error", err)
	}
	return exitOK
}
