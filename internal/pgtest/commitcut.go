package pgtest

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// CommitCut is a proxy on 127.0.0.1 in front of a PostgreSQL server that
// cuts one transaction at its COMMIT, for tests of a commit whose answer
// never comes (a dropped connection, a client's deadline, a pod killed
// while the answer was on its way). It forwards every connection, reading
// the client's messages, until a client sends COMMIT (a simple query, as
// pgx sends it) in a transaction that sent a statement containing Match;
// then it closes both sides of that connection, after the server answered
// when the commit is Applied, without forwarding the COMMIT otherwise.
type CommitCut struct {
	// Match picks the transaction to cut: the first whose statements
	// contain it ("" for the first transaction to commit).
	Match string
	// Applied forwards the COMMIT, so the server commits; its answer is
	// dropped. Otherwise the server never sees it and rolls back.
	Applied bool
	// Silent makes the proxy, once it has cut, stop answering: open
	// connections forward nothing more, in either direction, and new
	// ones are accepted and never answered (a database that stops
	// answering after the cut, as Proxy.Blackhole).
	Silent bool

	l      net.Listener
	target string
	cut    atomic.Bool
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// NewCommitCut starts c in front of target (host:port) and stops it at the
// test's cleanup. Set c's fields before: the proxy reads them.
func NewCommitCut(t testing.TB, target string, c *CommitCut) *CommitCut {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pgtest: commit cut: %v", err)
	}
	c.l, c.target, c.conns = l, target, map[net.Conn]struct{}{}
	c.wg.Add(1)
	go c.accept()
	t.Cleanup(c.close)
	return c
}

// URL returns the postgres:// URL u with its host and port replaced by the
// proxy's, and TLS off (the proxy reads the messages).
func (c *CommitCut) URL(t testing.TB, u string) string {
	t.Helper()
	return proxyURL(t, u, c.l.Addr().String(), true)
}

// Cut reports whether the proxy has cut a transaction.
func (c *CommitCut) Cut() bool { return c.cut.Load() }

func (c *CommitCut) silent() bool { return c.Silent && c.cut.Load() }

func (c *CommitCut) track(conn net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conns == nil {
		conn.Close()
		return false
	}
	c.conns[conn] = struct{}{}
	return true
}

func (c *CommitCut) accept() {
	defer c.wg.Done()
	for {
		conn, err := c.l.Accept()
		if err != nil {
			return
		}
		if !c.track(conn) {
			return
		}
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			defer conn.Close()
			if c.silent() {
				_, _ = io.Copy(io.Discard, conn)
				return
			}
			c.serve(conn)
		}()
	}
}

// Message codes of the startup packets that ask for encryption.
const (
	sslRequest    = 80877103
	gssencRequest = 80877104
)

// serve forwards client to the server, message by message from the client,
// until the transaction to cut commits.
func (c *CommitCut) serve(client net.Conn) {
	server, err := net.Dial("tcp", c.target)
	if err != nil {
		return
	}
	if !c.track(server) {
		return
	}
	defer server.Close()
	// Startup: encryption requests are refused here (the proxy must read
	// the messages), then the startup message goes on.
	var startup []byte
	for {
		startup, err = readStartup(client)
		if err != nil {
			return
		}
		if code := binary.BigEndian.Uint32(startup[4:8]); len(startup) == 8 && (code == sslRequest || code == gssencRequest) {
			if _, err := client.Write([]byte{'N'}); err != nil {
				return
			}
			continue
		}
		break
	}
	if _, err := server.Write(startup); err != nil {
		return
	}
	var drop atomic.Bool
	answered := make(chan struct{})
	go func() {
		defer client.Close()
		buf := make([]byte, 32<<10)
		var once sync.Once
		for {
			n, err := server.Read(buf)
			if n > 0 && drop.Load() {
				once.Do(func() { close(answered) }) // the server has committed
				continue
			}
			if c.silent() {
				if err != nil {
					return
				}
				continue
			}
			if n > 0 {
				if _, werr := client.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	var matched bool // the transaction under way sent a statement containing Match
	for {
		typ, msg, err := readMessage(client)
		if err != nil {
			return
		}
		if c.silent() {
			continue
		}
		body := msg[5:]
		switch typ {
		case 'Q', 'P':
			if c.Match == "" || bytes.Contains(body, []byte(c.Match)) {
				matched = true
			}
		}
		if typ == 'Q' && isCommit(body) && matched && c.cut.CompareAndSwap(false, true) {
			if c.Applied {
				drop.Store(true)
				if _, err := server.Write(msg); err == nil {
					select {
					case <-answered:
					case <-time.After(10 * time.Second):
					}
				}
			}
			client.Close()
			return
		}
		if typ == 'Q' && (isCommit(body) || isRollback(body)) {
			matched = false
		}
		if _, err := server.Write(msg); err != nil {
			return
		}
	}
}

// readStartup reads a startup packet: a length, then the rest (no type).
func readStartup(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n < 8 || n > 10000 {
		return nil, io.ErrUnexpectedEOF
	}
	msg := make([]byte, n)
	copy(msg, hdr[:])
	_, err := io.ReadFull(r, msg[4:])
	return msg, err
}

// readMessage reads a message: a type byte, a length, then the rest; msg
// is the whole message.
func readMessage(r io.Reader) (typ byte, msg []byte, err error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n < 4 || n > 1<<30 {
		return 0, nil, io.ErrUnexpectedEOF
	}
	msg = make([]byte, 1+n)
	copy(msg, hdr[:])
	_, err = io.ReadFull(r, msg[5:])
	return hdr[0], msg, err
}

// isCommit reports whether the query string q (NUL-terminated) is COMMIT.
func isCommit(q []byte) bool { return isStatement(q, "commit") }

// isRollback reports whether the query string q (NUL-terminated) is ROLLBACK.
func isRollback(q []byte) bool { return isStatement(q, "rollback") }

func isStatement(q []byte, word string) bool {
	q = bytes.TrimRight(q, "\x00")
	q = bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(q), []byte(";")))
	return bytes.EqualFold(q, []byte(word))
}

// close stops the proxy and closes every connection.
func (c *CommitCut) close() {
	c.l.Close()
	c.mu.Lock()
	for conn := range c.conns {
		conn.Close()
	}
	c.conns = nil
	c.mu.Unlock()
	c.wg.Wait()
}
