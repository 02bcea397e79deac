package chunked

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sync/semaphore"
)

// Pipeline bounds: the stored and raw bytes of the blobs read ahead and
// not yet emitted stay below pipelineBytes (a blob costs at most about
// 2*MaxBlob), pipelineBlobs blobs at most are queued, and maxWorkers
// goroutines decode and hash.
const (
	pipelineBytes = 32 << 20
	pipelineBlobs = 1024
	maxWorkers    = 4
	seenOverhead  = 256 // what a blob kept for its repeats costs besides its bytes
)

// job is one blob of the stream on its way from the pack to emit.
type job struct {
	path   string // the file the blob belongs to, "" for tar metadata
	key    string // its pack's key
	pack   ID     // its pack
	ref    Ref
	stored []byte
	raw    []byte // checked, once done is closed
	err    error
	same   *job // a repeat of this earlier blob: emit its raw bytes
	cost   int64
	done   chan struct{}
}

// stream reads the run's blobs in stream order (those want picks; all when
// want is nil), checks each against its name and calls emit with its raw
// bytes, in order. One goroutine walks the manifest and reads the packs
// (in manifest order, forward: an S3 pack is a stream), a few decode and
// hash, and the caller's emits the blobs in order, each only once it and
// every blob before it matched its hash: the first failure in stream order
// is returned and nothing after it reaches emit. The slice emit gets is
// valid until it returns.
func stream(ctx context.Context, st Store, m *Manifest, want func(Ref) bool, emit func([]byte) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	workers := min(max(runtime.GOMAXPROCS(0), 2), maxWorkers)
	work := make(chan *job, 2*workers)
	order := make(chan *job, pipelineBlobs)
	budget := semaphore.NewWeighted(pipelineBytes)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(MaxBlob),
				zstd.WithDecoderMaxWindow(MaxBlob))
			if err == nil {
				defer dec.Close()
			}
			var ciphers cipherCache
			for j := range work {
				switch {
				case err != nil:
					j.err = fmt.Errorf("zstd decoder: %w", err)
				case ctx.Err() != nil:
					j.err = ctx.Err()
				default:
					j.raw, j.err = checkSealed(dec, m.sl, &ciphers, j.pack, j.key, j.ref, j.stored)
				}
				j.stored = nil
				close(j.done)
			}
		}()
	}
	defer wg.Wait()

	go readAhead(ctx, st, m, want, budget, work, order)

	var err error
	for j := range order {
		if err != nil {
			continue // drain: the reader stops on cancel
		}
		select {
		case <-j.done:
		case <-ctx.Done():
			err = ctx.Err()
			cancel()
			continue
		}
		raw, jerr := j.raw, j.err
		if j.same != nil {
			raw = j.same.raw
		}
		switch {
		case jerr != nil && j.path != "":
			err = fmt.Errorf("%q: %w", j.path, jerr)
		case jerr != nil:
			err = jerr
		default:
			err = emit(raw)
		}
		budget.Release(j.cost)
		if err != nil {
			cancel()
		}
	}
	return err
}

// readAhead walks the manifest for stream, reading each blob's stored
// bytes and handing them to the workers (work) and, in order, to the
// emitter (order); a failure is sent on order as a job holding it. Small
// blobs are read once: their repeats point at the first (a zero padding
// shared by many chunks), within cacheBytesMax.
func readAhead(ctx context.Context, st Store, m *Manifest, want func(Ref) bool, budget *semaphore.Weighted, work, order chan<- *job) {
	defer close(order)
	defer close(work)
	rd := newReader(st)
	rd.sl = m.sl
	defer rd.close()
	send := func(ch chan<- *job, j *job) error {
		select {
		case ch <- j:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	seen := make(map[ID]*job)
	cached := 0
	err := walk(ctx, rd, m, func(path string, pack ID, r Ref) error {
		if want != nil && path != "" && !want(r) { // metadata (tar headers, no path) always
			return nil
		}
		j := &job{path: path, ref: r, done: make(chan struct{})}
		if r.Flags&compMask == compZero {
			if cap(rd.zeros) < int(r.Raw) {
				rd.zeros = make([]byte, r.Raw) // a new one: queued jobs keep the old
			}
			j.raw = rd.zeros[:r.Raw]
			close(j.done)
			return send(order, j)
		}
		if p, ok := seen[r.ID]; ok {
			j.same = p
			close(j.done)
			return send(order, j)
		}
		j.cost = int64(r.Stored) + int64(r.Raw)
		if err := budget.Acquire(ctx, j.cost); err != nil {
			return err
		}
		key, stored, err := rd.read(ctx, pack, r, make([]byte, r.Stored))
		if err != nil {
			budget.Release(j.cost)
			return err
		}
		j.key, j.pack, j.stored = key, pack, stored
		if c := int(r.Raw) + seenOverhead; int(r.Raw) <= cacheBlobMax && cached+c <= cacheBytesMax {
			seen[r.ID] = j
			cached += c
		}
		if err := send(order, j); err != nil {
			budget.Release(j.cost)
			return err
		}
		return send(work, j)
	})
	if err != nil && ctx.Err() == nil {
		j := &job{err: err, done: make(chan struct{})}
		close(j.done)
		_ = send(order, j)
	}
}
