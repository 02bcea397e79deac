// Package gameserver is a stand-in for a running Minecraft server in tests:
// it serves RCON (go-mc's server side, a third-party implementation of the
// protocol), records the commands it receives, and keeps rewriting its
// world's region file while autosave is on, the way a real server does.
//
// Every rewrite stamps the whole file with one generation number, block by
// block, so a copy read while a rewrite was under way holds two generations
// (a torn file), and a copy of a quiesced world holds exactly the generation
// that save-all flush wrote. Torn reports whether a copy is torn, Generation
// which generation a clean copy holds.
package gameserver

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	mcnet "github.com/Tnze/go-mc/net"
)

// RegionPath is the file the server keeps rewriting, relative to the world.
const RegionPath = "region/r.0.0.mca"

const (
	blockSize = 4096
	blocks    = 64 // a 256 KiB region file
)

// Server is a running stand-in.
type Server struct {
	world    string
	password string
	l        *mcnet.RCONListener
	log      func(cmd string)

	mu       sync.Mutex
	cmds     []string
	autosave bool
	gen      uint64 // the generation last written in full
	flushed  uint64 // the generation save-all flush wrote
	wg       sync.WaitGroup
	cancel   context.CancelFunc
}

// Start writes generation 1 into world's region file and serves RCON on
// addr ("127.0.0.1:0" for any port). log, when not nil, is called with every
// command. Stop it with Close.
func Start(world, addr, password string, log func(cmd string)) (*Server, error) {
	l, err := mcnet.ListenRCON(addr)
	if err != nil {
		return nil, fmt.Errorf("listening for rcon on %s: %w", addr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{world: world, password: password, l: l, log: log, autosave: true, cancel: cancel}
	if err := s.write(1); err != nil {
		l.Close()
		cancel()
		return nil, err
	}
	s.wg.Add(2)
	go s.serve()
	go s.autosaveLoop(ctx)
	return s, nil
}

// Addr is the RCON listener's address.
func (s *Server) Addr() string { return s.l.Addr().String() }

// Commands are the commands received so far, in order.
func (s *Server) Commands() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.cmds...)
}

// Flushed is the generation that the last save-all flush wrote (0: none).
func (s *Server) Flushed() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.flushed
}

// Writes is the number of generations written so far.
func (s *Server) Writes() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}

// Close stops serving and writing.
func (s *Server) Close() error {
	s.cancel()
	err := s.l.Close()
	s.wg.Wait()
	return err
}

func (s *Server) serve() {
	defer s.wg.Done()
	for {
		conn, err := s.l.Accept()
		if err != nil {
			return
		}
		go s.handle(conn)
	}
}

func (s *Server) handle(conn mcnet.RCONServerConn) {
	defer conn.Close()
	if err := conn.AcceptLogin(s.password); err != nil {
		return
	}
	for {
		cmd, err := conn.AcceptCmd()
		if err != nil {
			return
		}
		if err := conn.RespCmd(s.exec(cmd)); err != nil {
			return
		}
	}
}

// exec runs one command and returns the reply a Minecraft server gives.
func (s *Server) exec(cmd string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cmds = append(s.cmds, cmd)
	if s.log != nil {
		s.log(cmd)
	}
	switch cmd {
	case "save-off":
		if !s.autosave {
			return "Saving is already turned off"
		}
		s.autosave = false
		return "Automatic saving is now disabled"
	case "save-on":
		if s.autosave {
			return "Saving is already turned on"
		}
		s.autosave = true
		return "Automatic saving is now enabled"
	case "save-all flush", "save-all":
		if err := s.writeLocked(s.gen + 1); err != nil {
			return "Saving failed: " + err.Error()
		}
		s.flushed = s.gen
		return "Saving the game (this may take a moment!)Saved the game"
	default:
		return "Unknown or incomplete command, see below for error"
	}
}

// autosaveLoop rewrites the region file continuously while autosave is on.
func (s *Server) autosaveLoop(ctx context.Context) {
	defer s.wg.Done()
	for ctx.Err() == nil {
		s.mu.Lock()
		if s.autosave {
			s.writeLocked(s.gen + 1)
		}
		s.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
}

func (s *Server) write(gen uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writeLocked(gen)
}

// writeLocked rewrites the region file in place, block by block (as a
// server rewrites chunks in place), stamping every block with gen.
func (s *Server) writeLocked(gen uint64) error {
	path := filepath.Join(s.world, RegionPath)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	block := make([]byte, blockSize)
	for i := 0; i < blockSize; i += 8 {
		binary.LittleEndian.PutUint64(block[i:], gen)
	}
	for b := 0; b < blocks; b++ {
		if _, err := f.WriteAt(block, int64(b*blockSize)); err != nil {
			f.Close()
			return err
		}
	}
	// A region file the world already had may be longer: the file is
	// exactly the blocks just written.
	if err := f.Truncate(blocks * blockSize); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	s.gen = gen
	return nil
}

// ErrTorn: a copy of the region file holds more than one generation.
var ErrTorn = errors.New("region file is torn: it holds more than one generation")

// Generation returns the one generation a copy of the region file holds,
// or an error wrapping ErrTorn.
func Generation(region []byte) (uint64, error) {
	if len(region) != blocks*blockSize {
		return 0, fmt.Errorf("%w: %d bytes, want %d", ErrTorn, len(region), blocks*blockSize)
	}
	first := binary.LittleEndian.Uint64(region)
	for i := 0; i < len(region); i += 8 {
		if g := binary.LittleEndian.Uint64(region[i:]); g != first {
			return 0, fmt.Errorf("%w: generation %d at byte 0, %d at byte %d", ErrTorn, first, g, i)
		}
	}
	return first, nil
}
