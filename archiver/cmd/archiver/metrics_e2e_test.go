package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/worldbackup/worldbackup/archiver/exporter"
	"github.com/worldbackup/worldbackup/internal/pgtest"
	"github.com/worldbackup/worldbackup/internal/promscrape"
	"github.com/worldbackup/worldbackup/jobapi"
)

// freeAddr returns a loopback address nobody listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startMetrics starts `archiver metrics` with args and returns its base
// URL once it answers; it is stopped (SIGTERM) at cleanup.
func startMetrics(t *testing.T, args ...string) string {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(archiverBin, append([]string{"metrics", "--listen", addr, "--log-format", "json"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("archiver metrics exited with %v after SIGTERM:\n%s", err, stderr.String())
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("archiver metrics did not stop within 10s of SIGTERM")
		}
	})
	base := "http://" + addr
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return base
		}
		if time.Now().After(deadline) {
			t.Fatalf("archiver metrics never listened on %s:\n%s", addr, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestMetricsExporterReadOnly: the real binary, run with the documented
// read-only role, serves a real backup's and a failed attempt's series,
// and a stale server.
func TestMetricsExporterReadOnly(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	if err := os.MkdirAll(e.world, 0o755); err != nil {
		t.Fatal(err)
	}
	if r := archiver(t, e.backupArgs("m-1")...); r.code != 1 { // an empty world fails
		t.Fatalf("backup of an empty world: exit %d: %s", r.code, r.stderr)
	}
	generateWorld(t, e.world)
	if r := archiver(t, e.backupArgs("m-1")...); r.code != 0 {
		t.Fatalf("backup: exit %d: %s", r.code, r.stderr)
	}
	ro := pgtest.Role(t, e.url, exporter.ReadOnlyRoleSQL)
	roConfig := filepath.Join(t.TempDir(), "felis.toml")
	writeConfig(t, roConfig, fmt.Sprintf("[database]\nurl = %q\n", ro))
	base := startMetrics(t, "--config", roConfig, "--cluster", "test", "--max-age", "26h", "--server-max-age", "lobby=1h")

	fams, err := promscrape.Scrape(t.Context(), base+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	s := map[string]string{"cluster": "test", "server": "survival"}
	checks := []struct {
		name   string
		labels map[string]string
		ok     func(float64) bool
	}{
		{"worldbackup_exporter_catalog_up", map[string]string{"cluster": "test"}, func(v float64) bool { return v == 1 }},
		{"worldbackup_backup_success_total", s, func(v float64) bool { return v == 1 }},
		{"worldbackup_backup_failure_total", s, func(v float64) bool { return v == 1 }},
		{"worldbackup_backup_last_status", s, func(v float64) bool { return v == 1 }},
		{"worldbackup_backup_last_size_bytes", s, func(v float64) bool { return v > 0 }},
		{"worldbackup_backup_last_successful_timestamp_seconds", s, func(v float64) bool {
			return time.Since(time.Unix(int64(v), 0)) < 10*time.Minute
		}},
		{"worldbackup_backup_max_age_seconds", s, func(v float64) bool { return v == 26*3600 }},
		{"worldbackup_backup_last_successful_timestamp_seconds", map[string]string{"server": "lobby"}, func(v float64) bool { return v == 0 }},
	}
	for _, c := range checks {
		if v, ok := fams.Value(c.name, c.labels); !ok || !c.ok(v) {
			t.Errorf("%s%v = %v (found %v)", c.name, c.labels, v, ok)
		}
	}
	page, err := httpGet(t, base+"/")
	if err != nil || !strings.Contains(page, `data-server="lobby" data-verdict="stale"`) ||
		!strings.Contains(page, `data-server="survival" data-verdict="ok"`) || !strings.Contains(page, "refusing an empty backup") {
		t.Errorf("status page: %v\n%s", err, page)
	}
}

// TestMetricsUsage: bad flags are usage errors naming the flag.
func TestMetricsUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"bad listen", []string{"--listen", "nowhere"}, jobapi.Flag(jobapi.FlagListen)},
		{"bad max age", []string{"--max-age", "soon"}, jobapi.Flag(jobapi.FlagMaxAge)},
		{"bad server max age", []string{"--server-max-age", "Survival=1h"}, jobapi.Flag(jobapi.FlagServerMaxAge)},
		{"no equals", []string{"--server-max-age", "survival"}, "server=duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := archiver(t, append([]string{"metrics"}, tt.args...)...)
			if r.code != 2 || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want 2 naming %s", r.code, r.stderr, tt.want)
			}
		})
	}
}

