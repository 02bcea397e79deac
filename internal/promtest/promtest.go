// Package promtest gives tests the real Prometheus and promtool, built into
// the tool cache by scripts/prometheus.sh (run by `make tools` and `make
// test`) and linked as .tools/bin/prometheus and .tools/bin/promtool. A
// missing binary fails the test under CI=true and skips it elsewhere
// (internal/testenv). Server is a Prometheus on a free loopback port with a
// test's scrape targets and rule files, and the HTTP API calls the tests
// make (query, parse_query, alerts).
package promtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/worldbackup/worldbackup/internal/testenv"
)

const (
	startTimeout = 60 * time.Second
	// maxBody bounds every API answer read.
	maxBody = 16 << 20
)

// Binary returns the path of the named tool (prometheus, promtool):
// $WB_TOOLS/bin, else the checkout's .tools/bin, else PATH.
func Binary(name string) (string, error) {
	var candidates []string
	if v := os.Getenv("WB_TOOLS"); v != "" {
		candidates = append(candidates, filepath.Join(v, "bin", name))
	}
	if wd, err := os.Getwd(); err == nil {
		if root, ok := repoRoot(wd); ok {
			candidates = append(candidates, filepath.Join(root, ".tools", "bin", name))
		}
	}
	for _, c := range candidates {
		if fi, err := os.Stat(c); err == nil && fi.Mode().IsRegular() {
			return c, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%s is not built", name)
}

// repoRoot walks up from dir to the folder holding the module's go.mod.
func repoRoot(dir string) (string, bool) {
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			strings.Contains(string(b), "module github.com/worldbackup/worldbackup\n") {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

// Require returns the named tool's path, failing (CI) or skipping the test
// when it is not built.
func Require(t testing.TB, name string) string {
	t.Helper()
	bin, err := Binary(name)
	testenv.Require(t, err == nil, name+" (Prometheus "+name+") is not built", "run scripts/prometheus.sh (or make tools)")
	return bin
}

// Promtool runs promtool with args in dir and returns its combined output
// and error.
func Promtool(t testing.TB, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), Require(t, "promtool"), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Config is what a test's Prometheus scrapes and evaluates.
type Config struct {
	Job            string        // the scrape job's name
	Targets        []string      // host:port of each target
	ScrapeInterval time.Duration // default 1s
	EvalInterval   time.Duration // default 1s
	RuleFiles      []string      // absolute paths
}

// Server is a running Prometheus.
type Server struct {
	URL string // http://127.0.0.1:PORT

	cmd      *exec.Cmd
	logPath  string
	stopOnce sync.Once
	exited   chan struct{}
}

type scrapeConfig struct {
	JobName       string         `json:"job_name"`
	StaticConfigs []staticConfig `json:"static_configs"`
}

type staticConfig struct {
	Targets []string `json:"targets"`
}

// Start runs Prometheus for the test on a free loopback port and stops it
// when the test ends.
func Start(t testing.TB, c Config) *Server {
	t.Helper()
	bin := Require(t, "prometheus")
	if c.ScrapeInterval == 0 {
		c.ScrapeInterval = time.Second
	}
	if c.EvalInterval == 0 {
		c.EvalInterval = time.Second
	}
	dir := t.TempDir()
	cfg := map[string]any{
		"global": map[string]any{
			"scrape_interval":     c.ScrapeInterval.String(),
			"scrape_timeout":      c.ScrapeInterval.String(),
			"evaluation_interval": c.EvalInterval.String(),
		},
		"rule_files":     c.RuleFiles,
		"scrape_configs": []scrapeConfig{{JobName: c.Job, StaticConfigs: []staticConfig{{Targets: c.Targets}}}},
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	var lastErr error
	for range 3 { // the free port may be taken between the probe and the start
		s, err := start(t.Context(), bin, cfgPath, dir)
		if err == nil {
			t.Cleanup(func() {
				s.Stop()
				if t.Failed() {
					if log, err := os.ReadFile(s.logPath); err == nil {
						t.Logf("prometheus log:\n%s", tail(log, 8<<10))
					}
				}
			})
			return s
		}
		lastErr = err
	}
	t.Fatalf("starting prometheus: %v", lastErr)
	return nil
}

func start(ctx context.Context, bin, cfgPath, dir string) (*Server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "prometheus-"+strings.ReplaceAll(addr, ":", "-")+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin,
		"--config.file="+cfgPath,
		"--storage.tsdb.path="+filepath.Join(dir, "data-"+strings.ReplaceAll(addr, ":", "-")),
		"--web.listen-address="+addr,
		"--log.level=warn",
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &Server{URL: "http://" + addr, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.exited) }()
	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-s.exited:
			log, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("prometheus exited at start: %s", strings.TrimSpace(string(tail(log, 4<<10))))
		case <-ctx.Done():
			s.Stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if ready(ctx, s.URL) {
			return s, nil
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("prometheus was not ready on %s within %v", addr, startTimeout)
		}
	}
}

func ready(ctx context.Context, base string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/-/ready", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	return resp.StatusCode == http.StatusOK
}

// Stop ends Prometheus (SIGTERM, then SIGKILL after 10s) and waits for it.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		_ = s.cmd.Process.Signal(os.Interrupt)
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
	})
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// apiResponse is the envelope of every /api/v1 answer.
type apiResponse struct {
	Status    string          `json:"status"`
	Data      json.RawMessage `json:"data"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
}

// ErrAPI is wrapped by the error of an API call that Prometheus refused
// (status "error": a query that does not parse, a bad parameter).
var ErrAPI = errors.New("prometheus API error")

func (s *Server) get(ctx context.Context, path string, q url.Values, data any) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	u := s.URL + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return err
	}
	var r apiResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("%s: HTTP %d, not an API answer: %s", path, resp.StatusCode, tail(body, 512))
	}
	if r.Status != "success" {
		return fmt.Errorf("%w: %s: %s: %s", ErrAPI, path, r.ErrorType, r.Error)
	}
	if data == nil {
		return nil
	}
	return json.NewDecoder(bytes.NewReader(r.Data)).Decode(data)
}

// Sample is one series of an instant vector.
type Sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"` // [unix seconds, "value"]
}

// Query evaluates expr now and returns its instant vector (a scalar or
// string result is an error).
func (s *Server) Query(ctx context.Context, expr string) ([]Sample, error) {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := s.get(ctx, "/api/v1/query", url.Values{"query": {expr}}, &data); err != nil {
		return nil, err
	}
	if data.ResultType != "vector" {
		return nil, fmt.Errorf("query %q: result type %s, not a vector", expr, data.ResultType)
	}
	var v []Sample
	if err := json.Unmarshal(data.Result, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// Parse has Prometheus's PromQL parser parse expr (/api/v1/parse_query):
// nil when it parses, an error wrapping ErrAPI saying why when not.
func (s *Server) Parse(ctx context.Context, expr string) error {
	return s.get(ctx, "/api/v1/parse_query", url.Values{"query": {expr}}, nil)
}

// Alert is one alert of /api/v1/alerts.
type Alert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"` // pending, firing
	ActiveAt    time.Time         `json:"activeAt"`
	Value       string            `json:"value"`
}

// Alerts returns the active (pending and firing) alerts.
func (s *Server) Alerts(ctx context.Context) ([]Alert, error) {
	var data struct {
		Alerts []Alert `json:"alerts"`
	}
	if err := s.get(ctx, "/api/v1/alerts", nil, &data); err != nil {
		return nil, err
	}
	return data.Alerts, nil
}

// RuleState is one alerting rule of /api/v1/rules with its state
// (inactive, pending, firing).
type RuleState struct {
	Name   string `json:"name"`
	State  string `json:"state"`
	Health string `json:"health"`
	Error  string `json:"lastError"`
	Type   string `json:"type"`
}

// Rules returns every alerting rule with its state and health.
func (s *Server) Rules(ctx context.Context) ([]RuleState, error) {
	var data struct {
		Groups []struct {
			Rules []RuleState `json:"rules"`
		} `json:"groups"`
	}
	if err := s.get(ctx, "/api/v1/rules", url.Values{"type": {"alert"}}, &data); err != nil {
		return nil, err
	}
	var out []RuleState
	for _, g := range data.Groups {
		out = append(out, g.Rules...)
	}
	return out, nil
}
