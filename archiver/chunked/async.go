package chunked

import (
	"errors"
	"sync/atomic"

	"github.com/worldbackup/worldbackup/archiver/tarstream"
)

// asyncSink runs a sink on a goroutine of its own, so the walk reads the
// next files while the blobs of the last are hashed, compressed and
// written. The tar stream's bytes are copied into a few fixed buffers
// handed over through a small channel, so memory stays bounded.
type asyncSink struct {
	s    *sink
	ch   chan event
	free chan []byte
	done chan struct{}
	bad  atomic.Bool
	err  error // the sink's first error; read after done is closed
}

type eventKind byte

const (
	evWrite eventKind = iota
	evBegin
	evEnd
)

type event struct {
	kind   eventKind
	data   []byte
	f      tarstream.File
	reuse  bool
	intact bool
}

// Async bounds: asyncDepth buffers of asyncBuf bytes in flight.
const (
	asyncBuf   = 1 << 20
	asyncDepth = 4
)

// errSinkFailed ends the walk once the sink failed; finish returns the
// sink's own error.
var errSinkFailed = errors.New("chunked: storing the stream failed")

func newAsyncSink(s *sink) *asyncSink {
	a := &asyncSink{s: s, ch: make(chan event, asyncDepth), free: make(chan []byte, asyncDepth+2), done: make(chan struct{})}
	go a.loop()
	return a
}

func (a *asyncSink) loop() {
	defer close(a.done)
	for ev := range a.ch {
		if a.err == nil {
			var err error
			switch ev.kind {
			case evWrite:
				_, err = a.s.Write(ev.data)
			case evBegin:
				err = a.s.BeginFile(ev.f, ev.reuse)
			case evEnd:
				err = a.s.EndFile(ev.intact)
			}
			if err != nil {
				a.err = err
				a.bad.Store(true)
			}
		}
		if ev.data != nil {
			select {
			case a.free <- ev.data[:0]:
			default:
			}
		}
	}
}

// finish waits for the sink to take everything and returns its error.
func (a *asyncSink) finish() error {
	close(a.ch)
	<-a.done
	return a.err
}

func (a *asyncSink) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if a.bad.Load() {
			return 0, errSinkFailed
		}
		var b []byte
		select {
		case b = <-a.free:
		default:
			b = make([]byte, 0, asyncBuf)
		}
		k := min(len(p), asyncBuf)
		b = append(b, p[:k]...)
		p = p[k:]
		a.ch <- event{kind: evWrite, data: b}
	}
	return n, nil
}

// Reusable reads only what the sink was built with: safe on the walk's
// goroutine.
func (a *asyncSink) Reusable(f tarstream.File) bool { return a.s.Reusable(f) }

func (a *asyncSink) BeginFile(f tarstream.File, reuse bool) error {
	if a.bad.Load() {
		return errSinkFailed
	}
	a.ch <- event{kind: evBegin, f: f, reuse: reuse}
	return nil
}

func (a *asyncSink) EndFile(intact bool) error {
	if a.bad.Load() {
		return errSinkFailed
	}
	a.ch <- event{kind: evEnd, intact: intact}
	return nil
}
