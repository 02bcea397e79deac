package exporter

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// chromium returns Debian's Chromium, or skips (fails with CI=true).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed and CI=true: apt-get install chromium (.ci/run installs it)")
	}
	t.Skip("chromium is not installed: apt-get install chromium")
	return ""
}

// headless runs Chromium headless on url with extra flags and returns its
// stdout; the flags are the machine's known-good set, with a new profile.
func headless(t *testing.T, bin, url string, extra ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir(), "--window-size=1400,900"}, extra...)
	cmd := exec.CommandContext(ctx, bin, append(args, url)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %v: %v\n%s", extra, err, stderr.String())
	}
	return string(out)
}

// logDir is where the tests keep artifacts: $TEST_LOG_DIR (scripts/test.sh
// sets it), else the module's .tools/test-logs.
func logDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("TEST_LOG_DIR")
	if dir == "" {
		root, err := filepath.Abs(filepath.Join("..", ".."))
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(root, ".tools", "test-logs")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestStatusPageInChromium: the page as a real browser renders it: one row
// per server, each coloured by its verdict (a server whose newest run is
// too old and one with no run at all are stale), failures with their
// reason, the restore command with the full checksum; a screenshot is kept.
func TestStatusPageInChromium(t *testing.T) {
	bin := chromium(t)
	f := newFixture(t)
	for i, ago := range []time.Duration{50 * time.Hour, 26 * time.Hour, 3 * time.Hour} {
		f.run(t, "survival", "s-"+string(rune('1'+i)), ago, time.Duration(30+i*20)*time.Second, int64(1+i)<<20, int64(i+1)<<18)
	}
	f.run(t, "creative", "c-1", 80*time.Hour, time.Minute, 8<<20, 8<<20)
	f.fail(t, "creative", "c-2", time.Hour, "quiescing the game server: <script>alert(1)</script> connection refused")
	f.run(t, "skyblock", "k-1", 20*time.Hour, time.Minute, 3<<20, 1<<20) // late against 24h
	_, base := serve(t, f.db, Config{Cluster: "eu-1", MaxAge: 36 * time.Hour,
		ServerMaxAge: map[string]time.Duration{"lobby": 2 * time.Hour, "skyblock": 24 * time.Hour}})

	dom := headless(t, bin, base+"/", "--dump-dom")
	rows := regexp.MustCompile(`<tr class="server (\w+)" data-server="([a-z0-9-]+)" data-verdict="(\w+)">`).FindAllStringSubmatch(dom, -1)
	got := map[string]string{}
	for _, r := range rows {
		if r[1] != r[3] {
			t.Errorf("row %s: class %s, verdict %s", r[2], r[1], r[3])
		}
		got[r[2]] = r[3]
	}
	wantRows := map[string]string{"creative": "stale", "lobby": "stale", "skyblock": "late", "survival": "ok"}
	if len(rows) != len(wantRows) {
		t.Errorf("%d server rows, want %d: %v", len(rows), len(wantRows), got)
	}
	for s, v := range wantRows {
		if got[s] != v {
			t.Errorf("server %s: verdict %q, want %q", s, got[s], v)
		}
	}
	for _, w := range []string{
		"connection refused",                                       // the failure's reason
		"&lt;script&gt;alert(1)&lt;/script&gt;",                    // escaped, not run
		strings.Repeat("c", 64),                                    // the full checksum
		"archiver restore --archive /backups/survival/s-3.tar.zst", // the newest run's restore
		`<svg class="chart"`,                                       // the inline chart
	} {
		if !strings.Contains(dom, w) {
			t.Errorf("the rendered page lacks %q", w)
		}
	}
	if strings.Contains(dom, "<script>") {
		t.Error("the rendered page holds a script element")
	}
	if n := strings.Count(dom, `<rect class="size"`); n != 5 {
		t.Errorf("%d chart bars, want 5 (one per run)", n)
	}

	shot := filepath.Join(logDir(t), "status-page.png")
	_ = os.Remove(shot)
	headless(t, bin, base+"/", "--screenshot="+shot, "--hide-scrollbars")
	fi, err := os.Stat(shot)
	if err != nil || fi.Size() < 10<<10 {
		t.Fatalf("screenshot %s: %v (%v bytes), want a PNG of the page", shot, err, fi)
	}
	b, _ := os.ReadFile(shot)
	if !strings.HasPrefix(string(b), "\x89PNG") {
		t.Errorf("screenshot %s is not a PNG", shot)
	}
	t.Logf("screenshot of the status page: %s", shot)
}
