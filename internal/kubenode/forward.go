package kubenode

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// forwarder relays TCP connections from an address the pods reach (on the
// gateway IP) to a host service that listens on loopback only, such as the
// PostgreSQL the tests use.
type forwarder struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

func newForwarder(listenIP, target string) (*forwarder, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(listenIP, "0"))
	if err != nil {
		return nil, fmt.Errorf("listening on %s for %s: %w", listenIP, target, err)
	}
	f := &forwarder{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.serve()
	return f, nil
}

// port is the port the pods connect to.
func (f *forwarder) port() int { return f.ln.Addr().(*net.TCPAddr).Port }

func (f *forwarder) serve() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		f.wg.Add(1)
		go f.relay(c)
	}
}

func (f *forwarder) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *forwarder) relay(in net.Conn) {
	defer f.wg.Done()
	defer in.Close()
	out, err := net.Dial("tcp", f.target)
	if err != nil {
		return
	}
	defer out.Close()
	if !f.track(in) || !f.track(out) {
		return
	}
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(out, in)
	go cp(in, out)
	<-done
	<-done
	f.mu.Lock()
	delete(f.conns, in)
	delete(f.conns, out)
	f.mu.Unlock()
}

// close stops listening and cuts every relayed connection.
func (f *forwarder) close() {
	f.ln.Close()
	f.mu.Lock()
	f.closed = true
	for c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

// forward returns the port on the gateway IP that relays to target,
// starting the relay on first use.
func (nd *Node) forward(target string) (int, error) {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if f, ok := nd.fwd[target]; ok {
		return f.port(), nil
	}
	f, err := newForwarder(nd.GatewayIP, target)
	if err != nil {
		return 0, err
	}
	nd.fwd[target] = f
	return f.port(), nil
}

func (nd *Node) closeForwarders() {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	for k, f := range nd.fwd {
		f.close()
		delete(nd.fwd, k)
	}
}
