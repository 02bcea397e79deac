// Package rcon quiesces a running Minecraft server for a backup over RCON:
// save-off, then save-all flush until the server confirms the save, and
// save-on afterwards, whatever happened in between.
//
// The client speaks the RCON protocol as Minecraft servers implement it (the
// Source RCON packet: little-endian int32 length, request ID and type, a
// NUL-terminated payload and one more NUL): a login packet (type 3) answered
// by an auth response carrying the same request ID, or -1 for a wrong
// password; a command packet (type 2) answered by a response (type 0) with
// the command's output. Every network step (connect and login, a command
// and its reply) has one deadline for the whole step, not one per packet,
// because a server that accepts and never answers, or answers with an
// endless stream of other packets, must not hold a backup forever.
package rcon

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// Packet types of the protocol.
const (
	typeResponse = 0
	typeCommand  = 2
	typeAuthResp = 2
	typeLogin    = 3
)

// maxPayload bounds what is read for one packet. Minecraft servers send at
// most 4096 bytes of payload per packet; anything longer is not an RCON peer.
const maxPayload = 4096

// MaxPassword is the longest password a login packet carries.
const MaxPassword = maxPayload

// Errors callers branch on.
var (
	// ErrUnreachable: the connection to the server could not be made (the
	// server is stopped, or the address is wrong). A backup with
	// --rcon-required=false goes on without quiescing.
	ErrUnreachable = errors.New("rcon server unreachable")
	// ErrAuth: the server refused the password.
	ErrAuth = errors.New("rcon password refused")
)

// Client is one authenticated RCON connection. It is not safe for
// concurrent use.
type Client struct {
	conn    net.Conn
	addr    string
	timeout time.Duration
	nextID  int32
}

// Dial connects to addr and logs in with password. The whole step, connect
// and login, must finish within timeout and before ctx ends: a server that
// answers the login with an endless stream of other packets is given up on
// as one that does not answer. A connection failure wraps ErrUnreachable, a
// refused password ErrAuth. The password is never part of an error.
func Dial(ctx context.Context, addr, password string, timeout time.Duration) (*Client, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("connecting and logging in took longer than %s", timeout))
	defer cancel()
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w: %w", addr, ErrUnreachable, ctxErr(ctx, err))
	}
	c := &Client{conn: conn, addr: addr, timeout: timeout, nextID: 1}
	id := c.id()
	if err := c.write(ctx, id, typeLogin, password); err != nil {
		conn.Close()
		return nil, fmt.Errorf("logging in to %s: %w", addr, err)
	}
	for {
		rid, typ, _, err := c.read(ctx)
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("logging in to %s: waiting for the auth response: %w", addr, err)
		}
		if typ == typeResponse && rid == id {
			continue // Source servers send an empty response before the auth response
		}
		switch {
		case rid == -1:
			conn.Close()
			return nil, fmt.Errorf("logging in to %s: %w (check the RCON password Secret against the server's rcon.password)", addr, ErrAuth)
		case typ != typeAuthResp || rid != id:
			conn.Close()
			return nil, fmt.Errorf("logging in to %s: unexpected packet (type %d, id %d) instead of the auth response", addr, typ, rid)
		}
		return c, nil
	}
}

// Command sends cmd and returns the server's reply. The whole step, send
// and reply, must finish within the client's timeout (or wait, when
// larger) and before ctx ends, however many other packets the server sends
// meanwhile.
func (c *Client) Command(ctx context.Context, cmd string, wait time.Duration) (string, error) {
	if wait < c.timeout {
		wait = c.timeout
	}
	ctx, cancel := context.WithTimeoutCause(ctx, wait, fmt.Errorf("no reply to %q within %s", cmd, wait))
	defer cancel()
	id := c.id()
	if err := c.write(ctx, id, typeCommand, cmd); err != nil {
		return "", fmt.Errorf("sending %q to %s: %w", cmd, c.addr, err)
	}
	for {
		rid, typ, payload, err := c.read(ctx)
		if err != nil {
			return "", fmt.Errorf("waiting for the reply to %q from %s: %w", cmd, c.addr, err)
		}
		if rid == id && typ == typeResponse {
			return payload, nil
		}
		// A reply to an earlier, timed-out command: skip it.
	}
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

func (c *Client) id() int32 {
	id := c.nextID
	c.nextID++
	return id
}

// write sends one packet, giving up when ctx ends (every caller's ctx
// carries the deadline of its step).
func (c *Client) write(ctx context.Context, id, typ int32, payload string) error {
	if len(payload) > maxPayload {
		return fmt.Errorf("payload of %d bytes is over the protocol's %d", len(payload), maxPayload)
	}
	buf := make([]byte, 4+4+4+len(payload)+2)
	binary.LittleEndian.PutUint32(buf[0:], uint32(4+4+len(payload)+2))
	binary.LittleEndian.PutUint32(buf[4:], uint32(id))
	binary.LittleEndian.PutUint32(buf[8:], uint32(typ))
	copy(buf[12:], payload)
	stop := c.deadline(ctx)
	defer stop()
	_, err := c.conn.Write(buf)
	return ctxErr(ctx, err)
}

// read reads one packet, giving up when ctx ends: the deadline is the
// step's, not one per packet, so a stream of packets cannot extend it.
func (c *Client) read(ctx context.Context) (id, typ int32, payload string, err error) {
	stop := c.deadline(ctx)
	defer stop()
	var hdr [12]byte
	if _, err := io.ReadFull(c.conn, hdr[:]); err != nil {
		return 0, 0, "", ctxErr(ctx, err)
	}
	n := int32(binary.LittleEndian.Uint32(hdr[0:]))
	if n < 10 || n > maxPayload+10 {
		return 0, 0, "", fmt.Errorf("packet length %d is not an RCON packet's", n)
	}
	body := make([]byte, n-8)
	if _, err := io.ReadFull(c.conn, body); err != nil {
		return 0, 0, "", ctxErr(ctx, err)
	}
	id = int32(binary.LittleEndian.Uint32(hdr[4:]))
	typ = int32(binary.LittleEndian.Uint32(hdr[8:]))
	return id, typ, strings.TrimRight(string(body), "\x00"), nil
}

// deadline sets the connection's deadline to ctx's (the client's timeout
// from now when ctx has none), and makes ctx's cancellation interrupt a
// blocked read or write. The returned func undoes the watch.
func (c *Client) deadline(ctx context.Context) func() {
	d, ok := ctx.Deadline()
	if !ok {
		d = time.Now().Add(c.timeout)
	}
	c.conn.SetDeadline(d)
	stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Unix(1, 0)) })
	return func() { stop() }
}

// ctxErr prefers ctx's error, and the cause of it (the step that took too
// long), to the I/O error it caused.
func ctxErr(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		cause := context.Cause(ctx)
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("no answer in time: %w (%v)", cause, err)
		}
		return fmt.Errorf("%w (%v)", cause, err)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("no answer in time: %w", err)
	}
	return err
}
