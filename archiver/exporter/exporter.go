// Package exporter serves the backup catalog as Prometheus metrics
// (/metrics) and as a status page (/): `archiver metrics`.
//
// Everything is derived from the catalog, never from the Jobs: a server
// whose backup pod was deleted or whose CronJob never started a Job shows
// as stale, because its newest successful run grows old; a server retired
// with archiver retire (catalog.DB.RetiredServers) has no series until it
// records again, unless the config names it. Each scrape (or
// page view) re-reads the catalog, at most once per Config.MinRefresh and
// bounded by Config.Timeout; the reads are bounded (catalog.MaxServers, the
// chart's runs, the shown failures, eventBatch rows of new events) and need
// only SELECT.
//
// The counters (runs, failed attempts, prunes and what they deleted and
// freed) and the duration histogram count the rows the exporter has seen:
// the rows inserted after the highest ID it read (IDs are bigserial), so
// they never go down when a prune deletes rows. At start they count the rows the catalog holds. The gauges are
// the catalog's state at the last read; when a read fails they keep the
// last good state and worldbackup_exporter_catalog_up is 0.
package exporter

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/worldbackup/worldbackup/archiver/catalog"
	"github.com/worldbackup/worldbackup/jobapi"
)

// Catalog is what the exporter reads (catalog.DB).
type Catalog interface {
	RunsAfter(ctx context.Context, afterID int64, limit int) ([]catalog.Event, error)
	FailuresAfter(ctx context.Context, afterID int64, limit int) ([]catalog.Event, error)
	PrunesAfter(ctx context.Context, afterID int64, limit int) ([]catalog.PruneEvent, error)
	Overview(ctx context.Context, now time.Time, runs, failures int, leaveOut []string) ([]catalog.ServerOverview, error)
	RetiredServers(ctx context.Context) (map[string]time.Time, error)
}

var _ Catalog = (*catalog.DB)(nil)

