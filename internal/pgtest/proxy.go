package pgtest

import (
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// Proxy is a TCP proxy on 127.0.0.1 in front of a PostgreSQL server, for
// tests of a database that stops answering: it forwards until Blackhole is
// called, then accepts connections and reads what clients send, but never
// answers, as a server that hangs or a network that drops replies would.
type Proxy struct {
	l      net.Listener
	target string // host:port of the server

	mu        sync.Mutex
	blackhole bool
	conns     map[net.Conn]struct{}
	wg        sync.WaitGroup
}

// NewProxy starts a proxy forwarding to target (host:port) and stops it at
// the test's cleanup.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	return NewProxyOn(t, "127.0.0.1", target)
}

// NewProxyOn is NewProxy listening on host (an address of this machine) on
// a free port: on the test node's gateway, pods reach a server that listens
// on loopback only (internal/kubenode).
func NewProxyOn(t testing.TB, host, target string) *Proxy {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatalf("pgtest: proxy: %v", err)
	}
	p := &Proxy{l: l, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// NewBlackhole starts a proxy that accepts connections and never answers.
func NewBlackhole(t testing.TB) *Proxy {
	t.Helper()
	p := NewProxy(t, "")
	p.Blackhole()
	return p
}

// Addr returns the proxy's host:port.
func (p *Proxy) Addr() string { return p.l.Addr().String() }

// URL returns the postgres:// URL u with its host and port replaced by the
// proxy's.
func (p *Proxy) URL(t testing.TB, u string) string {
	t.Helper()
	return proxyURL(t, u, p.Addr(), false)
}

// proxyURL returns the postgres:// URL u with its host and port replaced by
// addr, and with sslmode=disable when noTLS.
func proxyURL(t testing.TB, u, addr string, noTLS bool) string {
	t.Helper()
	parsed, err := url.Parse(u)
	if err != nil || (parsed.Scheme != "postgres" && parsed.Scheme != "postgresql") {
		t.Fatalf("pgtest: proxy: want a postgres:// URL, got %s", redact(u))
	}
	parsed.Host = addr
	if noTLS {
		q := parsed.Query()
		q.Set("sslmode", "disable")
		parsed.RawQuery = q.Encode()
	}
	return parsed.String()
}

// Target returns the host:port of the server a postgres:// URL u names.
func Target(t testing.TB, u string) string {
	t.Helper()
	parsed, err := url.Parse(u)
	if err != nil || parsed.Host == "" {
		t.Fatalf("pgtest: want a postgres:// URL with a host, got %s", redact(u))
	}
	host := parsed.Host
	if !strings.Contains(host, ":") || strings.HasSuffix(host, "]") {
		host += ":5432"
	}
	return host
}

// Blackhole makes the proxy stop answering: open connections stop
// forwarding in both directions (what the client sends is read and
// dropped), and new connections are accepted but never forwarded.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	p.blackhole = true
	p.mu.Unlock()
}

// Resume undoes Blackhole for new connections: they are forwarded again
// (connections opened while it was a blackhole stay silent).
func (p *Proxy) Resume() {
	p.mu.Lock()
	p.blackhole = false
	p.mu.Unlock()
}

func (p *Proxy) silent() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.blackhole
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.serve(c)
		}()
	}
}

// serve forwards c to the target until the proxy turns into a blackhole,
// then drains c without answering.
func (p *Proxy) serve(c net.Conn) {
	if p.silent() {
		_, _ = io.Copy(io.Discard, c)
		return
	}
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	if !p.track(s) {
		c.Close()
		return
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.pipe(c, s)
	}()
	p.pipe(s, c)
}

// pipe copies src to dst while the proxy forwards; afterwards it reads and
// drops src.
func (p *Proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.silent() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !p.silent() && !errors.Is(err, net.ErrClosed) {
				dst.Close() // pass the end on while forwarding
			}
			return
		}
	}
}

// close stops the proxy and closes every connection.
func (p *Proxy) close() {
	p.l.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}
