package nodetest

import (
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// testRegistry is an OCI registry on the node's loopback: go-containerregistry's
// in-memory one, which the node's containerd pulls from over plain HTTP (its
// default for a loopback host with a port). It can play a registry that is
// down: every request answered 503 for a while.
type testRegistry struct {
	host string // 127.0.0.1:port

	mu       sync.Mutex
	downFor  time.Duration // from the first request after down was called
	downAt   time.Time     // that first request; zero: none yet
	refused  int           // requests answered 503
	servedAt time.Time     // the first request served after the outage
}

// startRegistry serves a registry on the loopback until the test ends.
func startRegistry(t *testing.T) *testRegistry {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &testRegistry{host: l.Addr().String()}
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := &http.Server{Handler: r.handler(reg), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(l) //nolint:errcheck // ends with Close
	t.Cleanup(func() { srv.Close() })
	return r
}

// handler answers 503 while the registry is down, and serves reg otherwise.
func (r *testRegistry) handler(reg http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		now := time.Now()
		if r.downFor > 0 && r.downAt.IsZero() {
			r.downAt = now
		}
		down := r.downFor > 0 && now.Before(r.downAt.Add(r.downFor))
		if down {
			r.refused++
		} else if r.downFor > 0 && r.servedAt.IsZero() && strings.Contains(req.URL.Path, "/manifests/") {
			r.servedAt = now
		}
		r.mu.Unlock()
		if down {
			http.Error(w, "registry restarting", http.StatusServiceUnavailable)
			return
		}
		reg.ServeHTTP(w, req)
	})
}

// push pushes the image of a docker tarball as repo:tag and returns its
// reference.
func (r *testRegistry) push(t *testing.T, tarballPath, repo, tag string) string {
	t.Helper()
	img, err := tarball.ImageFromPath(tarballPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	ref := r.ref(repo, tag)
	parsed, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(parsed, img, remote.WithContext(t.Context())); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
	return ref
}

// ref is the reference of repo:tag in the registry.
func (r *testRegistry) ref(repo, tag string) string { return r.host + "/" + repo + ":" + tag }

// down makes the registry answer 503 to every request for d, counted from
// the first request that comes after the call.
func (r *testRegistry) down(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.downFor, r.downAt, r.refused, r.servedAt = d, time.Time{}, 0, time.Time{}
}

// outage returns how many requests the outage refused, and how long after
// its first request a manifest was served again (0: not yet).
func (r *testRegistry) outage() (refused int, until time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.servedAt.IsZero() {
		until = r.servedAt.Sub(r.downAt)
	}
	return r.refused, until
}
