package rcon

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/worldbackup/worldbackup/jobapi"
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
	// ResumeTimeout bounds the whole of Resume, all attempts together.
	ResumeTimeout time.Duration
	// ResumeGrace bounds what is left of Resume once its ctx ends (SIGTERM:
	// the Job's deadline or a deleted pod), so that the archiver exits, with
	// its termination message, well within the pod's termination grace
	// period (30 s by default).
	ResumeGrace time.Duration
}

// String hides the password from %v and %+v.
func (c Config) String() string {
	return fmt.Sprintf("{Addr:%s Password:<redacted> Required:%t Timeout:%s SaveTimeout:%s ResumeAttempts:%d ResumeBackoff:%s ResumeTimeout:%s ResumeGrace:%s}",
		c.Addr, c.Required, c.Timeout, c.SaveTimeout, c.ResumeAttempts, c.ResumeBackoff, c.ResumeTimeout, c.ResumeGrace)
}

// GoString hides the password from %#v.
func (c Config) GoString() string { return "rcon.Config" + c.String() }

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
	if c.ResumeTimeout <= 0 {
		c.ResumeTimeout = time.Minute
	}
	if c.ResumeGrace <= 0 {
		c.ResumeGrace = 10 * time.Second
	}
	return c
}

// Validate checks the settings that a user typed.
func (c Config) Validate() error {
	var errs []error
	if err := jobapi.CheckRconAddress(c.Addr); err != nil {
		errs = append(errs, fmt.Errorf("rcon address %w", err))
	}
	switch {
	case c.Password == "":
		errs = append(errs, errors.New("rcon password is empty: the password file must hold the server's rcon.password"))
	case len(c.Password) > MaxPassword:
		errs = append(errs, fmt.Errorf("rcon password is %d bytes, over the protocol's %d: the login packet could not carry it", len(c.Password), MaxPassword))
	}
	return errors.Join(errs...)
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

// flush sends save-all flush and waits for the confirmation within
// SaveTimeout of the start, however many other packets the server sends
// meanwhile. Its first reply may be that confirmation, and come as late: a
// vanilla server runs the command on its main thread and answers once the
// world is saved.
func (s *Session) flush(ctx context.Context) error {
	wait := max(s.cfg.SaveTimeout, s.cfg.Timeout)
	ctx, cancel := context.WithTimeoutCause(ctx, wait, fmt.Errorf("no confirmation within %s", s.cfg.SaveTimeout))
	defer cancel()
	reply, err := s.client.Command(ctx, "save-all flush", wait)
	if err != nil {
		return fmt.Errorf("the server did not confirm save-all flush within %s: %w", s.cfg.SaveTimeout, err)
	}
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
		_, _, more, err := s.client.read(ctx)
		if err != nil {
			return fmt.Errorf("the server did not confirm save-all flush within %s (last reply %q): %w", s.cfg.SaveTimeout, reply, err)
		}
		reply = more
	}
}

// failStart resumes autosave after a failed start and returns err, joined
// after the resume failure if there is one: the autosave-OFF message comes
// first, so that a shortened termination message still holds it.
func (s *Session) failStart(ctx context.Context, err error) error {
	if rerr := s.Resume(ctx); rerr != nil {
		return errors.Join(rerr, err)
	}
	return err
}

// Resume sends save-on, re-dialling a lost connection up to ResumeAttempts
// times. It runs even when ctx is already canceled (SIGTERM, the Job's
// deadline): it keeps ctx's values but not its cancellation. It is bounded
// as a whole by ResumeTimeout and, once ctx has ended, by ResumeGrace: a
// server that accepts and never answers cannot keep the archiver from
// exiting. A second call does nothing. The error says that the server
// still has autosave off and how to turn it on.
func (s *Session) Resume(ctx context.Context) error {
	if s == nil || s.resumed {
		return nil
	}
	rctx, cancel := s.resumeContext(ctx)
	defer cancel()
	var last error
	for attempt := 1; attempt <= s.cfg.ResumeAttempts && rctx.Err() == nil; attempt++ {
		if s.client == nil {
			c, err := Dial(rctx, s.cfg.Addr, s.cfg.Password, s.cfg.Timeout)
			if err != nil {
				last = err
				s.log.Warn("re-dialling for save-on failed", "attempt", attempt, "error", err)
				select {
				case <-rctx.Done():
				case <-time.After(s.cfg.ResumeBackoff):
				}
				continue
			}
			s.client = c
		}
		reply, err := s.client.Command(rctx, "save-on", s.cfg.Timeout)
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
	if rctx.Err() != nil {
		last = errors.Join(context.Cause(rctx), last)
	}
	return fmt.Errorf("%w: the game server at %s still has autosave OFF; turn it back on in its console or with `rcon-cli save-on`: %w",
		ErrResume, s.cfg.Addr, last)
}

// resumeContext returns the context of Resume: ctx's values without its
// cancellation, ended ResumeTimeout from now or ResumeGrace after ctx
// ends, whichever comes first.
func (s *Session) resumeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	base, cancelBase := context.WithCancelCause(context.WithoutCancel(ctx))
	rctx, cancelTimeout := context.WithTimeoutCause(base, s.cfg.ResumeTimeout,
		fmt.Errorf("save-on given up after %s", s.cfg.ResumeTimeout))
	var (
		mu    sync.Mutex
		grace *time.Timer
	)
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		grace = time.AfterFunc(s.cfg.ResumeGrace, func() {
			cancelBase(fmt.Errorf("save-on given up %s after the archiver was told to stop (%v)", s.cfg.ResumeGrace, context.Cause(ctx)))
		})
	})
	return rctx, func() {
		stop()
		mu.Lock()
		if grace != nil {
			grace.Stop()
		}
		mu.Unlock()
		cancelTimeout()
		cancelBase(nil)
	}
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
