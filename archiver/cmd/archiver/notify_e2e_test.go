package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/worldbackup/worldbackup/internal/pgtest"
)

// hook is a loopback webhook that records the texts it was posted.
type hook struct {
	mu    sync.Mutex
	texts []string
}

func (h *hook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var p struct{ Text, Content string }
	if err := json.NewDecoder(r.Body).Decode(&p); err != nil || p.Text != p.Content {
		http.Error(w, "bad payload", http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	h.texts = append(h.texts, p.Text)
	h.mu.Unlock()
}

func (h *hook) got() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.texts...)
}

// TestNotifyEndToEnd runs the archiver's Jobs with a webhook: a failed
// backup posts its reason, a successful one only with --notify-on always,
// felis.toml's [notify] works as the flag does; a hook that hangs or
// answers 500 never fails or hangs the run, and the URL never reaches the
// log.
func TestNotifyEndToEnd(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	if err := os.MkdirAll(filepath.Join(e.world, "world"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.world, "world", "level.dat"), []byte("level"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := &hook{}
	srv := httptest.NewServer(h)
	defer srv.Close()
	urlFile := func(url string) string {
		p := filepath.Join(t.TempDir(), "url")
		if err := os.WriteFile(p, []byte(url+"\n"), 0o400); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const secret = "/services/T1/B2/SECRETTOKEN"
	good := urlFile(srv.URL + secret)
	noLeak := func(t *testing.T, res result) {
		t.Helper()
		if strings.Contains(res.stderr+res.stdout, "SECRETTOKEN") {
			t.Errorf("the output holds the hook URL:\n%s", res.stderr)
		}
	}

	t.Run("a failed backup notifies with its reason", func(t *testing.T) {
		before := len(h.got())
		args := e.tarBackupArgs("n-fail", "--notify-url-file", good)
		args[8] = filepath.Join(e.world, "missing") // --world
		res := archiver(t, args...)
		if res.code == 0 {
			t.Fatal("the backup of a missing world succeeded")
		}
		noLeak(t, res)
		got := h.got()[before:]
		if len(got) != 1 || !strings.Contains(got[0], "backup of survival (run n-fail) FAILED") {
			t.Fatalf("hook got %q:\n%s", got, res.stderr)
		}
	})
	t.Run("a successful backup notifies only with always", func(t *testing.T) {
		before := len(h.got())
		if res := archiver(t, e.tarBackupArgs("n-ok-1", "--notify-url-file", good)...); res.code != 0 {
			t.Fatalf("backup exited %d:\n%s", res.code, res.stderr)
		}
		if n := len(h.got()) - before; n != 0 {
			t.Fatalf("a successful backup notified %d times without --notify-on always", n)
		}
		res := archiver(t, e.tarBackupArgs("n-ok-2", "--notify-url-file", good, "--notify-on", "always")...)
		if res.code != 0 {
			t.Fatalf("backup exited %d:\n%s", res.code, res.stderr)
		}
		noLeak(t, res)
		if got := h.got()[before:]; len(got) != 1 || !strings.Contains(got[0], "backup of survival (run n-ok-2) succeeded") {
			t.Fatalf("hook got %q", got)
		}
	})
	t.Run("felis.toml [notify] url_file", func(t *testing.T) {
		cfg := filepath.Join(t.TempDir(), "felis.toml")
		writeConfig(t, cfg, fmt.Sprintf("[database]\nurl = %q\n[notify]\nurl_file = %q\non = \"always\"\n", e.url, good))
		before := len(h.got())
		args := e.tarBackupArgs("n-cfg")
		args[10] = cfg // --config
		if res := archiver(t, args...); res.code != 0 {
			t.Fatalf("backup exited %d:\n%s", res.code, res.stderr)
		}
		if got := h.got()[before:]; len(got) != 1 || !strings.Contains(got[0], "run n-cfg) succeeded") {
			t.Fatalf("hook got %q", got)
		}
	})
	t.Run("a failed restore notifies", func(t *testing.T) {
		before := len(h.got())
		res := archiver(t, "restore", "--archive", e.archivePath("n-ok-1", ".tar.zst"), "--sha256", strings.Repeat("0", 64),
			"--into", t.TempDir(), "--run-id", "rs", "--log-format", "json", "--notify-url-file", good)
		if res.code != exitRefused {
			t.Fatalf("restore exited %d, want %d:\n%s", res.code, exitRefused, res.stderr)
		}
		if got := h.got()[before:]; len(got) != 1 || !strings.Contains(got[0], "restore into") || !strings.Contains(got[0], "archive refused") {
			t.Fatalf("hook got %q", got)
		}
	})
	t.Run("the flag's url with felis.toml's [notify] on", func(t *testing.T) {
		// Each flag overrides its own key only: on = "always" still holds.
		cfg := filepath.Join(t.TempDir(), "felis.toml")
		writeConfig(t, cfg, fmt.Sprintf("[database]\nurl = %q\n[notify]\non = \"always\"\n", e.url))
		before := len(h.got())
		args := e.tarBackupArgs("n-cfg-on", "--notify-url-file", good)
		args[10] = cfg // --config
		if res := archiver(t, args...); res.code != 0 {
			t.Fatalf("backup exited %d:\n%s", res.code, res.stderr)
		}
		if got := h.got()[before:]; len(got) != 1 || !strings.Contains(got[0], "run n-cfg-on) succeeded") {
			t.Fatalf("hook got %q: want the success posted (felis.toml's on = always)", got)
		}
	})
	t.Run("a failed verify notifies", func(t *testing.T) {
		before := len(h.got())
		res := archiver(t, "verify", "--archive", e.archivePath("n-ok-1", ".tar.zst"), "--sha256", strings.Repeat("0", 64),
			"--log-format", "json", "--notify-url-file", good)
		if res.code != exitRefused {
			t.Fatalf("verify exited %d, want %d:\n%s", res.code, exitRefused, res.stderr)
		}
		noLeak(t, res)
		if got := h.got()[before:]; len(got) != 1 || !strings.Contains(got[0], "verify of "+e.archivePath("n-ok-1", ".tar.zst")) ||
			!strings.Contains(got[0], "archive refused") {
			t.Fatalf("hook got %q", got)
		}
	})

	hang := make(chan struct{})
	hanging := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer hanging.Close()
	defer close(hang)
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "boom", http.StatusInternalServerError)
	}))
	defer failing.Close()
	for _, tt := range []struct{ name, url, want string }{
		{"a hook that hangs", hanging.URL + secret, "did not answer"},
		{"a hook that answers 500", failing.URL + secret, "refused by the webhook"},
	} {
		t.Run(tt.name+" does not fail or hang the run", func(t *testing.T) {
			start := time.Now()
			res := archiver(t, e.tarBackupArgs("n-"+strings.ReplaceAll(tt.name, " ", "-"), "--notify-url-file", urlFile(tt.url), "--notify-on", "always")...)
			if res.code != 0 {
				t.Fatalf("backup exited %d:\n%s", res.code, res.stderr)
			}
			// A bound, not a timing assertion: a hanging notification would
			// hold the process until the test's deadline.
			if d := time.Since(start); d > 2*time.Minute {
				t.Fatalf("the backup took %s", d)
			}
			if !strings.Contains(res.stderr, tt.want) {
				t.Errorf("stderr lacks %q:\n%s", tt.want, res.stderr)
			}
			noLeak(t, res)
		})
	}
}
