package tarstream

import (
	"io"
	"sync"
	"sync/atomic"

	"github.com/worldbackup/worldbackup/archiver/crashguard"
	"github.com/worldbackup/worldbackup/archiver/store"
)

// Buffers between the steps of the stream. The tar stream is handed to the
// compressor, and the compressed stream to the hash and to the destination,
// in large buffers through small channels: each step runs on a goroutine of
// its own, so that on two cores reading and tarring the files, compressing,
// hashing and writing the archive all overlap, and the hand-offs (a channel
// operation each) are few.
//
// stageBuffer is the size of one buffer. Output buffers are aligned
// (store.AlignedBuffer), so a destination writing with O_DIRECT
// (store.Local) can write them as they are.
const stageBuffer = 2 << 20

var _ Spacer = (*stage)(nil)

// stage passes what is written to it, in order, through its steps: each
// step sees every buffer in turn, after the step before it, on a goroutine
// of its own. Writes are gathered into a fixed set of buffers (one per step
// plus two: one being filled, one waiting), handed over through bounded
// channels: when a step is slower than the writer, Write blocks rather than
// buffer more.
//
// Write is not safe for concurrent use. close, or abort after an error,
// stops the goroutines.
type stage struct {
	buf  []byte        // being filled; nil once closed
	free chan []byte   // buffers ready to be filled
	in   chan []byte   // buffers for the first step, in order
	done chan struct{} // closed when every step has returned

	errOnce sync.Once
	// err is the first error of a step, set before failed is set or done
	// is closed, and read only after either.
	err     error
	failed  atomic.Bool
	aborted atomic.Bool // drop what is still queued: the stream is void
}

// newStage starts a stage whose buffers hold size bytes each, aligned for
// O_DIRECT when aligned is set (store.AlignedBuffer), and whose steps are
// steps, in order.
func newStage(size int, aligned bool, steps ...func([]byte) error) *stage {
	n := len(steps) + 2
	s := &stage{
		free: make(chan []byte, n),
		in:   make(chan []byte, n),
		done: make(chan struct{}),
	}
	buffer := func() []byte {
		if aligned {
			return store.AlignedBuffer(size)
		}
		return make([]byte, 0, size)
	}
	s.buf = buffer()
	for range n - 1 {
		s.free <- buffer()
	}
	var wg sync.WaitGroup
	from := s.in
	for i, step := range steps {
		to := s.free
		if i < len(steps)-1 {
			to = make(chan []byte, n)
		}
		in := from
		wg.Go(func() {
			defer crashguard.Recover()
			s.run(step, in, to)
		})
		from = to
	}
	go func() {
		wg.Wait()
		close(s.done)
	}()
	return s
}

// run is one step: it passes the buffers from from to step and on to to,
// in order, and closes to after from is closed (unless to is s.free).
// After an error (of any step) it only passes the buffers on, so Write never
// waits forever.
func (s *stage) run(step func([]byte) error, from <-chan []byte, to chan<- []byte) {
	for b := range from {
		if !s.failed.Load() && !s.aborted.Load() {
			if err := step(b); err != nil {
				s.errOnce.Do(func() {
					s.err = err
					s.failed.Store(true)
				})
			}
		}
		if to == s.free {
			b = b[:0]
		}
		to <- b
	}
	if to != s.free {
		close(to)
	}
}

// Space returns the free end of the buffer being filled, never empty: a
// caller may read data into it and then pass that slice (or the start of
// it) to Write, which then keeps it without a copy. The walk reads file
// data there, and crypt's age writer seals chunks there.
func (s *stage) Space() []byte {
	if len(s.buf) == cap(s.buf) {
		s.handOver()
	}
	return s.buf[len(s.buf):cap(s.buf)]
}

// handOver queues the buffer being filled and takes a free one.
func (s *stage) handOver() {
	s.in <- s.buf
	s.buf = <-s.free
}

// Write adds p to the stage. It fails with a step's error once a step has
// failed; the bytes of p may then be lost.
func (s *stage) Write(p []byte) (int, error) {
	if s.failed.Load() {
		return 0, s.err
	}
	if InPlace(s.buf, p) {
		// p was read into Space(): it is in place already.
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

// abort stops the goroutines without passing what is still queued through
// the steps, when the stream failed; it does nothing after close.
func (s *stage) abort() {
	s.aborted.Store(true)
	_ = s.close()
}

// close passes what is buffered through the steps, waits until every step
// is done with everything, and returns the first error of a step. A second
// call only returns that error again.
func (s *stage) close() error {
	if s.buf == nil {
		<-s.done
		return s.err
	}
	if len(s.buf) > 0 {
		s.in <- s.buf
	}
	s.buf = nil
	close(s.in)
	<-s.done
	return s.err
}

// hashWriter holds the last two steps of the stream: the hash of the
// compressed stream, and its write to the destination, which (with
// O_DIRECT) is mostly a wait for the disk while the next buffer is hashed.
type hashWriter struct {
	w io.Writer
	h io.Writer
	n *atomic.Int64
}

func (hw hashWriter) hash(b []byte) error {
	hw.h.Write(b)
	return nil
}

func (hw hashWriter) write(b []byte) error {
	n, err := hw.w.Write(b)
	hw.n.Add(int64(n))
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	return err
}
