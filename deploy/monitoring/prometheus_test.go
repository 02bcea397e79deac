package monitoring

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/worldbackup/worldbackup/internal/promtest"
)

// testMaxAge is the allowed age of the test's server: short, so that the
// stale alert fires within seconds of the backups stopping.
const testMaxAge = 15 * time.Second

// exporter is what the test's Prometheus scrapes: the worldbackup series of
// METRICS.md for one cluster, whose servers back up when the test says.
type exporter interface {
	Addr() string                       // host:port of /metrics
	Backup(t *testing.T, server string) // one successful backup run now
	Fail(t *testing.T, server string)   // one failed attempt now
}

// contractExporter serves the series METRICS.md names, from runs the test
// records, in the text exposition format: the contract the rules and the
// dashboard are written against.
type contractExporter struct {
	addr string
	mu   sync.Mutex
	srv  map[string]*serverState
}

type serverState struct {
	lastSuccess         time.Time
	lastOK              bool
	size, added, store  int64
	successes, failures int
	durations           []float64
}

func newContractExporter(t *testing.T, servers ...string) *contractExporter {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &contractExporter{addr: l.Addr().String(), srv: map[string]*serverState{}}
	for _, s := range servers {
		e.srv[s] = &serverState{lastOK: true}
	}
	hs := &http.Server{Handler: http.HandlerFunc(e.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(l) }()
	t.Cleanup(func() { _ = hs.Close() })
	return e
}

func (e *contractExporter) Addr() string { return e.addr }

func (e *contractExporter) Backup(t *testing.T, server string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.srv[server]
	s.lastSuccess, s.lastOK = time.Now(), true
	s.size, s.added = 4<<20, 1<<20
	s.store += s.added
	s.successes++
	s.durations = append(s.durations, 2.5)
}

func (e *contractExporter) Fail(t *testing.T, server string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.srv[server]
	s.lastOK = false
	s.failures++
}

var durationBuckets = []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600}

func (e *contractExporter) serve(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var b strings.Builder
	gauge := func(name, server string, v float64) {
		fmt.Fprintf(&b, "%s{cluster=\"test\",server=%q} %g\n", name, server, v)
	}
	fmt.Fprintln(&b, "worldbackup_exporter_catalog_up{cluster=\"test\"} 1")
	for name, s := range e.srv {
		ts := 0.0
		if !s.lastSuccess.IsZero() {
			ts = float64(s.lastSuccess.UnixMilli()) / 1000
		}
		gauge("worldbackup_backup_last_successful_timestamp_seconds", name, ts)
		gauge("worldbackup_backup_max_age_seconds", name, testMaxAge.Seconds())
		status := 0.0
		if s.lastOK {
			status = 1
		}
		gauge("worldbackup_backup_last_status", name, status)
		gauge("worldbackup_backup_last_size_bytes", name, float64(s.size))
		gauge("worldbackup_backup_last_added_bytes", name, float64(s.added))
		gauge("worldbackup_store_bytes", name, float64(s.store))
		gauge("worldbackup_backup_success_total", name, float64(s.successes))
		gauge("worldbackup_backup_failure_total", name, float64(s.failures))
		sum := 0.0
		for _, d := range s.durations {
			sum += d
		}
		for _, le := range durationBuckets {
			n := 0
			for _, d := range s.durations {
				if d <= le {
					n++
				}
			}
			fmt.Fprintf(&b, "worldbackup_backup_duration_seconds_bucket{cluster=\"test\",server=%q,le=\"%g\"} %d\n", name, le, n)
		}
		fmt.Fprintf(&b, "worldbackup_backup_duration_seconds_bucket{cluster=\"test\",server=%q,le=\"+Inf\"} %d\n", name, len(s.durations))
		gauge("worldbackup_backup_duration_seconds_sum", name, sum)
		gauge("worldbackup_backup_duration_seconds_count", name, float64(len(s.durations)))
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	_, _ = w.Write([]byte(b.String()))
}

// startPrometheus runs the real Prometheus scraping ex every second and
// evaluating the checked-in rules file every second.
func startPrometheus(t *testing.T, ex exporter) *promtest.Server {
	t.Helper()
	rules, err := filepath.Abs(FileRules)
	if err != nil {
		t.Fatal(err)
	}
	return promtest.Start(t, promtest.Config{
		Job:       DefaultExporterJob,
		Targets:   []string{ex.Addr()},
		RuleFiles: []string{rules},
	})
}

// waitFor polls cond every 500ms until it returns true or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(d)
	var lastErr error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok {
			return
		}
		lastErr = err
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
	t.Fatalf("%s: not within %v (last error: %v)", what, d, lastErr)
}

