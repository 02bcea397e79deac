package rcon

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// hostile is a real TCP server on loopback that speaks raw RCON packets and
// misbehaves as handle says; handle gets each connection and its number
// (1 for the first).
type hostile struct {
	l     net.Listener
	conns atomic.Int32
}

func startHostile(t *testing.T, handle func(c net.Conn, n int)) *hostile {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hostile{l: l}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n := int(h.conns.Add(1))
			mu.Lock()
			open = append(open, c)
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				handle(c, n)
			})
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return h
}

func (h *hostile) addr() string { return h.l.Addr().String() }

// readPacket reads one packet from the client.
func readPacket(c net.Conn) (id, typ int32, payload string, err error) {
	var hdr [12]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return 0, 0, "", err
	}
	n := binary.LittleEndian.Uint32(hdr[0:])
	if n < 10 || n > 1<<16 {
		return 0, 0, "", errors.New("bad length")
	}
	body := make([]byte, n-8)
	if _, err := io.ReadFull(c, body); err != nil {
		return 0, 0, "", err
	}
	return int32(binary.LittleEndian.Uint32(hdr[4:])), int32(binary.LittleEndian.Uint32(hdr[8:])), strings.TrimRight(string(body), "\x00"), nil
}

// writePacket sends one packet to the client.
func writePacket(c net.Conn, id, typ int32, payload string) error {
	buf := make([]byte, 14+len(payload))
	binary.LittleEndian.PutUint32(buf[0:], uint32(10+len(payload)))
	binary.LittleEndian.PutUint32(buf[4:], uint32(id))
	binary.LittleEndian.PutUint32(buf[8:], uint32(typ))
	copy(buf[12:], payload)
	_, err := c.Write(buf)
	return err
}

// floodLogin answers the login with empty responses carrying its ID, one
// after another, never with the auth response: each packet is one a Source
// server may send before the auth response, so only a bound on the whole
// login ends it.
func floodLogin(c net.Conn) {
	id, _, _, err := readPacket(c)
	if err != nil {
		return
	}
	for writePacket(c, id, typeResponse, "") == nil {
		time.Sleep(time.Millisecond)
	}
}

// login accepts the login with any password.
func login(c net.Conn) bool {
	id, _, _, err := readPacket(c)
	return err == nil && writePacket(c, id, typeAuthResp, "") == nil
}

// bounded runs f and fails the test when it has not returned within limit:
// the bound a hang would break, far above what the step should take.
func bounded[T any](t *testing.T, limit time.Duration, f func() T) T {
	t.Helper()
	done := make(chan T, 1)
	go func() { done <- f() }()
	select {
	case v := <-done:
		return v
	case <-time.After(limit):
		t.Fatalf("still running after %s: the step has no bound", limit)
		panic("unreachable")
	}
}

// TestDialFloodedLogin: a login answered by an endless stream of empty
// packets ends within the step's timeout, not with a fresh deadline per
// packet.
func TestDialFloodedLogin(t *testing.T) {
	h := startHostile(t, func(c net.Conn, _ int) { floodLogin(c) })
	err := bounded(t, 30*time.Second, func() error {
		c, err := Dial(t.Context(), h.addr(), password, 300*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "no answer in time") || !strings.Contains(err.Error(), "logging in") {
		t.Fatalf("Dial = %v, want a login that gave no answer in time", err)
	}
	noPassword(t, err)
}

// TestCommandFloodedReply: a command answered by an endless stream of
// replies to other requests ends within its timeout.
func TestCommandFloodedReply(t *testing.T) {
	h := startHostile(t, func(c net.Conn, _ int) {
		if !login(c) {
			return
		}
		id, _, _, err := readPacket(c)
		if err != nil {
			return
		}
		for writePacket(c, id+1000, typeResponse, "not yours") == nil {
			time.Sleep(time.Millisecond)
		}
	})
	c, err := Dial(t.Context(), h.addr(), password, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = bounded(t, 30*time.Second, func() error { _, err := c.Command(t.Context(), "save-off", 0); return err })
	if err == nil || !strings.Contains(err.Error(), "no answer in time") {
		t.Fatalf("Command = %v, want no answer in time", err)
	}
}

// closeAfterSaveOff is the server of issue 22 item 3b: the first
// connection logs in, answers save-off and closes; every later connection
// gets a flooded login. redialed is closed when the second connection
// comes.
func closeAfterSaveOff(redialed chan struct{}) func(c net.Conn, n int) {
	var once sync.Once
	return func(c net.Conn, n int) {
		if n > 1 {
			once.Do(func() { close(redialed) })
			floodLogin(c)
			return
		}
		if !login(c) {
			return
		}
		id, _, _, err := readPacket(c)
		if err == nil {
			writePacket(c, id, typeResponse, "Automatic saving is now disabled")
		}
	}
}

// TestResumeEndsOnCancel: the server closes after save-off and every redial
// gets a flooded login; with steps that would each wait an hour, the
// run's context ending (SIGTERM, the Job's deadline) still ends the
// save-on retry within ResumeGrace, with the error saying autosave is OFF.
func TestResumeEndsOnCancel(t *testing.T) {
	redialed := make(chan struct{})
	h := startHostile(t, closeAfterSaveOff(redialed))
	cfg := Config{Addr: h.addr(), Password: password, Required: true,
		Timeout: time.Hour, SaveTimeout: time.Hour, ResumeAttempts: 1000, ResumeBackoff: time.Millisecond,
		ResumeTimeout: time.Hour, ResumeGrace: 200 * time.Millisecond}
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-redialed
		cancel() // SIGTERM while save-on is being retried
	}()
	err := bounded(t, 30*time.Second, func() error {
		s, err := Quiesce(ctx, cfg, hclog.NewNullLogger())
		if s != nil {
			t.Error("Quiesce returned a session")
		}
		return err
	})
	if !errors.Is(err, ErrResume) || !strings.Contains(err.Error(), "autosave OFF") || !strings.Contains(err.Error(), "save-on") {
		t.Fatalf("Quiesce = %v, want ErrResume saying autosave is OFF and how to send save-on", err)
	}
	if !strings.HasPrefix(err.Error(), ErrResume.Error()) {
		t.Errorf("error %q: want the autosave-OFF message first, so that a shortened message keeps it", err)
	}
	noPassword(t, err)
}

// TestResumeBounded: the same server without a cancellation: ResumeTimeout
// ends the retries, however many attempts remain.
func TestResumeBounded(t *testing.T) {
	redialed := make(chan struct{})
	h := startHostile(t, closeAfterSaveOff(redialed))
	cfg := Config{Addr: h.addr(), Password: password, Required: true,
		Timeout: time.Hour, SaveTimeout: time.Hour, ResumeAttempts: 1000, ResumeBackoff: time.Millisecond,
		ResumeTimeout: 300 * time.Millisecond, ResumeGrace: time.Hour}
	err := bounded(t, 30*time.Second, func() error {
		_, err := Quiesce(t.Context(), cfg, hclog.NewNullLogger())
		return err
	})
	if !errors.Is(err, ErrResume) || !strings.Contains(err.Error(), "given up after") {
		t.Fatalf("Quiesce = %v, want ErrResume given up after ResumeTimeout", err)
	}
}