// Config configures an Exporter.
type Config struct {
	// Cluster is the cluster label of every series.
	Cluster string
	// MaxAge is every server's allowed age of its newest successful run;
	// 0: none configured (no max_age series; the page judges by
	// jobapi.DefaultMaxAge).
	MaxAge time.Duration
	// ServerMaxAge is the allowed age per server, over MaxAge; a server
	// named here is expected, and shown, before it has any run.
	ServerMaxAge map[string]time.Duration
	// MinRefresh is the least time between two reads of the catalog;
	// default 5s.
	MinRefresh time.Duration
	// Timeout bounds one read of the catalog; default 15s.
	Timeout time.Duration
	// ChartRuns is how many of a server's newest runs the page charts;
	// default 20.
	ChartRuns int
	// ShownFailures is how many of a server's newest failed attempts the
	// page lists; default 5.
	ShownFailures int
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Defaults of Config.
const (
	DefaultMinRefresh    = 5 * time.Second
	DefaultTimeout       = 15 * time.Second
	DefaultChartRuns     = 20
	DefaultShownFailures = 5
)

func (c Config) withDefaults() Config {
	if c.MinRefresh <= 0 {
		c.MinRefresh = DefaultMinRefresh
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.ChartRuns <= 0 {
		c.ChartRuns = DefaultChartRuns
	}
	if c.ShownFailures <= 0 {
		c.ShownFailures = DefaultShownFailures
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate checks c.
func (c Config) Validate() error {
	var errs []error
	if c.MaxAge < 0 {
		errs = append(errs, errors.New("max age must not be negative"))
	}
	for s, d := range c.ServerMaxAge {
		if err := jobapi.CheckServer(s); err != nil {
			errs = append(errs, fmt.Errorf("max age of %q: %w", s, err))
		}
		if d <= 0 {
			errs = append(errs, fmt.Errorf("max age of %q must be positive", s))
		}
	}
	return errors.Join(errs...)
}

// maxAge returns server's configured max age and whether one is.
func (c Config) maxAge(server string) (time.Duration, bool) {
	if d, ok := c.ServerMaxAge[server]; ok {
		return d, true
	}
	return c.MaxAge, c.MaxAge > 0
}

// DurationBuckets are the buckets of worldbackup_backup_duration_seconds.
var DurationBuckets = []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600}

// eventBatch bounds one read of new runs or failed attempts; maxBatches
// bounds the reads of one refresh (the rest wait for the next).
const (
	eventBatch = 10000
	maxBatches = 10
)

// Exporter reads the catalog and serves it.
type Exporter struct {
	cat Catalog
	cfg Config
	log hclog.Logger
	reg *prometheus.Registry

	success, failure *prometheus.CounterVec
	// prunes, pruned and freed count the recorded prunes, the runs they
	// deleted and the bytes they freed.
	prunes, pruned, freed *prometheus.CounterVec
	duration              *prometheus.HistogramVec
	up                    prometheus.Gauge
	gauges                gauges

	refreshMu   sync.Mutex // one refresh at a time
	lastAttempt time.Time  // under refreshMu
	lastErr     error      // under refreshMu
	lastRun     int64      // highest world_backups id counted, under refreshMu
	lastFail    int64      // highest world_backup_failures id counted, under refreshMu
	lastPrune   int64      // highest world_prunes id counted, under refreshMu
	// retiredDenied: the role may not read the retired servers (warned
	// once), under refreshMu.
	retiredDenied bool

	mu   sync.Mutex // guards snap
	snap snapshot
}

// snapshot is the catalog's state at the last good read.
type snapshot struct {
	servers []catalog.ServerOverview // by name, with the configured ones that have no row
	readAt  time.Time                // zero: never read
	err     error                    // the last read's error, nil when it succeeded
}

// New returns an Exporter of cat.
func New(cat Catalog, cfg Config, log hclog.Logger) (*Exporter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if log == nil {
		log = hclog.NewNullLogger()
	}
	cl := prometheus.Labels{"cluster": cfg.Cluster}
	e := &Exporter{cat: cat, cfg: cfg, log: log.Named("exporter"), reg: prometheus.NewRegistry()}
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, ConstLabels: cl, Help: help}, []string{"server"})
	}
	e.success = counter("worldbackup_backup_success_total", "Successful backup runs recorded in the catalog (counted as the exporter sees their rows).")
	e.failure = counter("worldbackup_backup_failure_total", "Failed backup attempts recorded in the catalog.")
	e.prunes = counter("worldbackup_prune_total", "Prunes of the server that ran for real, recorded in the catalog.")
	e.pruned = counter("worldbackup_prune_deleted_runs_total", "Runs of the server those prunes deleted.")
	e.freed = counter("worldbackup_prune_freed_bytes_total", "Bytes those prunes freed in the store (archives, orphans, packs).")
	e.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "worldbackup_backup_duration_seconds", ConstLabels: cl, Buckets: DurationBuckets,
		Help: "Duration of successful backup runs (finished_at - started_at).",
	}, []string{"server"})
	e.up = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "worldbackup_exporter_catalog_up", ConstLabels: cl,
		Help: "1 if the exporter's last read of the catalog succeeded.",
	})
	e.gauges = newGauges(e, cl)
	e.reg.MustRegister(e.success, e.failure, e.prunes, e.pruned, e.freed, e.duration, e.up, e.gauges,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return e, nil
}

// Registry returns the exporter's registry.
func (e *Exporter) Registry() *prometheus.Registry { return e.reg }

// Refresh reads the catalog, unless it did less than MinRefresh ago; it
// returns the last read's error. The read outlives ctx's cancellation (it
// keeps ctx's values and is bounded by Timeout only): a scraper or browser
// that gives up mid-read must not make the catalog look down to the next
// scrapes, which get this read's result within MinRefresh.
func (e *Exporter) Refresh(ctx context.Context) error {
	e.refreshMu.Lock()
	defer e.refreshMu.Unlock()
	now := e.cfg.Now()
	if !e.lastAttempt.IsZero() && now.Sub(e.lastAttempt) < e.cfg.MinRefresh {
		return e.lastErr
	}
	e.lastAttempt = now
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.Timeout)
	defer cancel()
	err := e.read(ctx, now)
	if err != nil {
		e.up.Set(0)
		if e.lastErr == nil || e.lastErr.Error() != err.Error() {
			e.log.Error("reading the catalog failed", "error", err)
		}
	} else {
		e.up.Set(1)
		if e.lastErr != nil {
			e.log.Info("reading the catalog again")
		}
	}
	e.lastErr = err
	e.mu.Lock()
	e.snap.err = err
	e.mu.Unlock()
	return err
}