func alertState(ctx context.Context, p *promtest.Server, name, server string) (string, error) {
	alerts, err := p.Alerts(ctx)
	if err != nil {
		return "", err
	}
	for _, a := range alerts {
		if a.Labels["alertname"] == name && a.Labels["server"] == server {
			return a.State, nil
		}
	}
	return "inactive", nil
}

// TestStaleFiresInPrometheus: the real Prometheus scrapes the exporter
// while backups run, and WorldBackupStale goes from inactive to firing
// through /api/v1/alerts once they stop; every dashboard query parses and
// returns series.
func TestStaleFiresInPrometheus(t *testing.T) {
	ex := newContractExporter(t, "survival", "creative")
	p := startPrometheus(t, ex)
	ctx := t.Context()

	// Backups run: one every second for a few scrapes, and one failure of
	// creative between two of its successes.
	ex.Backup(t, "creative")
	for i := range 5 {
		ex.Backup(t, "survival")
		if i == 2 {
			ex.Fail(t, "creative")
		}
		if i == 3 {
			ex.Backup(t, "creative")
		}
		time.Sleep(time.Second)
	}
	waitFor(t, 20*time.Second, "Prometheus scraped a success of survival", func() (bool, error) {
		v, err := p.Query(ctx, `time() - worldbackup_backup_last_successful_timestamp_seconds{server="survival"} < 10`)
		return err == nil && len(v) == 1, err
	})
	waitFor(t, 20*time.Second, "the rules were evaluated and are healthy", func() (bool, error) {
		rules, err := p.Rules(ctx)
		if err != nil || len(rules) == 0 {
			return false, err
		}
		for _, r := range rules {
			if r.Health != "ok" {
				return false, fmt.Errorf("rule %s: health %s: %s", r.Name, r.Health, r.Error)
			}
		}
		return true, nil
	})
	if st, err := alertState(ctx, p, AlertStale, "survival"); err != nil || st != "inactive" {
		t.Fatalf("%s of survival while its backups run: %s (%v), want inactive", AlertStale, st, err)
	}

	t.Run("every dashboard query parses and returns series", func(t *testing.T) {
		b, err := os.ReadFile(FileDashboard)
		if err != nil {
			t.Fatal(err)
		}
		titles, exprs := dashboardTargets(t, b)
		for _, title := range titles {
			for _, e := range exprs[title] {
				q := grafanaVars.Replace(e)
				if err := p.Parse(ctx, q); err != nil {
					t.Errorf("panel %q: %q does not parse: %v", title, q, err)
					continue
				}
				v, err := p.Query(ctx, q)
				if err != nil || len(v) == 0 {
					t.Errorf("panel %q: %q returned %d series (%v)", title, q, len(v), err)
				}
			}
		}
		for _, q := range dashboardVariableQueries(t, b) {
			if v, err := p.Query(ctx, q); err != nil || len(v) == 0 {
				t.Errorf("variable query over %q returned %d series (%v)", q, len(v), err)
			}
		}
	})

	// The backups stop: survival's newest success ages past its max age.
	stopped := time.Now()
	waitFor(t, testMaxAge+45*time.Second, AlertStale+" of survival firing", func() (bool, error) {
		st, err := alertState(ctx, p, AlertStale, "survival")
		return st == "firing", err
	})
	if since := time.Since(stopped); since < testMaxAge-2*time.Second {
		t.Errorf("%s fired %v after the backups stopped, before the max age %v", AlertStale, since, testMaxAge)
	}
	if st, err := alertState(ctx, p, AlertFailed, "creative"); err != nil || st != "firing" {
		t.Errorf("%s of creative after its failed attempt: %s (%v), want firing", AlertFailed, st, err)
	}
}

// grafanaVars replaces the dashboard's variables by what Grafana sends for
// "All".
var grafanaVars = strings.NewReplacer("$cluster", ".*", "$server", ".*")

var labelValuesRe = regexp.MustCompile(`^label_values\((.*), *[a-z_]+\)$`)

// dashboardVariableQueries returns the series selectors of the dashboard's
// label_values variables.
func dashboardVariableQueries(t *testing.T, b []byte) []string {
	t.Helper()
	var d struct {
		Templating struct {
			List []struct {
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(string)
		m := labelValuesRe.FindStringSubmatch(q)
		if m == nil {
			t.Errorf("variable query %v is not label_values(SELECTOR, LABEL)", v.Query)
			continue
		}
		out = append(out, grafanaVars.Replace(m[1]))
	}
	if len(out) == 0 {
		t.Error("the dashboard has no label_values variables")
	}
	return out
}
