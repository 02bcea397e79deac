package exporter

import (
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"

	"github.com/worldbackup/worldbackup/archiver/catalog"
	"github.com/worldbackup/worldbackup/internal/pgtest"
	"github.com/worldbackup/worldbackup/internal/promscrape"
	"github.com/worldbackup/worldbackup/jobapi"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// fixture is a migrated catalog with runs and failed attempts.
type fixture struct {
	url string
	db  *catalog.DB
	now time.Time
}

func openDB(t *testing.T, url string) *catalog.DB {
	t.Helper()
	db, err := catalog.OpenWith(t.Context(), url, hclog.NewNullLogger(), catalog.Timeouts{Connect: 2 * time.Second, Statement: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{url: pgtest.URL(t), now: time.Now()}
	f.db = openDB(t, f.url)
	if _, err := f.db.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return f
}

// run records a successful run that finished ago before now and took d.
func (f *fixture) run(t *testing.T, server, runID string, ago, d time.Duration, size, added int64) {
	t.Helper()
	fin := f.now.Add(-ago)
	_, err := f.db.Insert(t.Context(), catalog.Record{RunID: runID, Server: server,
		ArchiveRef: "/backups/" + server + "/" + runID + ".tar.zst", SizeBytes: size, AddedBytes: &added,
		SHA256: strings.Repeat("c", 64), Compression: "zstd", StartedAt: fin.Add(-d), FinishedAt: fin})
	if err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) fail(t *testing.T, server, runID string, ago time.Duration, reason string) {
	t.Helper()
	fin := f.now.Add(-ago)
	if err := f.db.RecordFailure(t.Context(), catalog.Failure{RunID: runID, Server: server,
		StartedAt: fin.Add(-time.Minute), FinishedAt: fin, Reason: reason}); err != nil {
		t.Fatal(err)
	}
}

// serve starts an exporter of cat on a loopback HTTP server.
func serve(t *testing.T, cat Catalog, cfg Config) (*Exporter, string) {
	t.Helper()
	if cfg.MinRefresh == 0 {
		cfg.MinRefresh = time.Nanosecond
	}
	e, err := New(cat, cfg, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(e.Handler())
	t.Cleanup(srv.Close)
	return e, srv.URL
}

func scrape(t *testing.T, base string) promscrape.Families {
	t.Helper()
	fams, err := promscrape.Scrape(t.Context(), base+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// getPage returns the status page of the exporter at base.
func getPage(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// want checks the value of one series.
func want(t *testing.T, fams promscrape.Families, name string, labels map[string]string, v float64) {
	t.Helper()
	got, ok := fams.Value(name, labels)
	if !ok {
		t.Errorf("%s%v: no single series (have %d)", name, labels, len(fams.Series(name, labels)))
		return
	}
	if math.Abs(got-v) > 1e-3 {
		t.Errorf("%s%v = %v, want %v", name, labels, got, v)
	}
}

func absent(t *testing.T, fams promscrape.Families, name string, labels map[string]string) {
	t.Helper()
	if s := fams.Series(name, labels); len(s) != 0 {
		t.Errorf("%s%v: %d series, want none", name, labels, len(s))
	}
}

// TestMetricsFromCatalog: every agreed series, from a real catalog over a
// real scrape; the counters stay monotone when a prune deletes rows.
func TestMetricsFromCatalog(t *testing.T) {
	f := newFixture(t)
	f.run(t, "survival", "s-1", 26*time.Hour, 40*time.Second, 1000, 1000)
	f.fail(t, "survival", "s-2", 2*time.Hour+time.Minute, "quiescing the game server: connection refused")
	f.run(t, "survival", "s-2", 2*time.Hour, 3*time.Second, 1200, 300)
	f.run(t, "creative", "c-1", 50*time.Hour, 700*time.Second, 5000, 5000)
	f.fail(t, "creative", "c-2", time.Hour, "disk full")
	_, base := serve(t, f.db, Config{Cluster: "eu-1", MaxAge: 36 * time.Hour,
		ServerMaxAge: map[string]time.Duration{"creative": 26 * time.Hour, "lobby": 2 * time.Hour}})

	fams := scrape(t, base)
	s := map[string]string{"cluster": "eu-1", "server": "survival"}
	c := map[string]string{"cluster": "eu-1", "server": "creative"}
	l := map[string]string{"cluster": "eu-1", "server": "lobby"}
	want(t, fams, "worldbackup_exporter_catalog_up", map[string]string{"cluster": "eu-1"}, 1)
	want(t, fams, "worldbackup_backup_last_successful_timestamp_seconds", s, unixSeconds(f.now.Add(-2*time.Hour)))
	want(t, fams, "worldbackup_backup_last_successful_timestamp_seconds", l, 0)
	want(t, fams, "worldbackup_backup_last_status", s, 1)
	want(t, fams, "worldbackup_backup_last_status", c, 0)
	absent(t, fams, "worldbackup_backup_last_status", l)
	want(t, fams, "worldbackup_backup_last_size_bytes", s, 1200)
	want(t, fams, "worldbackup_backup_last_added_bytes", s, 300)
	want(t, fams, "worldbackup_backup_success_total", s, 2)
	want(t, fams, "worldbackup_backup_success_total", c, 1)
	want(t, fams, "worldbackup_backup_failure_total", s, 1)
	want(t, fams, "worldbackup_backup_failure_total", l, 0)
	want(t, fams, "worldbackup_prune_total", s, 0)
	want(t, fams, "worldbackup_backup_max_age_seconds", s, (36 * time.Hour).Seconds())
	want(t, fams, "worldbackup_backup_max_age_seconds", c, (26 * time.Hour).Seconds())
	want(t, fams, "worldbackup_store_bytes", s, 1300)
	want(t, fams, "worldbackup_store_bytes", l, 0)
	want(t, fams, "worldbackup_backup_duration_seconds", s, 2)
	h := fams.Series("worldbackup_backup_duration_seconds", c)[0].GetHistogram()
	if h.GetSampleSum() < 699 || h.GetSampleSum() > 701 {
		t.Errorf("creative's duration sum = %v, want 700", h.GetSampleSum())
	}
	for _, b := range h.GetBucket() {
		if wantN := map[bool]uint64{true: 1, false: 0}[b.GetUpperBound() >= 700]; b.GetCumulativeCount() != wantN {
			t.Errorf("creative's bucket le=%v = %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), wantN)
		}
	}

	// A prune deletes survival's old run; a new run and a failure come.
	if _, err := f.db.PruneServer(t.Context(), "survival", func([]catalog.Record) ([]string, error) { return []string{"s-1"}, nil }); err != nil {
		t.Fatal(err)
	}
	if err := f.db.RecordPrune(t.Context(), catalog.PruneRecord{Server: "survival", StartedAt: f.now, FinishedAt: f.now,
		RunsDeleted: 1, BytesFreed: 1000}); err != nil {
		t.Fatal(err)
	}
	f.run(t, "survival", "s-3", time.Minute, 2*time.Second, 1300, 100)
	f.fail(t, "survival", "s-4", 0, "store unreachable")
	fams = scrape(t, base)
	want(t, fams, "worldbackup_prune_total", s, 1)
	want(t, fams, "worldbackup_prune_deleted_runs_total", s, 1)
	want(t, fams, "worldbackup_prune_freed_bytes_total", s, 1000)
	want(t, fams, "worldbackup_prune_total", c, 0)
	want(t, fams, "worldbackup_backup_success_total", s, 3)
	want(t, fams, "worldbackup_backup_failure_total", s, 2)
	want(t, fams, "worldbackup_backup_duration_seconds", s, 3)
	want(t, fams, "worldbackup_backup_last_status", s, 0)
	want(t, fams, "worldbackup_store_bytes", s, 400)
	want(t, fams, "worldbackup_backup_last_successful_timestamp_seconds", s, unixSeconds(f.now.Add(-time.Minute)))

	// A failure stamped a year ahead (a pod with a wrong clock), then a
	// success: the failure is in the future (catalog.FutureTolerance), as
	// a run would be, and does not hold last_status at 0; it still counts.
	f.fail(t, "creative", "c-3", -365*24*time.Hour, "a wrong clock")
	f.run(t, "creative", "c-4", time.Minute, time.Second, 6000, 100)
	fams = scrape(t, base)
	want(t, fams, "worldbackup_backup_last_status", c, 1)
	want(t, fams, "worldbackup_backup_failure_total", c, 2)
	// Within the tolerance a failure still counts as the newest attempt.
	f.fail(t, "creative", "c-5", -catalog.FutureTolerance/2, "a slightly fast clock")
	fams = scrape(t, base)
	want(t, fams, "worldbackup_backup_last_status", c, 0)
}

// TestRetiredServersLeftOut: a server retired with archiver retire has no
// series (so its stale alert ends) until it records again, unless the
// exporter's config names it; with a role that may not read the
// retirements, every server is shown and the catalog is up.
func TestRetiredServersLeftOut(t *testing.T) {
	f := newFixture(t)
	f.run(t, "survival", "s-1", time.Hour, time.Second, 10, 10)
	f.run(t, "lobby", "l-1", 30*24*time.Hour, time.Second, 10, 10)
	f.fail(t, "lobby", "l-2", 29*24*time.Hour, "disk full")
	f.run(t, "creative", "c-1", 30*24*time.Hour, time.Second, 10, 10)
	cfg := Config{Cluster: "eu-1", MaxAge: 26 * time.Hour, ServerMaxAge: map[string]time.Duration{"creative": 26 * time.Hour}}
	_, base := serve(t, f.db, cfg)
	s := map[string]string{"server": "survival"}
	l := map[string]string{"server": "lobby"}
	c := map[string]string{"server": "creative"}
	lobbySeries := []string{"worldbackup_backup_last_successful_timestamp_seconds", "worldbackup_backup_last_status",
		"worldbackup_backup_success_total", "worldbackup_backup_failure_total", "worldbackup_backup_duration_seconds",
		"worldbackup_store_bytes", "worldbackup_backup_max_age_seconds", "worldbackup_prune_total"}

	fams := scrape(t, base)
	want(t, fams, "worldbackup_backup_success_total", l, 1)
	for _, server := range []string{"lobby", "creative"} {
		if _, err := f.db.Retire(t.Context(), server); err != nil {
			t.Fatal(err)
		}
	}
	fams = scrape(t, base)
	want(t, fams, "worldbackup_exporter_catalog_up", nil, 1)
	for _, name := range lobbySeries {
		absent(t, fams, name, l)
	}
	want(t, fams, "worldbackup_backup_success_total", s, 1)
	want(t, fams, "worldbackup_backup_success_total", c, 1) // configured: expected, shown
	if page := getPage(t, base); strings.Contains(page, "lobby") || !strings.Contains(page, "creative") {
		t.Errorf("the page names lobby or not creative:\n%s", page)
	}

	t.Run("back when it records again", func(t *testing.T) {
		f.fail(t, "lobby", "l-3", 0, "world not found")
		fams := scrape(t, base)
		want(t, fams, "worldbackup_backup_failure_total", l, 1)
		want(t, fams, "worldbackup_backup_last_status", l, 0)
		want(t, fams, "worldbackup_backup_last_successful_timestamp_seconds", l, unixSeconds(f.now.Add(-30*24*time.Hour)))
	})
	t.Run("a role that may not read the retirements", func(t *testing.T) {
		if _, err := f.db.Retire(t.Context(), "lobby"); err != nil {
			t.Fatal(err)
		}
		ro := pgtest.Role(t, f.url, func(role, password, database string) string {
			return strings.Replace(ReadOnlyRoleSQL(role, password, database), ", world_retired_servers", "", 1)
		})
		_, base := serve(t, openDB(t, ro), cfg)
		fams := scrape(t, base)
		want(t, fams, "worldbackup_exporter_catalog_up", nil, 1)
		want(t, fams, "worldbackup_backup_success_total", l, 1)
	})
}

// TestMetricsOfMissingArchives: a run whose archive a prune found missing
// is counted by worldbackup_archives_missing and by no gauge of the
// newest run, on /metrics and on the page; the counters keep it.
func TestMetricsOfMissingArchives(t *testing.T) {
	f := newFixture(t)
	f.run(t, "survival", "s-1", 3*time.Hour, time.Second, 1000, 1000)
	f.run(t, "survival", "s-2", time.Hour, time.Second, 1200, 300)
	f.run(t, "creative", "c-1", time.Hour, time.Second, 5000, 5000)
	_, base := serve(t, f.db, Config{Cluster: "eu-1"})
	s := map[string]string{"cluster": "eu-1", "server": "survival"}
	c := map[string]string{"cluster": "eu-1", "server": "creative"}
	page := func(t *testing.T) string { return getPage(t, base) }

	fams := scrape(t, base)
	want(t, fams, "worldbackup_archives_missing", s, 0)
	want(t, fams, "worldbackup_backup_last_successful_timestamp_seconds", s, unixSeconds(f.now.Add(-time.Hour)))
	if p := page(t); strings.Contains(p, "data-archives-missing") {
		t.Errorf("the page shows missing archives before any was found missing")
	}

	if err := f.db.MarkMissing(t.Context(), "survival", []string{"s-2"}, []string{"s-1"}, f.now); err != nil {
		t.Fatal(err)
	}
	fams = scrape(t, base)
	want(t, fams, "worldbackup_archives_missing", s, 1)
	want(t, fams, "worldbackup_archives_missing", c, 0)
	want(t, fams, "worldbackup_backup_last_successful_timestamp_seconds", s, unixSeconds(f.now.Add(-3*time.Hour)))
	want(t, fams, "worldbackup_backup_last_size_bytes", s, 1000)
	want(t, fams, "worldbackup_backup_last_status", s, 1)
	want(t, fams, "worldbackup_backup_success_total", s, 2)
	want(t, fams, "worldbackup_store_bytes", s, 1300)
	p := page(t)
	if !strings.Contains(p, `data-archives-missing="1"`) || !strings.Contains(p, "s-1") || strings.Contains(p, "s-2") {
		t.Errorf("page: want survival's 1 missing archive shown, s-1 its newest run and s-2 nowhere:\n%s", p)
	}

	// Every archive gone: no successful run, as for a server that never had one.
	if err := f.db.MarkMissing(t.Context(), "survival", []string{"s-1", "s-2"}, nil, f.now); err != nil {
		t.Fatal(err)
	}
	fams = scrape(t, base)
	want(t, fams, "worldbackup_archives_missing", s, 2)
	want(t, fams, "worldbackup_backup_last_successful_timestamp_seconds", s, 0)
	absent(t, fams, "worldbackup_backup_last_size_bytes", s)
}

// TestMetricsWithoutMaxAge: no max age configured: no max_age series.
func TestMetricsWithoutMaxAge(t *testing.T) {
	f := newFixture(t)
	f.run(t, "survival", "s-1", time.Hour, time.Second, 1, 1)
	_, base := serve(t, f.db, Config{})
	fams := scrape(t, base)
	absent(t, fams, "worldbackup_backup_max_age_seconds", nil)
	want(t, fams, "worldbackup_backup_success_total", map[string]string{"server": "survival"}, 1)
}

// TestReadOnlyRole: the exporter works with the documented role, which can
// SELECT the four tables and write nothing.
func TestReadOnlyRole(t *testing.T) {
	f := newFixture(t)
	f.run(t, "survival", "s-1", time.Hour, time.Second, 10, 10)
	f.fail(t, "survival", "s-2", 0, "boom")
	ro := pgtest.Role(t, f.url, ReadOnlyRoleSQL)
	_, base := serve(t, openDB(t, ro), Config{Cluster: "c"})
	fams := scrape(t, base)
	s := map[string]string{"server": "survival"}
	want(t, fams, "worldbackup_exporter_catalog_up", nil, 1)
	want(t, fams, "worldbackup_backup_success_total", s, 1)
	want(t, fams, "worldbackup_backup_failure_total", s, 1)
	want(t, fams, "worldbackup_backup_last_status", s, 0)
	want(t, fams, "worldbackup_prune_total", s, 0)

	conn, err := pgx.Connect(t.Context(), ro)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, sql := range []string{
		`DELETE FROM world_backups`,
		`INSERT INTO world_backup_failures (run_id, server, started_at, finished_at, reason) VALUES ('x', 'x', now(), now(), 'x')`,
		`SELECT count(*) FROM schema_migrations`,
	} {
		if _, err := conn.Exec(t.Context(), sql); err == nil {
			t.Errorf("the read-only role could run %q", sql)
		}
	}
}

// TestCatalogDown: a catalog that stops answering gives catalog_up 0 within
// the timeout and keeps the last good gauges; it comes back by itself.
func TestCatalogDown(t *testing.T) {
	f := newFixture(t)
	f.run(t, "survival", "s-1", time.Hour, time.Second, 10, 10)
	proxy := pgtest.NewProxy(t, pgtest.Target(t, f.url))
	db := openDB(t, proxy.URL(t, f.url))
	_, base := serve(t, db, Config{Timeout: time.Second})
	s := map[string]string{"server": "survival"}
	want(t, scrape(t, base), "worldbackup_exporter_catalog_up", nil, 1)

	proxy.Blackhole()
	fams := scrape(t, base)
	want(t, fams, "worldbackup_exporter_catalog_up", nil, 0)
	want(t, fams, "worldbackup_backup_success_total", s, 1)
	want(t, fams, "worldbackup_backup_last_successful_timestamp_seconds", s, unixSeconds(f.now.Add(-time.Hour)))

	proxy.Resume()
	deadline := time.Now().Add(20 * time.Second)
	for {
		v, _ := scrape(t, base).Value("worldbackup_exporter_catalog_up", nil)
		if v == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("catalog_up stayed 0 after the catalog came back")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestUnmigratedCatalog: a database without the tables: catalog_up 0, and
// the error says to migrate.
func TestUnmigratedCatalog(t *testing.T) {
	db := openDB(t, pgtest.URL(t))
	e, base := serve(t, db, Config{})
	want(t, scrape(t, base), "worldbackup_exporter_catalog_up", nil, 0)
	if err := e.Refresh(t.Context()); err == nil || !strings.Contains(err.Error(), "archiver migrate") {
		t.Errorf("Refresh on an unmigrated catalog: %v, want it to say archiver migrate", err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"empty", Config{}, true},
		{"max ages", Config{MaxAge: time.Hour, ServerMaxAge: map[string]time.Duration{"survival": time.Hour}}, true},
		{"bad server", Config{ServerMaxAge: map[string]time.Duration{"Survival": time.Hour}}, false},
		{"zero age", Config{ServerMaxAge: map[string]time.Duration{"survival": 0}}, false},
		{"negative", Config{MaxAge: -time.Hour}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.cfg.Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate = %v, want ok %v", err, tt.ok)
			}
		})
	}
}

// slowCatalog is a catalog whose every read takes delay first (or ends
// with its context, as a database's read does).
type slowCatalog struct {
	Catalog
	delay time.Duration
}

func (c slowCatalog) wait(ctx context.Context) error {
	select {
	case <-time.After(c.delay):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c slowCatalog) RunsAfter(ctx context.Context, afterID int64, limit int) ([]catalog.Event, error) {
	if err := c.wait(ctx); err != nil {
		return nil, err
	}
	return c.Catalog.RunsAfter(ctx, afterID, limit)
}

func (c slowCatalog) Overview(ctx context.Context, now time.Time, runs, failures int, leaveOut []string) ([]catalog.ServerOverview, error) {
	if err := c.wait(ctx); err != nil {
		return nil, err
	}
	return c.Catalog.Overview(ctx, now, runs, failures, leaveOut)
}

// TestAbortedScrape: a client that gives up mid-read does not make the
// catalog look down, neither to the next scrape (within MinRefresh) nor to
// the status page.
func TestAbortedScrape(t *testing.T) {
	f := newFixture(t)
	f.run(t, "survival", "s-1", time.Hour, time.Second, 10, 10)
	_, base := serve(t, slowCatalog{Catalog: f.db, delay: 300 * time.Millisecond}, Config{MinRefresh: time.Minute})

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := promscrape.Scrape(ctx, base+"/metrics"); err == nil {
		t.Fatal("the impatient scrape succeeded; the catalog is not slow enough")
	}
	fams := scrape(t, base)
	want(t, fams, "worldbackup_exporter_catalog_up", nil, 1)
	want(t, fams, "worldbackup_backup_success_total", map[string]string{"server": "survival"}, 1)
	resp, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("status page after an aborted scrape: %s, want 200", resp.Status)
	}
}

// TestReadOnlyRoleGrantsMetricsTables: the role script grants SELECT on
// exactly the tables jobapi.MetricsTables names, the list the help and
// the WorldMetrics description quote.
func TestReadOnlyRoleGrantsMetricsTables(t *testing.T) {
	if want := "GRANT SELECT ON " + jobapi.MetricsTables + " TO worldbackup_metrics;"; !strings.Contains(readOnlyRoleSQL, want) {
		t.Fatalf("readonly_role.sql lacks %q:\n%s", want, readOnlyRoleSQL)
	}
}
