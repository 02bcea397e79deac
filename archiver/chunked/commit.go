package chunked

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sync/semaphore"
)

// The writer's pipeline: the sink cuts the stream into blobs (on the
// asyncSink's goroutine, and a file's content-defined chunker on its own);
// a few workers hash each blob and try zstd on it; one committer takes the
// blobs in stream order, looks each up (this run's index, the previous
// version of its file), writes the new ones to packs, and keeps the file
// records, lists and segments. So the CPU of hashing and compressing,
// most of a first backup's, is spread over the cores while what the
// manifest says stays in stream order.
//
// Bounds: the raw bytes of the blobs cut and not yet committed stay below
// commitBytes (a blob is at most MaxBlob), and commitOps operations at most
// are queued.
const (
	commitBytes = 16 << 20
	commitOps   = 512
	maxHashers  = 4
)

// blob is one blob on its way from the cutter to the committer.
type blob struct {
	typ byte
	raw []byte // owned
	try bool   // try zstd on it

	// Set by prepare, before done is closed.
	zero   bool
	id     ID
	flags  byte
	stored []byte
	done   chan struct{}
}

// prepare hashes b and tries zstd on it (when b.try and it is worth it);
// scratch is the encoder's output buffer, kept only when zstd saved more
// than 1/32 of the bytes. It returns scratch for reuse.
func prepare(enc *zstd.Encoder, b *blob, scratch []byte) []byte {
	if b.typ == typeData && allZero(b.raw) {
		b.zero = true
		return scratch
	}
	b.id = ID(sha256.Sum256(b.raw))
	b.flags, b.stored = compNone, b.raw
	if b.try && len(b.raw) >= 64 && !deflated(b.raw) {
		c := enc.EncodeAll(b.raw, scratch[:0])
		if len(c) < len(b.raw)-len(b.raw)/32 {
			b.flags, b.stored = compZstd, bytes.Clone(c)
		}
		scratch = c[:0]
	}
	return scratch
}

// deflated reports whether b starts like a gzip stream or a zlib stream
// (the header a compressor writes: deflate, a 32 KiB window or less, the
// check bits right): a player file or level.dat (gzip NBT), which zstd
// cannot shrink. Data that only looks so is stored without zstd, which
// costs nothing but the saving.
func deflated(b []byte) bool {
	switch {
	case len(b) < 2:
		return false
	case b[0] == 0x1f && b[1] == 0x8b:
		return true
	default:
		return b[0]&0x0f == 8 && b[0]>>4 <= 7 && (uint16(b[0])<<8|uint16(b[1]))%31 == 0
	}
}

type opKind byte

const (
	opBlob  opKind = iota // a data blob of file c
	opMeta                // a metadata blob: a segment of its own
	opBegin               // file c begins: load the previous version's blobs
	opEnd                 // file c ends: its lists and record
	opReuse               // file c is the previous run's, unchanged
)

type op struct {
	kind   opKind
	c      *fileCut
	b      *blob
	prev   *FileRecord // opBegin
	intact bool        // opEnd
	cost   int64
}

// committer is the pipeline after the cutter.
type committer struct {
	ops    chan op
	work   chan *blob
	budget *semaphore.Weighted
	done   chan struct{}
	wg     sync.WaitGroup
	failed atomic.Bool
	err    error // the first failure; read after done is closed
	once   sync.Once
}

// errCommitFailed stops the cutter once the committer failed; the run
// returns the committer's own error.
var errCommitFailed = errors.New("chunked: storing a blob failed")

// startCommitter starts the workers and the committer of s.
func (s *sink) startCommitter() error {
	q := &committer{
		ops:    make(chan op, commitOps),
		budget: semaphore.NewWeighted(commitBytes),
		done:   make(chan struct{}),
	}
	workers := min(max(runtime.GOMAXPROCS(0), 2), maxHashers)
	q.work = make(chan *blob, 2*workers)
	encs := make([]*zstd.Encoder, workers)
	for i := range encs {
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1),
			zstd.WithLowerEncoderMem(true))
		if err != nil {
			for _, e := range encs[:i] {
				e.Close()
			}
			return err
		}
		encs[i] = enc
	}
	for _, enc := range encs {
		q.wg.Go(func() {
			defer enc.Close()
			var scratch []byte
			for b := range q.work {
				if !q.failed.Load() {
					scratch = prepare(enc, b, scratch)
				}
				close(b.done)
			}
		})
	}
	go func() {
		defer close(q.done)
		for o := range q.ops {
			if o.b != nil {
				<-o.b.done
			}
			if q.err == nil {
				if err := s.apply(o); err != nil {
					q.err = err
					q.failed.Store(true)
				}
			}
			if o.cost > 0 {
				q.budget.Release(o.cost)
			}
		}
	}()
	s.q = q
	return nil
}

// stopCommitter lets the committer finish what was submitted and returns
// its error.
func (s *sink) stopCommitter() error {
	q := s.q
	q.once.Do(func() {
		close(q.ops)
		close(q.work)
		<-q.done
		q.wg.Wait()
	})
	return q.err
}

// submit queues o; with a blob of raw bytes (copied), for the workers too.
func (s *sink) submit(o op, typ byte, raw []byte, try bool) error {
	q := s.q
	if q.failed.Load() {
		return errCommitFailed
	}
	if raw != nil {
		o.cost = max(int64(len(raw)), 1)
		// The committer releases what it took whatever happens, so this
		// never waits for ever.
		if err := q.budget.Acquire(context.Background(), o.cost); err != nil {
			return err
		}
		o.b = &blob{typ: typ, raw: bytes.Clone(raw), try: try, done: make(chan struct{})}
	}
	q.ops <- o
	if o.b != nil {
		q.work <- o.b
	}
	return nil
}

// apply does o on the committer's goroutine.
func (s *sink) apply(o op) error {
	switch o.kind {
	case opBlob:
		r, err := s.commit(o.b)
		if err != nil {
			return err
		}
		o.c.refs = append(o.c.refs, r)
	case opMeta:
		r, err := s.commit(o.b)
		if err != nil {
			return err
		}
		s.segments = append(s.segments, Segment{Meta: &r})
	case opBegin:
		// The blobs of the previous version of the file: a chunk the game
		// moved, or the unchanged part of a file that changed, is found there.
		clear(s.prevIdx)
		if o.prev != nil {
			if err := s.loadPrev(o.prev); err != nil {
				s.log.Warn("previous version of a file unreadable; it is stored again", "path", o.prev.Path, "error", err)
				clear(s.prevIdx)
			}
		}
	case opEnd:
		o.c.rec.Reusable = o.intact
		return s.finishFile(o.c)
	case opReuse:
		return s.reuseFile(o.c.rec)
	}
	return nil
}
