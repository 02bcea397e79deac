package rcon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	mcnet "github.com/Tnze/go-mc/net"
	"github.com/hashicorp/go-hclog"
)

const password = "hunter2-rcon-secret"

// gameServer is an RCON server built on go-mc's server side (a third-party
// implementation of the protocol) that records the commands it receives
// and answers them the way a Minecraft server does, with knobs for the ways
// a real one misbehaves.
type gameServer struct {
	t    *testing.T
	l    *mcnet.RCONListener
	mu   sync.Mutex
	cmds []string
	// neverConfirm answers save-all flush with "Saving..." and nothing more.
	neverConfirm bool
	// saveTakes delays the one reply to save-all flush, as a vanilla server
	// does: it runs the command on its main thread and answers when saved.
	saveTakes time.Duration
	// dropAfter closes the connection after answering this command.
	dropAfter string
	// silentOn never answers this command.
	silentOn string
}

func startGameServer(t *testing.T, opts ...func(*gameServer)) *gameServer {
	t.Helper()
	l, err := mcnet.ListenRCON("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &gameServer{t: t, l: l}
	for _, o := range opts {
		o(s)
	}
	t.Cleanup(func() { l.Close() })
	go s.serve()
	return s
}

func (s *gameServer) addr() string { return s.l.Addr().String() }

func (s *gameServer) commands() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.cmds...)
}

func (s *gameServer) serve() {
	for {
		conn, err := s.l.Accept()
		if err != nil {
			return
		}
		go s.handle(conn)
	}
}

func (s *gameServer) handle(conn mcnet.RCONServerConn) {
	defer conn.Close()
	if err := conn.AcceptLogin(password); err != nil {
		return
	}
	for {
		cmd, err := conn.AcceptCmd()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.cmds = append(s.cmds, cmd)
		s.mu.Unlock()
		if cmd == s.silentOn {
			continue
		}
		var reply string
		switch cmd {
		case "save-off":
			reply = "Automatic saving is now disabled"
		case "save-all flush":
			time.Sleep(s.saveTakes)
			if s.neverConfirm {
				reply = "Saving..."
			} else {
				reply = "Saving the game (this may take a moment!)Saved the game"
			}
		case "save-on":
			reply = "Automatic saving is now enabled"
		default:
			reply = "Unknown or incomplete command"
		}
		if err := conn.RespCmd(reply); err != nil {
			return
		}
		if cmd == s.dropAfter {
			return
		}
	}
}

func fastConfig(addr string) Config {
	return Config{Addr: addr, Password: password, Required: true,
		Timeout: 300 * time.Millisecond, SaveTimeout: 500 * time.Millisecond,
		ResumeAttempts: 3, ResumeBackoff: 50 * time.Millisecond}
}

func equal(a, b []string) bool { return strings.Join(a, "|") == strings.Join(b, "|") }

// resumedAs reports whether got is want where want ends in save-on, which
// may come more than once: a save-on whose reply is late (a loaded
// machine) is sent again on a new connection, as Resume must.
func resumedAs(got, want []string) bool {
	for len(got) > len(want) && len(want) > 0 && got[len(got)-1] == "save-on" && want[len(want)-1] == "save-on" &&
		got[len(got)-2] == "save-on" {
		got = got[:len(got)-1]
	}
	return equal(got, want)
}

func noPassword(t *testing.T, err error) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), password) {
		t.Errorf("the error shows the password: %v", err)
	}
}

