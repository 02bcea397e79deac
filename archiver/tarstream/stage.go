package tarstream

import (
	"io"
	"sync/atomic"
	"unsafe"
)

// Buffers between the stages of the stream. The tar stream is handed to the
// compressor, and the compressed stream to the hash and the destination, in
// large buffers through small channels: each stage runs on a goroutine of
// its own, so that on two cores reading and tarring the files overlap
// compressing, hashing and writing the archive, and the hand-offs (a
// channel operation each) are few.
const (
	// stageBuffer is the size of one buffer. Output buffers are aligned
	// to bufferAlign, so a destination writing with O_DIRECT (store.Local)
	// can write them as they are.
	stageBuffer = 2 << 20
	// stageBuffers is the number of buffers of each stage: one being
	// filled, one being consumed, one waiting in between.
	stageBuffers = 3
	// bufferAlign is the alignment of the output buffers: the page size,
	// a multiple of every block device's logical block size.
	bufferAlign = 4096
)

// stage passes what is written to it, in order, to consume, which runs on
// a goroutine of its own. Writes are gathered into a few pooled buffers,
// handed over through a bounded channel: when consume is slower than the
// writer, Write blocks rather than buffer more.
//
// Write is not safe for concurrent use. close, or abort after an error,
// stops the goroutine.
type stage struct {
	consume func([]byte) error

	buf  []byte      // being filled; nil once closed
	free chan []byte // buffers ready to be filled
	full chan []byte // buffers to consume, in order
	done chan struct{}

	// err is the first error of consume, set by the goroutine before
	// failed is set or done is closed, and read only after either.
	err     error
	failed  atomic.Bool
	aborted atomic.Bool // drop what is still queued: the stream is void
}

// newStage starts a stage of stageBuffers buffers of size bytes each,
// aligned to align bytes (1: no alignment).
func newStage(size, align int, consume func([]byte) error) *stage {
	s := &stage{
		consume: consume,
		free:    make(chan []byte, stageBuffers),
		full:    make(chan []byte, stageBuffers),
		done:    make(chan struct{}),
	}
	s.buf = alignedBuffer(size, align)
	for range stageBuffers - 1 {
		s.free <- alignedBuffer(size, align)
	}
	go s.run()
	return s
}

// alignedBuffer returns an empty buffer of capacity size whose first byte
// is aligned to align bytes.
func alignedBuffer(size, align int) []byte {
	if align <= 1 {
		return make([]byte, 0, size)
	}
	b := make([]byte, size+align)
	off := 0
	if r := int(uintptr(unsafe.Pointer(&b[0])) & uintptr(align-1)); r != 0 {
		off = align - r
	}
	return b[off : off : off+size]
}

// run consumes the full buffers in order and hands them back. After an
// error it drains the rest without consuming, so Write never waits forever.
func (s *stage) run() {
	defer close(s.done)
	for b := range s.full {
		if s.err == nil && !s.aborted.Load() {
			if err := s.consume(b); err != nil {
				s.err = err
				s.failed.Store(true)
			}
		}
		s.free <- b[:0]
	}
}

// space returns the free end of the buffer being filled, never empty: a
// caller may read data into it and then pass that slice (or the start of
// it) to Write, which then keeps it without a copy.
func (s *stage) space() []byte {
	if len(s.buf) == cap(s.buf) {
		s.handOver()
	}
	return s.buf[len(s.buf):cap(s.buf)]
}

// handOver queues the buffer being filled and takes a free one.
func (s *stage) handOver() {
	s.full <- s.buf
	s.buf = <-s.free
}

// Write adds p to the stage. It fails with consume's error once consume
// has failed; the bytes of p may then be lost.
func (s *stage) Write(p []byte) (int, error) {
	if s.failed.Load() {
		return 0, s.err
	}
	if len(p) > 0 && len(s.buf) < cap(s.buf) && len(p) <= cap(s.buf)-len(s.buf) &&
		&p[0] == &s.buf[:len(s.buf)+1][len(s.buf)] {
		// p was read into space(): it is in place already.
		s.buf = s.buf[:len(s.buf)+len(p)]
		return len(p), nil
	}
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
			s.handOver()
		}
	}
	return n, nil
}

// abort stops the goroutine without consuming what is still queued, when
// the stream failed; it does nothing after close.
func (s *stage) abort() {
	s.aborted.Store(true)
	_ = s.close()
}

// close consumes what is buffered, waits until everything is consumed, and
// returns the first error of consume. A second call only returns that error
// again.
func (s *stage) close() error {
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

// hashWriter writes to w and hashes (and counts) what it writes. The
// hash of a buffer runs while the buffer is being written (both only read
// it): with O_DIRECT the write is mostly a wait for the disk.
type hashWriter struct {
	w io.Writer
	h interface{ Write([]byte) (int, error) }
	n *atomic.Int64
}

func (hw hashWriter) consume(b []byte) error {
	var n int
	var err error
	written := make(chan struct{})
	go func() {
		defer close(written)
		n, err = hw.w.Write(b)
	}()
	// On a short write the hash covers bytes that were not written, but
	// then the stream fails and its archive is discarded.
	hw.h.Write(b)
	<-written
	hw.n.Add(int64(n))
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	return err
}