// read counts the new rows, then reads the overview.
func (e *Exporter) read(ctx context.Context, now time.Time) error {
	err := drain(ctx, e.cat.RunsAfter, &e.lastRun, func(ev catalog.Event) int64 {
		e.success.WithLabelValues(ev.Server).Inc()
		e.duration.WithLabelValues(ev.Server).Observe(ev.DurationSeconds)
		return ev.ID
	})
	if err == nil {
		err = drain(ctx, e.cat.FailuresAfter, &e.lastFail, func(ev catalog.Event) int64 {
			e.failure.WithLabelValues(ev.Server).Inc()
			return ev.ID
		})
	}
	if err == nil {
		err = drain(ctx, e.cat.PrunesAfter, &e.lastPrune, func(ev catalog.PruneEvent) int64 {
			e.prunes.WithLabelValues(ev.Server).Inc()
			e.pruned.WithLabelValues(ev.Server).Add(float64(ev.RunsDeleted))
			e.freed.WithLabelValues(ev.Server).Add(float64(ev.BytesFreed))
			return ev.ID
		})
	}
	if err != nil {
		return err
	}
	// The retired servers are left out, series and all, unless configured
	// (then expected).
	retired, err := e.retired(ctx)
	if err != nil {
		return err
	}
	var leaveOut []string
	for s := range retired {
		if _, configured := e.cfg.ServerMaxAge[s]; !configured {
			leaveOut = append(leaveOut, s)
		}
	}
	servers, err := e.cat.Overview(ctx, now, e.cfg.ChartRuns, e.cfg.ShownFailures, leaveOut)
	if err != nil {
		return err
	}
	for _, s := range leaveOut {
		for _, c := range []*prometheus.CounterVec{e.success, e.failure, e.prunes, e.pruned, e.freed} {
			c.DeleteLabelValues(s)
		}
		e.duration.DeleteLabelValues(s)
	}
	// The configured servers without a row are expected: shown, stale.
	have := map[string]bool{}
	for _, s := range servers {
		have[s.Server] = true
	}
	for _, s := range slices.Sorted(maps.Keys(e.cfg.ServerMaxAge)) {
		if !have[s] {
			servers = append(servers, catalog.ServerOverview{Server: s})
		}
	}
	slices.SortFunc(servers, func(a, b catalog.ServerOverview) int {
		return cmp.Compare(a.Server, b.Server)
	})
	// Every known server has every counter, from 0: a first failure (or
	// prune) is an increase.
	for _, s := range servers {
		for _, c := range []*prometheus.CounterVec{e.success, e.failure, e.prunes, e.pruned, e.freed} {
			c.WithLabelValues(s.Server)
		}
	}
	e.mu.Lock()
	e.snap = snapshot{servers: servers, readAt: now}
	e.mu.Unlock()
	return nil
}

// retired returns the retired servers (catalog.DB.RetiredServers); a role
// that may not read them gets none, with a warning the first time.
func (e *Exporter) retired(ctx context.Context) (map[string]time.Time, error) {
	retired, err := e.cat.RetiredServers(ctx)
	if errors.Is(err, catalog.ErrNotPermitted) {
		if !e.retiredDenied {
			e.log.Warn("retired servers are shown and alerted on as the others", "error", err)
			e.retiredDenied = true
		}
		return nil, nil
	}
	e.retiredDenied = false
	return retired, err
}

// drain counts the rows after *last that after returns, a batch of
// eventBatch at a time and at most maxBatches of them (the rest wait for the
// next refresh), each with count, which returns the row's ID; *last is the
// highest ID counted.
func drain[E any](ctx context.Context, after func(context.Context, int64, int) ([]E, error), last *int64, count func(E) int64) error {
	for range maxBatches {
		evs, err := after(ctx, *last, eventBatch)
		if err != nil {
			return err
		}
		for _, ev := range evs {
			*last = count(ev)
		}
		if len(evs) < eventBatch {
			return nil
		}
	}
	return nil
}

// current returns the snapshot.
func (e *Exporter) current() snapshot {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.snap
}

// Handler serves /metrics (read the catalog, then the metrics), / (the
// status page) and /healthz (200 while the process serves).
func (e *Exporter) Handler() http.Handler {
	mux := http.NewServeMux()
	metrics := promhttp.HandlerFor(e.reg, promhttp.HandlerOpts{ErrorLog: nil, Timeout: e.cfg.Timeout + 5*time.Second})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		_ = e.Refresh(r.Context()) // a failure is catalog_up 0
		metrics.ServeHTTP(w, r)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /{$}", e.servePage)
	return mux
}