func TestQuiesceThenResume(t *testing.T) {
	srv := startGameServer(t)
	s, err := Quiesce(t.Context(), fastConfig(srv.addr()), hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := srv.commands(), []string{"save-off", "save-all flush"}; !equal(got, want) {
		t.Fatalf("after Quiesce the server saw %q, want %q", got, want)
	}
	if err := s.Resume(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.Resume(t.Context()); err != nil { // a second call is a no-op
		t.Fatal(err)
	}
	if got, want := srv.commands(), []string{"save-off", "save-all flush", "save-on"}; !equal(got, want) {
		t.Fatalf("the server saw %q, want %q", got, want)
	}
}

// TestSlowSaveWithinSaveTimeout: a vanilla server answers save-all flush
// once, when the world is saved, which on a large world takes longer than a
// command's Timeout; the quiesce waits for it up to SaveTimeout.
func TestSlowSaveWithinSaveTimeout(t *testing.T) {
	srv := startGameServer(t, func(s *gameServer) { s.saveTakes = 800 * time.Millisecond })
	cfg := fastConfig(srv.addr())
	cfg.SaveTimeout = 3 * time.Second // Timeout stays 300ms
	s, err := Quiesce(t.Context(), cfg, hclog.NewNullLogger())
	if err != nil {
		t.Fatalf("Quiesce of a server whose save takes 800ms (Timeout 300ms, SaveTimeout 3s): %v", err)
	}
	if err := s.Resume(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Past SaveTimeout it fails, saying the save was not confirmed.
	slow := startGameServer(t, func(s *gameServer) { s.saveTakes = 2 * time.Second })
	cfg = fastConfig(slow.addr())
	cfg.SaveTimeout = time.Second
	if _, err := Quiesce(t.Context(), cfg, hclog.NewNullLogger()); err == nil || !strings.Contains(err.Error(), "did not confirm save-all flush within 1s") {
		t.Fatalf("Quiesce of a save past SaveTimeout: %v, want an error saying it was not confirmed within 1s", err)
	}
}

// TestResumeAfterCancel: SIGTERM cancels the run's context; save-on must
// still be sent.
func TestResumeAfterCancel(t *testing.T) {
	srv := startGameServer(t)
	ctx, cancel := context.WithCancel(t.Context())
	s, err := Quiesce(ctx, fastConfig(srv.addr()), hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := s.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if got := srv.commands(); len(got) != 3 || got[2] != "save-on" {
		t.Fatalf("the server saw %q, want save-on last", got)
	}
}

// TestResumeRedials: the connection drops after save-all flush; save-on goes
// over a new connection.
func TestResumeRedials(t *testing.T) {
	srv := startGameServer(t, func(s *gameServer) { s.dropAfter = "save-all flush" })
	s, err := Quiesce(t.Context(), fastConfig(srv.addr()), hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Resume(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, want := srv.commands(), []string{"save-off", "save-all flush", "save-on"}; !equal(got, want) {
		t.Fatalf("the server saw %q, want %q", got, want)
	}
}

// TestResumeUndeliverable: the server is gone for good; Resume says that
// autosave is still off and how to turn it on.
func TestResumeUndeliverable(t *testing.T) {
	srv := startGameServer(t)
	s, err := Quiesce(t.Context(), fastConfig(srv.addr()), hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	srv.l.Close()
	s.client.Close()
	err = s.Resume(t.Context())
	if !errors.Is(err, ErrResume) || !strings.Contains(err.Error(), "autosave OFF") || !strings.Contains(err.Error(), "save-on") {
		t.Fatalf("Resume = %v, want ErrResume naming autosave OFF and save-on", err)
	}
	noPassword(t, err)
}

func TestQuiesceFailures(t *testing.T) {
	tests := []struct {
		name     string
		setup    func(t *testing.T) (addr string, srv *gameServer)
		pass     string
		required bool
		wantErr  error  // errors.Is target, or nil for any error
		wantText string // in the message
		wantCmds []string
		noError  bool // not required and unreachable: no error, no session
	}{
		{
			name:     "wrong password",
			setup:    func(t *testing.T) (string, *gameServer) { s := startGameServer(t); return s.addr(), s },
			pass:     "wrong",
			required: true,
			wantErr:  ErrAuth,
			wantText: "password",
		},
		{
			name:     "unreachable and required",
			setup:    func(t *testing.T) (string, *gameServer) { return closedAddr(t), nil },
			required: true,
			wantErr:  ErrUnreachable,
		},
		{
			name:    "unreachable and not required",
			setup:   func(t *testing.T) (string, *gameServer) { return closedAddr(t), nil },
			noError: true,
		},
		{
			name:     "silent server",
			setup:    func(t *testing.T) (string, *gameServer) { return silentAddr(t), nil },
			required: true,
			wantText: "no answer in time",
		},
		{
			name: "never confirms the save",
			setup: func(t *testing.T) (string, *gameServer) {
				s := startGameServer(t, func(s *gameServer) { s.neverConfirm = true })
				return s.addr(), s
			},
			required: true,
			wantText: "did not confirm save-all flush",
			wantCmds: []string{"save-off", "save-all flush", "save-on"},
		},
		{
			name: "no reply to save-off",
			setup: func(t *testing.T) (string, *gameServer) {
				s := startGameServer(t, func(s *gameServer) { s.silentOn = "save-off" })
				return s.addr(), s
			},
			required: true,
			wantText: "save-off",
			// save-off may have reached the server: save-on is sent anyway.
			wantCmds: []string{"save-off", "save-on"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			addr, srv := tc.setup(t)
			cfg := fastConfig(addr)
			cfg.Required = tc.required
			if tc.pass != "" {
				cfg.Password = tc.pass
			}
			start := time.Now()
			s, err := Quiesce(t.Context(), cfg, hclog.NewNullLogger())
			took := time.Since(start)
			if tc.noError {
				if err != nil || s != nil {
					t.Fatalf("Quiesce = %v, %v; want no session and no error", s, err)
				}
				return
			}
			if err == nil {
				t.Fatal("Quiesce succeeded")
			}
			t.Logf("error after %s: %v", took.Round(time.Millisecond), err)
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("error %v is not %v", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantText) {
				t.Errorf("error %q does not say %q", err, tc.wantText)
			}
			noPassword(t, err)
			if srv != nil && tc.wantCmds != nil {
				if got := srv.commands(); !resumedAs(got, tc.wantCmds) {
					t.Errorf("the server saw %q, want %q", got, tc.wantCmds)
				}
			}
			if srv != nil && tc.wantCmds == nil && len(srv.commands()) != 0 {
				t.Errorf("the server saw %q, want nothing", srv.commands())
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no port", Config{Addr: "survival", Password: "x"}, "host:port"},
		{"empty", Config{Password: "x"}, "host:port"},
		{"no password", Config{Addr: "survival:25575"}, "password file"},
		{"port not a number", Config{Addr: "127.0.0.1:abc", Password: "x"}, "port must be a number from 1 to 65535"},
		{"port too large", Config{Addr: "127.0.0.1:99999", Password: "x"}, "port must be a number from 1 to 65535"},
		{"password too long", Config{Addr: "survival:25575", Password: strings.Repeat("p", MaxPassword+1)}, "over the protocol's"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want it to say %q", err, tc.want)
			}
		})
	}
	if err := (Config{Addr: "survival-minecraft-rcon:25575", Password: "x"}).Validate(); err != nil {
		t.Fatal(err)
	}
}

// closedAddr is an address nothing listens on.
func closedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// silentAddr accepts connections and never answers.
func silentAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return l.Addr().String()
}

// TestConfigNeverPrintsThePassword: a Config printed with any verb (a
// debug log, an error that quotes it) hides the password.
func TestConfigNeverPrintsThePassword(t *testing.T) {
	c := fastConfig("127.0.0.1:25575")
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		if got := fmt.Sprintf(verb, c); strings.Contains(got, password) || !strings.Contains(got, "127.0.0.1:25575") {
			t.Errorf("%s: %s", verb, got)
		}
	}
}
