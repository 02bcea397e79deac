package notify

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// hookFile writes url into a file as a mounted Secret key holds it.
func hookFile(t *testing.T, url string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "url")
	if err := os.WriteFile(p, []byte(url+"\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	return p
}

// logger returns a JSON logger into buf.
func logger(buf *bytes.Buffer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Output: buf, JSONFormat: true, Level: hclog.Info})
}

const secretPath = "/services/T000/B000/XXXXSECRETXXXX"

func TestSendPostsSlackAndDiscordJSON(t *testing.T) {
	var mu sync.Mutex
	var got Payload
	var ctype string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		ctype = r.Header.Get("Content-Type")
		if r.URL.Path != secretPath || r.Method != http.MethodPost {
			http.Error(w, "wrong hook", http.StatusNotFound)
			return
		}
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
		}
	}))
	defer srv.Close()
	var log bytes.Buffer
	if !Send(t.Context(), logger(&log), Options{URLFile: hookFile(t, srv.URL+secretPath)}, "backup of survival failed") {
		t.Fatalf("Send = false:\n%s", log.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if got.Text != "backup of survival failed" || got.Content != got.Text || ctype != "application/json" {
		t.Errorf("payload %+v, content type %q", got, ctype)
	}
	if strings.Contains(log.String(), "SECRET") {
		t.Errorf("the log holds the hook's secret path:\n%s", log.String())
	}
}

func TestSendNeverFailsTheRun(t *testing.T) {
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
		io.Copy(io.Discard, r.Body)
		http.Error(w, strings.Repeat("x", 1<<20), http.StatusInternalServerError)
	}))
	defer failing.Close()
	// Accepts connections and never reads or answers.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	var conns []net.Conn
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closedURL := "http://" + closedAddr
	closedHost := closedURL
	closed.Close()

	for _, tt := range []struct {
		name, url, want string
	}{
		{"hangs", hanging.URL + secretPath, "did not answer"},
		{"accepts and never answers", "http://" + silent.Addr().String() + secretPath, "did not answer"},
		{"returns 500", failing.URL + secretPath, "refused by the webhook"},
		{"down", closedURL + secretPath, "did not answer"},
		{"not a URL", "hooks.slack.com" + secretPath, "unusable"},
		// net/http quotes the URL in its *url.Error rewritten (userinfo
		// as ***, the scheme lower-cased): no spelling of the hook may
		// leak its query token, password or path.
		{"down, token in the query", closedHost + "/v1/spaces/X/messages?key=K&token=QSECRETQ", "did not answer"},
		{"down, userinfo and token", "http://bot:PWSECRETPW@" + closedAddr + "/v1/spaces/X/messages?key=K&token=QSECRETQ", "did not answer"},
		{"down, upper-case scheme", "HTTP://bot:PWSECRETPW@" + closedAddr + "/v1/spaces/X/messages?key=K&token=QSECRETQ", "did not answer"},
		{"down, upper-case scheme, no userinfo", "HTTP://" + closedAddr + secretPath + "?token=QSECRETQ", "did not answer"},
		{"down, escaped path", closedHost + "/hooks/%53ECRET%2Fx?token=Q%53ECRETQ", "did not answer"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var log bytes.Buffer
			start := time.Now()
			ok := Send(t.Context(), logger(&log), Options{URLFile: hookFile(t, tt.url), Timeout: 500 * time.Millisecond}, "prune failed")
			if ok {
				t.Fatal("Send = true")
			}
			// A bound, not a timing assertion: a Send that waited for the
			// hook would block until the test's own deadline.
			if d := time.Since(start); d > 30*time.Second {
				t.Fatalf("Send took %s", d)
			}
			out := log.String()
			if !strings.Contains(out, tt.want) {
				t.Errorf("log lacks %q:\n%s", tt.want, out)
			}
			for _, secret := range []string{"SECRET", "%53", "token=", "bot:", "PW"} {
				if strings.Contains(out, secret) {
					t.Errorf("the log holds %q, part of the hook's secrets:\n%s", secret, out)
				}
			}
		})
	}
	t.Run("missing URL file", func(t *testing.T) {
		var log bytes.Buffer
		if Send(t.Context(), logger(&log), Options{URLFile: filepath.Join(t.TempDir(), "none")}, "x") || !strings.Contains(log.String(), "unusable") {
			t.Fatalf("log:\n%s", log.String())
		}
	})
	t.Run("oversized URL file", func(t *testing.T) {
		var log bytes.Buffer
		if Send(t.Context(), logger(&log), Options{URLFile: hookFile(t, "https://h/"+strings.Repeat("a", maxURLFile))}, "x") ||
			!strings.Contains(log.String(), "larger than") {
			t.Fatalf("log:\n%s", log.String())
		}
	})
}

// A FIFO as the URL file (no writer) must not block Send past its timeout:
// the file is opened without blocking and refused as not a regular file.
func TestSendFIFOURLFile(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "url")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	done := make(chan bool, 1)
	go func() {
		done <- Send(t.Context(), logger(&log), Options{URLFile: fifo, Timeout: 500 * time.Millisecond}, "x")
	}()
	select {
	case ok := <-done:
		if ok || !strings.Contains(log.String(), "unusable") || !strings.Contains(log.String(), "not a regular file") {
			t.Fatalf("Send = %v, log:\n%s", ok, log.String())
		}
	case <-time.After(10 * time.Second):
		// Release the blocked open so that the test binary can end.
		if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		<-done
		t.Fatal("Send blocked on a FIFO as the URL file")
	}
}

// The default client ignores HTTP_PROXY and HTTPS_PROXY: run in a child
// test binary, since net/http reads the environment once per process.
func TestSendIgnoresProxyEnvironment(t *testing.T) {
	if os.Getenv("NOTIFY_PROXY_CHILD") == "1" {
		var log bytes.Buffer
		// Not a loopback host: net/http never proxies those anyway.
		Send(t.Context(), logger(&log), Options{URLFile: hookFile(t, "http://hook.invalid"+secretPath), Timeout: time.Second}, "x")
		return
	}
	var mu sync.Mutex
	var got []string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, r.Method+" "+r.URL.String())
	}))
	defer proxy.Close()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestSendIgnoresProxyEnvironment$", "-test.count=1")
	cmd.Env = append(os.Environ(), "NOTIFY_PROXY_CHILD=1", "HTTP_PROXY="+proxy.URL, "http_proxy="+proxy.URL,
		"HTTPS_PROXY="+proxy.URL, "https_proxy="+proxy.URL, "NO_PROXY=", "no_proxy=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) > 0 {
		t.Fatalf("the proxy of the environment received %q", got)
	}
}

func TestNewPayloadBoundsTheText(t *testing.T) {
	p := NewPayload(strings.Repeat("é", MaxText))
	if len(p.Text) > MaxText || !strings.HasSuffix(p.Text, "…") || p.Content != p.Text {
		t.Fatalf("text of %d bytes, suffix %q", len(p.Text), p.Text[len(p.Text)-4:])
	}
	if !json.Valid([]byte(`"` + p.Text + `"`)) {
		t.Fatal("cut inside a rune")
	}
	if p := NewPayload("short"); p.Text != "short" {
		t.Fatalf("short text changed: %q", p.Text)
	}
}
