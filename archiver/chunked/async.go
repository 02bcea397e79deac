package chunked

import (
	"errors"
	"sync/atomic"

	"github.com/worldbackup/worldbackup/archiver/crashguard"
	"github.com/worldbackup/worldbackup/archiver/tarstream"
)

// asyncSink runs a sink on a goroutine of its own, so the walk reads the
// next files while the blobs of the last are hashed, compressed and
// written. What the walk hands the sink (the tar stream's bytes, and where
// each file begins and ends) is gathered into batches of up to asyncBuf
// bytes, handed over through a small channel: one hand-off per batch, not
// one per header, file or write (a world's thousands of small player files
// made several each), and memory stays bounded.
type asyncSink struct {
	s    *sink
	cur  *batch      // being filled by the walk
	skip bool        // in a reused file: its data is zeros the sink drops
	ch   chan *batch // to the sink's goroutine
	free chan *batch // batches the sink is done with
	done chan struct{}
	bad  atomic.Bool
	err  error // the sink's first error; read after done is closed
}

// The walk sees an asyncSink as a Sink it can read file data into.
var (
	_ tarstream.Sink   = (*asyncSink)(nil)
	_ tarstream.Spacer = (*asyncSink)(nil)
)

// batch is what the walk did, in order: the bytes written, one after the
// other in data, and the events (a write says where its bytes end).
type batch struct {
	data []byte
	evs  []event
}

type eventKind byte

const (
	evWrite eventKind = iota
	evSkip            // a reused file's data: only counted, never copied
	evBegin
	evEnd
)

type event struct {
	kind   eventKind
	end    int // evWrite: its bytes are data[previous write's end:end]; evSkip: how many
	f      tarstream.File
	reuse  bool
	intact bool
}

// Async bounds: asyncDepth batches of asyncBuf bytes (and at most
// asyncEvents events) in flight.
const (
	asyncBuf    = 1 << 20
	asyncDepth  = 4
	asyncEvents = 4096
)

// errSinkFailed ends the walk once the sink failed; finish returns the
// sink's own error.
var errSinkFailed = errors.New("chunked: storing the stream failed")

func newAsyncSink(s *sink) *asyncSink {
	a := &asyncSink{s: s, ch: make(chan *batch, asyncDepth), free: make(chan *batch, asyncDepth+2), done: make(chan struct{})}
	go a.loop()
	return a
}

func (a *asyncSink) loop() {
	defer crashguard.Recover()
	defer close(a.done)
	for b := range a.ch {
		start := 0
		for _, ev := range b.evs {
			if a.err != nil {
				break
			}
			var err error
			switch ev.kind {
			case evWrite:
				_, err = a.s.Write(b.data[start:ev.end])
				start = ev.end
			case evSkip:
				err = a.s.skip(int64(ev.end))
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
		b.data, b.evs = b.data[:0], b.evs[:0]
		select {
		case a.free <- b:
		default:
		}
	}
}

// finish hands the last batch over, waits for the sink to take everything
// and returns its error.
func (a *asyncSink) finish() error {
	a.send()
	close(a.ch)
	<-a.done
	return a.err
}

// batch returns the batch being filled, after handing it over when it is
// full (no room for data, or asyncEvents events); its data has room.
func (a *asyncSink) batch() *batch {
	if b := a.cur; b != nil && (len(b.data) == cap(b.data) || len(b.evs) == asyncEvents) {
		a.send()
	}
	if a.cur == nil {
		select {
		case a.cur = <-a.free:
		default:
			a.cur = &batch{data: make([]byte, 0, asyncBuf)}
		}
	}
	return a.cur
}

// send hands the batch being filled (if any) to the sink's goroutine.
func (a *asyncSink) send() {
	if a.cur != nil && len(a.cur.evs) > 0 {
		a.ch <- a.cur
		a.cur = nil
	}
}

// Space returns the free end of the batch being filled: file data read
// there is kept by Write without a copy (tarstream.Spacer).
func (a *asyncSink) Space() []byte {
	b := a.batch()
	return b.data[len(b.data):cap(b.data)]
}

func (a *asyncSink) Write(p []byte) (int, error) {
	n := len(p)
	if a.skip && n > 0 {
		// The zeros standing in for a reused file's data: counted in
		// one event, not copied.
		if a.bad.Load() {
			return 0, errSinkFailed
		}
		a.batch().last(evSkip).end += n
		return n, nil
	}
	if b := a.cur; b != nil && tarstream.InPlace(b.data, p) {
		// p was read into Space(): it is in place already.
		b.data = b.data[:len(b.data)+n]
		a.wrote(b)
		return n, nil
	}
	for len(p) > 0 {
		if a.bad.Load() {
			return 0, errSinkFailed
		}
		b := a.batch()
		k := min(len(p), cap(b.data)-len(b.data))
		b.data = append(b.data, p[:k]...)
		p = p[k:]
		a.wrote(b)
	}
	return n, nil
}

// wrote records that b's data now ends with a write's bytes.
func (a *asyncSink) wrote(b *batch) { b.last(evWrite).end = len(b.data) }

// last returns b's last event when it is of kind (one write or skip after
// another is one event), else a new one of kind appended to b.
func (b *batch) last(kind eventKind) *event {
	if i := len(b.evs) - 1; i >= 0 && b.evs[i].kind == kind {
		return &b.evs[i]
	}
	b.evs = append(b.evs, event{kind: kind})
	return &b.evs[len(b.evs)-1]
}

// Reusable reads only what the sink was built with: safe on the walk's
// goroutine.
func (a *asyncSink) Reusable(f tarstream.File) bool { return a.s.Reusable(f) }

func (a *asyncSink) BeginFile(f tarstream.File, reuse bool) error {
	if a.bad.Load() {
		return errSinkFailed
	}
	b := a.batch()
	b.evs = append(b.evs, event{kind: evBegin, f: f, reuse: reuse})
	a.skip = reuse
	return nil
}

func (a *asyncSink) EndFile(intact bool) error {
	if a.bad.Load() {
		return errSinkFailed
	}
	b := a.batch()
	b.evs = append(b.evs, event{kind: evEnd, intact: intact})
	a.skip = false
	return nil
}