// TestMetricsContractRoundTrip: the exporter's request survives its trip
// through the container's arguments.
func TestMetricsContractRoundTrip(t *testing.T) {
	for _, req := range []jobapi.Metrics{
		{},
		{Config: "/etc/felis/felis.toml", Listen: ":9100", Cluster: "eu-1", MaxAge: "36h",
			ServerMaxAges: []string{"survival=26h", "creative=8h"}, LogFormat: jobapi.LogJSON},
	} {
		args := req.Args()
		fs, f := newMetricsFlags(io.Discard)
		if code := parseFlags(fs, args[1:], io.Discard); code != -1 {
			t.Fatalf("parsing %q: exit %d", args, code)
		}
		f.Parsed(fs)
		if want := req.WithDefaults(); !reflect.DeepEqual(f.Metrics, want) {
			t.Errorf("args %q\nparsed %+v\nwant   %+v", args, f.Metrics, want)
		}
	}
}

func httpGet(t *testing.T, url string) (string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), err
}

// TestMetricsRoleAsHelpSays: a role granted SELECT on exactly the tables
// `archiver metrics --help` names (and readonly_role.sql's other lines:
// connect, the schema, read-only) is all the exporter needs: with it the
// catalog is up and a prune's series are there.
func TestMetricsRoleAsHelpSays(t *testing.T) {
	help := archiver(t, "metrics", "--help")
	text := strings.Join(strings.Fields(help.stdout+help.stderr), " ")
	var tables []string
	for sentence := range strings.SplitSeq(text, ". ") {
		if strings.Contains(sentence, "SELECT") {
			tables = regexp.MustCompile(`world_[a-z_]+`).FindAllString(sentence, -1)
		}
	}
	if len(tables) == 0 {
		t.Fatalf("`archiver metrics --help` names no table to grant SELECT on:\n%s", text)
	}

	e := newEnv(t, pgtest.URL(t))
	generateWorld(t, e.world)
	if r := archiver(t, e.backupArgs("m-1")...); r.code != 0 {
		t.Fatalf("backup: exit %d: %s", r.code, r.stderr)
	}
	grant := regexp.MustCompile(`(?m)^GRANT SELECT ON .* TO`)
	ro := pgtest.Role(t, e.url, func(role, password, database string) string {
		return grant.ReplaceAllLiteralString(exporter.ReadOnlyRoleSQL(role, password, database),
			"GRANT SELECT ON "+strings.Join(tables, ", ")+" TO")
	})
	roConfig := filepath.Join(t.TempDir(), "felis.toml")
	writeConfig(t, roConfig, fmt.Sprintf("[database]\nurl = %q\n", ro))
	base := startMetrics(t, "--config", roConfig, "--cluster", "test")
	fams, err := promscrape.Scrape(t.Context(), base+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := fams.Value("worldbackup_exporter_catalog_up", map[string]string{"cluster": "test"}); !ok || v != 1 {
		t.Fatalf("with SELECT on %v only: catalog_up %v (found %v), want 1", tables, v, ok)
	}
	if v, ok := fams.Value("worldbackup_prune_total", map[string]string{"server": "survival"}); !ok || v != 0 {
		t.Errorf("with SELECT on %v only: worldbackup_prune_total{server=survival} %v (found %v), want 0", tables, v, ok)
	}
}
