package rcon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
)

// The server's own words. Minecraft answers `save-all flush` with "Saved
// the game" once the world is on disk (older servers first say "Saving...");
// "Saving failed" when it could not write.
const (
	savedReply  = "saved the game"
	failedReply = "saving failed"
)

// Config says how to reach the server and how long to wait for it.
type Config struct {
	// Addr is host:port of the server's RCON listener.
	Addr string
	// Password is read from a file (a mounted Secret) by the caller; it is
	// never logged or put into an error.
	Password string
	// Required: an unreachable server fails the backup. When false, it is a
	// warning and the backup goes on without quiescing (a server stopped for
	// maintenance has nothing to quiesce).
	Required bool
	// Timeout bounds each network step: connect, login, a command's reply.
	Timeout time.Duration
	// SaveTimeout bounds the wait for the server to confirm save-all flush.
	SaveTimeout time.Duration
	// ResumeAttempts and ResumeBackoff bound the redials for save-on after
	// a lost connection.
	ResumeAttempts int
	ResumeBackoff  time.Duration
}

func (c Config) withDefaults() Config {
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Second
	}
	if c.SaveTimeout <= 0 {
		c.SaveTimeout = 2 * time.Minute
	}
	if c.ResumeAttempts <= 0 {
		c.ResumeAttempts = 5
	}
	if c.ResumeBackoff <= 0 {
		c.ResumeBackoff = time.Second
	}
	return c
}

// Validate checks the settings that a user typed.
func (c Config) Validate() error {
	host, port, err := net.SplitHostPort(c.Addr)
	if err != nil || host == "" || port == "" {
		return fmt.Errorf("rcon address %q: want host:port, e.g. survival:25575", c.Addr)
	}
	if c.Password == "" {
		return errors.New("rcon password is empty: the password file must hold the server's rcon.password")
	}
	return nil
}

// Session is a server with autosave off. Resume turns it back on; it must be
// called on every exit path once Quiesce returned a session.
type Session struct {
	cfg     Config
	log     hclog.Logger
	client  *Client
	resumed bool
}

// Quiesce turns the server's autosave off and makes it write everything to
// disk (save-off, save-all flush), so the world folder stays still while it
// is read. It returns a nil session and no error when the server is
// unreachable and not required. On any failure after save-off was sent, it
// sends save-on before returning the error, so no server is left with
// autosave off by a failed start.
func Quiesce(ctx context.Context, cfg Config, log hclog.Logger) (*Session, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log = log.Named("rcon").With("addr", cfg.Addr)
	c, err := Dial(ctx, cfg.Addr, cfg.Password, cfg.Timeout)
	if errors.Is(err, ErrUnreachable) && !cfg.Required {
		log.Warn("game server unreachable: backing up without quiescing (--rcon-required=false)", "error", err)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	s := &Session{cfg: cfg, log: log, client: c}

	reply, err := c.Command(ctx, "save-off", cfg.Timeout)
	if err != nil {
		// save-off may have reached the server even though its reply did not.
		return nil, s.failStart(ctx, err)
	}
	log.Info("autosave off", "reply", reply)
	if err := s.flush(ctx); err != nil {
		return nil, s.failStart(ctx, err)
	}
	return s, nil
}

// flush sends save-all flush and waits for the confirmation.
func (s *Session) flush(ctx context.Context) error {
	reply, err := s.client.Command(ctx, "save-all flush", s.cfg.Timeout)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(s.cfg.SaveTimeout)
	for {
		low := strings.ToLower(reply)
		switch {
		case strings.Contains(low, failedReply):
			return fmt.Errorf("the server could not save the world: %q", reply)
		case strings.Contains(low, savedReply):
			s.log.Info("world saved", "reply", reply)
			return nil
		}
		// "Saving..." first: the confirmation follows in another packet.
		_, _, more, err := s.client.readUntil(ctx, deadline)
		if err != nil {
			return fmt.Errorf("the server did not confirm save-all flush within %s (last reply %q): %w", s.cfg.SaveTimeout, reply, err)
		}
		reply = more
	}
}

// failStart resumes autosave after a failed start and returns err, joined
// with the resume failure if there is one.
func (s *Session) failStart(ctx context.Context, err error) error {
	if rerr := s.Resume(ctx); rerr != nil {
		return errors.Join(err, rerr)
	}
	return err
}

// Resume sends save-on, re-dialling a lost connection up to ResumeAttempts
// times. It runs even when ctx is already canceled (SIGTERM, the Job's
// deadline): it keeps ctx's values but not its cancellation, bounded by its
// own attempts and timeouts. A second call does nothing. The error says that
// the server still has autosave off and how to turn it on.
func (s *Session) Resume(ctx context.Context) error {
	if s == nil || s.resumed {
		return nil
	}
	ctx = context.WithoutCancel(ctx)
	var last error
	for attempt := 1; attempt <= s.cfg.ResumeAttempts; attempt++ {
		if s.client == nil {
			c, err := Dial(ctx, s.cfg.Addr, s.cfg.Password, s.cfg.Timeout)
			if err != nil {
				last = err
				s.log.Warn("re-dialling for save-on failed", "attempt", attempt, "error", err)
				time.Sleep(s.cfg.ResumeBackoff)
				continue
			}
			s.client = c
		}
		reply, err := s.client.Command(ctx, "save-on", s.cfg.Timeout)
		if err == nil {
			s.resumed = true
			s.client.Close()
			s.log.Info("autosave on", "reply", reply)
			return nil
		}
		last = err
		s.log.Warn("save-on failed, re-dialling", "attempt", attempt, "error", err)
		s.client.Close()
		s.client = nil
	}
	return fmt.Errorf("%w: the game server at %s still has autosave OFF; turn it back on in its console or with `rcon-cli save-on`: %w",
		ErrResume, s.cfg.Addr, last)
}

// ErrResume: save-on could not be delivered; the server has autosave off.
var ErrResume = errors.New("save-on was not delivered")

// Quiescer quiesces the server of Config for a backup run: the adapter the
// backup runner takes (backup.Quiescer).
type Quiescer struct{ Config Config }

// Quiesce turns autosave off and returns the function that turns it back
// on, or nil when the server is unreachable and not required.
func (q Quiescer) Quiesce(ctx context.Context, log hclog.Logger) (func(context.Context) error, error) {
	s, err := Quiesce(ctx, q.Config, log)
	if err != nil || s == nil {
		return nil, err
	}
	return s.Resume, nil
}

// ReadPassword reads the RCON password from path (a file of a mounted
// Secret), without its trailing line break. Its errors never hold the
// file's content.
func ReadPassword(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading the rcon password file: %w", err)
	}
	pw := strings.TrimRight(string(b), "\r\n")
	if pw == "" {
		return "", fmt.Errorf("rcon password file %s is empty: it must hold the server's rcon.password", path)
	}
	return pw, nil
}
