package tarstream

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"
	"sync/atomic"
)

// The sink's buffers: sinkBuffers of sinkBuffer bytes each, so at most
// that much compressed output waits for its hash and write. Writes of 1 MiB
// also pass store.Local's write buffer without a copy.
const (
	sinkBuffer  = 1 << 20
	sinkBuffers = 3
)

// sink hashes (SHA-256), counts and writes the compressed stream to dst on
// a goroutine of its own, so that hashing and writing the archive overlap
// compression instead of following it. Writes are copied into a few pooled
// buffers, handed over through a bounded channel: when dst is slower than
// the compressor, Write blocks rather than buffer more.
//
// Write is not safe for concurrent use (the compressors call it from one
// goroutine at a time). close, or abort after an error, stops the
// goroutine.
type sink struct {
	dst io.Writer
	h   hash.Hash
	n   *atomic.Int64

	buf  []byte      // being filled; nil once closed
	free chan []byte // buffers ready to be filled
	full chan []byte // buffers to hash and write, in order
	done chan struct{}

	// err is the first error of dst, set by the goroutine before failed is
	// set or done is closed, and read only after either.
	err     error
	failed  atomic.Bool
	aborted atomic.Bool // drop what is still queued: the stream is void
}

func newSink(dst io.Writer, n *atomic.Int64) *sink {
	s := &sink{
		dst:  dst,
		h:    sha256.New(),
		n:    n,
		free: make(chan []byte, sinkBuffers),
		full: make(chan []byte, sinkBuffers),
		done: make(chan struct{}),
	}
	s.buf = make([]byte, 0, sinkBuffer)
	for range sinkBuffers - 1 {
		s.free <- make([]byte, 0, sinkBuffer)
	}
	go s.run()
	return s
}

// run hashes and writes the full buffers in order, and hands them back.
// After an error it drains the rest without writing, so Write never waits
// forever.
func (s *sink) run() {
	defer close(s.done)
	for b := range s.full {
		if s.err == nil && !s.aborted.Load() {
			n, err := s.dst.Write(b)
			s.h.Write(b[:n])
			s.n.Add(int64(n))
			if err == nil && n < len(b) {
				err = io.ErrShortWrite
			}
			if err != nil {
				s.err = err
				s.failed.Store(true)
			}
		}
		s.free <- b[:0]
	}
}

// Write copies p into the sink. It fails with dst's error once a write to
// dst has failed; the bytes of p may then be lost.
func (s *sink) Write(p []byte) (int, error) {
	var n int
	for len(p) > 0 {
		if s.failed.Load() {
			return n, s.err
		}
		c := copy(s.buf[len(s.buf):cap(s.buf)], p)
		s.buf = s.buf[:len(s.buf)+c]
		n += c
		p = p[c:]
		if len(s.buf) == cap(s.buf) {
			s.full <- s.buf
			s.buf = <-s.free
		}
	}
	return n, nil
}

// abort stops the goroutine without writing what is still queued, when
// the stream failed; it does nothing after close.
func (s *sink) abort() {
	s.aborted.Store(true)
	_ = s.close()
}

// close writes what is buffered, waits until everything is hashed and
// written, and returns the first error of dst. It does not close dst. A
// second call only returns that error again.
func (s *sink) close() error {
	if s.buf == nil {
		<-s.done
		return s.err
	}
	if len(s.buf) > 0 {
		s.full <- s.buf
	}
	s.buf = nil
	close(s.full)
	<-s.done
	return s.err
}

// sum returns the lowercase hex SHA-256 of what was written; only after
// close.
func (s *sink) sum() string { return hex.EncodeToString(s.h.Sum(nil)) }