// gauges is the collector of the per-server gauges, from the snapshot.
type gauges struct {
	e                                          *Exporter
	lastSuccess, lastStatus, lastSize, lastAdd *prometheus.Desc
	maxAge, storeBytes, archivesMissing        *prometheus.Desc
}

func newGauges(e *Exporter, cl prometheus.Labels) gauges {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, []string{"server"}, cl)
	}
	return gauges{
		e: e,
		lastSuccess: d("worldbackup_backup_last_successful_timestamp_seconds",
			"finished_at of the server's newest successful run, as a Unix time; 0 when it has none."),
		lastStatus: d("worldbackup_backup_last_status", "1 if the server's newest attempt succeeded, 0 if it failed."),
		lastSize:   d("worldbackup_backup_last_size_bytes", "Size (the tar stream's) of the server's newest successful run."),
		lastAdd:    d("worldbackup_backup_last_added_bytes", "Bytes the server's newest successful run added to the store."),
		maxAge:     d("worldbackup_backup_max_age_seconds", "The server's allowed age of its newest successful run, from the exporter's config."),
		storeBytes: d("worldbackup_store_bytes", "Sum of the added bytes of the server's runs in the catalog: what it holds in the store."),
		archivesMissing: d("worldbackup_archives_missing",
			"Runs of the server whose archive the last prune found missing from the store: nothing can be restored from them, and they are not counted as successful runs."),
	}
}

func (g gauges) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{g.lastSuccess, g.lastStatus, g.lastSize, g.lastAdd, g.maxAge, g.storeBytes, g.archivesMissing} {
		ch <- d
	}
}

func (g gauges) Collect(ch chan<- prometheus.Metric) {
	snap := g.e.current()
	gauge := func(d *prometheus.Desc, v float64, server string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, server)
	}
	for _, s := range snap.servers {
		newest, ok := newestRun(s)
		if ok {
			gauge(g.lastSuccess, unixSeconds(newest.FinishedAt), s.Server)
			gauge(g.lastSize, float64(newest.SizeBytes), s.Server)
			if newest.AddedBytes != nil {
				gauge(g.lastAdd, float64(*newest.AddedBytes), s.Server)
			}
		} else {
			gauge(g.lastSuccess, 0, s.Server)
		}
		if st, ok := lastStatus(s); ok {
			gauge(g.lastStatus, st, s.Server)
		}
		if d, ok := g.e.cfg.maxAge(s.Server); ok {
			gauge(g.maxAge, d.Seconds(), s.Server)
		}
		gauge(g.storeBytes, float64(s.StoreBytes), s.Server)
		gauge(g.archivesMissing, float64(s.ArchivesMissing), s.Server)
	}
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// newestRun returns the server's newest successful run whose archive no
// prune found missing (catalog.ServerOverview.Runs).
func newestRun(s catalog.ServerOverview) (catalog.Record, bool) {
	if len(s.Runs) == 0 {
		return catalog.Record{}, false
	}
	return s.Runs[0], true
}

// lastStatus is 1 when the server's newest attempt succeeded, 0 when it
// failed; false when it has none.
func lastStatus(s catalog.ServerOverview) (float64, bool) {
	run, hasRun := newestRun(s)
	switch {
	case !hasRun && len(s.Failures) == 0:
		return 0, false
	case !hasRun:
		return 0, true
	case len(s.Failures) == 0 || !run.FinishedAt.Before(s.Failures[0].FinishedAt):
		return 1, true
	}
	return 0, true
}

//go:embed readonly_role.sql
var readOnlyRoleSQL string

// ReadOnlyRoleSQL returns the script that creates the exporter's read-only
// role (readonly_role.sql, which the README quotes) for role, password and
// database.
func ReadOnlyRoleSQL(role, password, database string) string {
	r := strings.NewReplacer("worldbackup_metrics", pgx.Identifier{role}.Sanitize(),
		"'change-me'", "'"+strings.ReplaceAll(password, "'", "''")+"'",
		"DATABASE felis", "DATABASE "+pgx.Identifier{database}.Sanitize())
	return r.Replace(readOnlyRoleSQL)
}
