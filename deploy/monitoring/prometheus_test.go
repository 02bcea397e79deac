package monitoring

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/worldbackup/worldbackup/internal/pgtest"
	"github.com/worldbackup/worldbackup/internal/promtest"
	"github.com/worldbackup/worldbackup/internal/worldgen"
)

// testMaxAge is the allowed age of the test's server: short, so that the
// stale alert fires within seconds of its backups stopping.
const testMaxAge = 30 * time.Second

func TestMain(m *testing.M) { pgtest.Main(m) }

// archiverBin builds the archiver once per test binary.
var archiverBin = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "monitoring-archiver-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "archiver")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/worldbackup/worldbackup/archiver/cmd/archiver").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("building the archiver: %v\n%s", err, out)
	}
	return bin, nil
})

// catalogEnv is a catalog on a real PostgreSQL, an archive root and the
// felis.toml that the archiver's backups and exporter read.
type catalogEnv struct {
	bin, config, root string
}

func newCatalogEnv(t *testing.T) *catalogEnv {
	t.Helper()
	bin, err := archiverBin()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	e := &catalogEnv{bin: bin, config: filepath.Join(dir, "felis.toml"), root: filepath.Join(dir, "backups")}
	if err := os.Mkdir(e.root, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("[database]\nurl = %q\n[archive]\nlocal_path = \"/nonexistent\"\n", pgtest.URL(t))
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return e
}

// backup runs `archiver backup` of world as server and returns its exit code.
func (e *catalogEnv) backup(t *testing.T, server, runID, world string) int {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), e.bin, "backup", "--server", server, "--run-id", runID,
		"--world", world, "--config", e.config, "--archive-root", e.root)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		t.Logf("archiver backup %s %s: exit %d: %s", server, runID, ee.ExitCode(), tail(out))
		return ee.ExitCode()
	}
	t.Fatalf("archiver backup: %v", err)
	return -1
}

// exporter starts `archiver metrics` with args on a free loopback port and
// returns its host:port once it listens; SIGTERM at cleanup.
func (e *catalogEnv) exporter(t *testing.T, args ...string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(e.bin, append([]string{"metrics", "--listen", addr, "--config", e.config}, args...)...)
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("archiver metrics log:\n%s", log.String())
		}
	})
	waitFor(t, 30*time.Second, "archiver metrics listening on "+addr, func() (bool, error) {
		select {
		case <-done:
			t.Fatalf("archiver metrics exited: %s", log.String())
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil, err
	})
	return addr
}

func tail(b []byte) []byte {
	if len(b) > 2048 {
		return b[len(b)-2048:]
	}
	return b
}

// startPrometheus runs the real Prometheus scraping the exporter every second and
// evaluating the checked-in rules file every second.
func startPrometheus(t *testing.T, exporterAddr string) *promtest.Server {
	t.Helper()
	rules, err := filepath.Abs(FileRules)
	if err != nil {
		t.Fatal(err)
	}
	return promtest.Start(t, promtest.Config{
		Job:       DefaultExporterJob,
		Targets:   []string{exporterAddr},
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

// TestStaleFiresInPrometheus: the real Prometheus scrapes the real exporter
// (`archiver metrics` over a real catalog) while real backups run, and
// WorldBackupStale of the server goes from inactive to firing through
// /api/v1/alerts once they stop; a configured server that never backed up
// is stale from the start, one whose newest attempt failed fires
// WorldBackupFailed; every rule evaluates without error against the real
// series, and every dashboard query parses and returns series.
func TestStaleFiresInPrometheus(t *testing.T) {
	promtest.Require(t, "prometheus") // before building anything
	e := newCatalogEnv(t)
	ctx := t.Context()
	worlds := t.TempDir()
	world := filepath.Join(worlds, "survival")
	if _, err := worldgen.Generate(world, worldgen.Options{Size: 1 << 20, Seed: 25}); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(worlds, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	// One run first, so the catalog has its tables when the exporter
	// starts (it never migrates).
	if code := e.backup(t, "survival", "survival-0", world); code != 0 {
		t.Fatalf("the first backup of survival: exit %d", code)
	}
	addr := e.exporter(t, "--cluster", "test", "--max-age", "1h",
		"--server-max-age", "survival="+testMaxAge.String(), "--server-max-age", "lobby=1h")
	p := startPrometheus(t, addr)

	// Backups run while Prometheus scrapes: survival's back to back,
	// creative's once and then an attempt that fails (an empty world).
	if code := e.backup(t, "creative", "creative-1", world); code != 0 {
		t.Fatalf("the backup of creative: exit %d", code)
	}
	for i := range 3 {
		if code := e.backup(t, "survival", fmt.Sprintf("survival-%d", i+1), world); code != 0 {
			t.Fatalf("backup %d of survival: exit %d", i+1, code)
		}
		time.Sleep(time.Second)
	}
	if code := e.backup(t, "creative", "creative-2", empty); code == 0 {
		t.Fatal("the backup of an empty world succeeded")
	}
	before := time.Now()
	if code := e.backup(t, "survival", "survival-4", world); code != 0 {
		t.Fatalf("the last backup of survival: exit %d", code)
	}
	last := time.Now()
	waitFor(t, 30*time.Second, "Prometheus scraped survival's last backup", func() (bool, error) {
		v, err := p.Query(ctx, fmt.Sprintf(`worldbackup_backup_last_successful_timestamp_seconds{server="survival"} >= %d`, before.Unix()))
		return err == nil && len(v) == 1, err
	})
	waitFor(t, 30*time.Second, "the rules were evaluated and are healthy", func() (bool, error) {
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
	// Two evaluations after the scrape that saw the backup.
	time.Sleep(2 * time.Second)
	st, err := alertState(ctx, p, AlertStale, "survival")
	if elapsed := time.Since(last); err != nil || st != "inactive" {
		t.Fatalf("%s of survival %v after its last backup (max age %v): %s (%v), want inactive", AlertStale, elapsed, testMaxAge, st, err)
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

	// The backups stopped: survival's newest success ages past its max age.
	waitFor(t, testMaxAge+90*time.Second, AlertStale+" of survival firing", func() (bool, error) {
		st, err := alertState(ctx, p, AlertStale, "survival")
		return st == "firing", err
	})
	if since := time.Since(last); since < testMaxAge {
		t.Errorf("%s fired %v after the last backup, before the max age %v", AlertStale, since, testMaxAge)
	}
	alerts, err := p.Alerts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]promtest.Alert{}
	for _, a := range alerts {
		if a.State == "firing" {
			found[a.Labels["alertname"]+"/"+a.Labels["server"]] = a
		}
	}
	if a, ok := found[AlertStale+"/lobby"]; !ok || !strings.Contains(a.Annotations["description"], "has no successful backup") {
		t.Errorf("%s of lobby (configured, never backed up): %+v, want firing, saying it has no backup", AlertStale, a)
	}
	if a, ok := found[AlertStale+"/survival"]; !ok || !strings.Contains(a.Annotations["description"], "The newest successful backup of survival (cluster test) is") {
		t.Errorf("%s of survival: %+v", AlertStale, a)
	}
	if _, ok := found[AlertFailed+"/creative"]; !ok {
		t.Errorf("%s of creative after its failed attempt is not firing: %v", AlertFailed, alerts)
	}
	if _, ok := found[AlertStale+"/creative"]; ok {
		t.Errorf("%s of creative, backed up within its max age of 1h", AlertStale)
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
