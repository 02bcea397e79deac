package chunked

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/worldbackup/worldbackup/archiver/store"
	"github.com/worldbackup/worldbackup/jobapi"
)

// Store is the archive store a chunked run is kept in (store.Local,
// store.S3, store.Mem): objects written atomically, read as a stream.
type Store interface {
	Put(ctx context.Context, key string, write func(io.Writer) error) (size int64, err error)
	Open(ctx context.Context, key string) (io.ReadCloser, error)
}

// Blob types, in a pack's index.
const (
	typeData = 0 // file data or tar metadata
	typeList = 1 // a list blob
)

// packHeader is the fixed start of a pack; sealedPackHeader that of a
// pack of a sealed run (version 2: its blobs are encrypted).
var (
	packHeader       = []byte{'W', 'B', 'P', 'K', Version, 0, 0, 0}
	sealedPackHeader = []byte{'W', 'B', 'P', 'K', sealedVersion, 0, 0, 0}
)

// packFooter is the size of a pack's footer: the index length (u32 LE) and
// packEndMagic.
const packFooter = 8

// PackTarget is the size at which a pack is closed and the next begun.
const PackTarget = 32 << 20

// packEntry is a blob in a pack's index.
type packEntry struct {
	ID     ID
	Type   byte
	Flags  byte
	Offset uint32
	Stored uint32
	Raw    uint32
}

func encodePackIndex(entries []packEntry) []byte {
	var e encoder
	e.uvarint(uint64(len(entries)))
	for _, p := range entries {
		e.id(p.ID)
		e.byte(p.Type)
		e.byte(p.Flags)
		e.uvarint(uint64(p.Offset))
		e.uvarint(uint64(p.Stored))
		e.uvarint(uint64(p.Raw))
	}
	e.b = binary.LittleEndian.AppendUint32(e.b, uint32(len(e.b)))
	return append(e.b, packEndMagic...)
}

// ParsePackIndex parses the index of a whole pack's bytes and checks that
// every blob it lists lies between the header and the index. It does not
// check the blobs' hashes.
func ParsePackIndex(pack []byte) ([]packEntry, error) {
	if len(pack) < len(packHeader)+packFooter || !bytes.Equal(pack[:4], packHeader[:4]) {
		return nil, fmt.Errorf("%w: not a pack (no %q magic)", ErrCorrupt, packMagic)
	}
	if pack[4] != Version && pack[4] != sealedVersion {
		return nil, fmt.Errorf("%w: pack version %d; this archiver reads versions %d and %d", ErrCorrupt, pack[4], Version, sealedVersion)
	}
	end := pack[len(pack)-packFooter:]
	if string(end[4:]) != packEndMagic {
		return nil, fmt.Errorf("%w: pack has no index footer", ErrCorrupt)
	}
	n := int64(binary.LittleEndian.Uint32(end[:4]))
	idxStart := int64(len(pack)) - packFooter - n
	if n > maxPackIndex || idxStart < int64(len(packHeader)) {
		return nil, fmt.Errorf("%w: pack index length %d does not fit the pack", ErrCorrupt, n)
	}
	r := bytes.NewReader(pack[idxStart : len(pack)-packFooter])
	d := newDecoder(r)
	count := d.uvarint("pack index count", uint64(n)/37)
	var out []packEntry
	for i := uint64(0); i < count && d.err == nil; i++ {
		p := packEntry{ID: d.id("blob ID"), Type: d.byte("blob type"), Flags: d.byte("blob flags")}
		p.Offset = uint32(d.uvarint("blob offset", uint64(idxStart)))
		p.Stored = uint32(d.uvarint("stored length", MaxBlob+maxOverhead))
		p.Raw = uint32(d.uvarint("raw length", MaxBlob))
		if d.err != nil {
			break
		}
		if p.Type > typeList {
			d.fail("blob %s has unknown type %d", p.ID, p.Type)
		}
		if int64(p.Offset) < int64(len(packHeader)) || int64(p.Offset)+int64(p.Stored) > idxStart {
			d.fail("blob %s at %d+%d lies outside the pack's blobs", p.ID, p.Offset, p.Stored)
		}
		out = append(out, p)
	}
	if d.err == nil && r.Len() != 0 {
		d.fail("%d bytes after the pack index", r.Len())
	}
	if d.err != nil {
		return nil, d.err
	}
	return out, nil
}

// packWriter streams one pack into the store: Put runs on its own
// goroutine, fed through a channel, so a pack is never held in memory
// whole. The blobs are gathered into batches of packBatch bytes (a pack of
// small chunk blobs would otherwise be handed over a few KiB at a time),
// and up to packQueue batches wait for the store: a slow disk (store.Local
// writes with O_DIRECT, each write waiting for the device) writes while the
// run hashes and compresses the next blobs, instead of in turn with them.
type packWriter struct {
	id      ID
	key     string
	ch      chan []byte
	free    chan []byte // batches the store is done with
	batch   []byte      // the batch being filled
	done    chan packResult
	size    int64
	entries []packEntry
	scratch []byte // a sealed blob that straddles two batches

	// A sealed run's pack seals its blobs on a goroutine of its own
	// (sealing), off the run's path, which hashes and compresses the next
	// blobs meanwhile: add hands it a copy of each blob.
	seal   chan sealJob
	sealed chan struct{} // closed once sealing has put every blob in
	spare  chan []byte   // copies sealing is done with, for reuse
}

// sealJob is one blob for a pack's sealing goroutine: its bytes after
// compression (a copy the job owns), its offset in the pack, ID and flags.
type sealJob struct {
	stored []byte
	off    uint32
	id     ID
	flags  byte
}

// sealQueue bounds the blobs waiting to be sealed: at most sealQueue
// copies of MaxBlob bytes per open pack.
const sealQueue = 16

// Pack writer bounds: a batch's size and how many are in flight, so an
// open pack holds at most (packQueue+2)*packBatch bytes.
const (
	packBatch = 1 << 20
	packQueue = 8
)

type packResult struct {
	size int64
	err  error
}

// errPackAborted ends the Put of a pack the run gave up on.
var errPackAborted = errors.New("pack aborted")

// newPackID returns a fresh random pack ID.
func newPackID() (ID, error) {
	var id ID
	_, err := rand.Read(id[:])
	return id, err
}

func newPackWriter(ctx context.Context, st Store, id ID) (*packWriter, error) {
	return newPackWriterHeader(ctx, st, id, packHeader, nil, nil)
}

// newBatchPool returns the spare batches shared by the packs of a run (so
// a pack does not allocate its batches afresh: at 32 MiB a pack, that was
// a third of the run's bytes allocated, cleared and collected).
func newBatchPool() chan []byte { return make(chan []byte, packQueue+2) }

// newPackWriterHeader is newPackWriter with the pack's header (a sealed
// run's: sealedPackHeader), taking its batches from pool and giving them
// back there (nil: a pool of its own). With sl, its blobs are sealed with
// sl (addSealed), on a goroutine of its own.
func newPackWriterHeader(ctx context.Context, st Store, id ID, header []byte, pool chan []byte, sl *Sealer) (*packWriter, error) {
	key, err := jobapi.PackKey(id.String())
	if err != nil {
		return nil, err
	}
	if pool == nil {
		pool = newBatchPool()
	}
	p := &packWriter{id: id, key: key, ch: make(chan []byte, packQueue), free: pool,
		done: make(chan packResult, 1), size: int64(len(packHeader))}
	p.batch = append(p.take(), header...)
	if sl != nil {
		p.seal, p.sealed, p.spare = make(chan sealJob, sealQueue), make(chan struct{}), make(chan []byte, sealQueue+1)
		go p.sealing(sl)
	}
	go func() {
		size, err := st.Put(ctx, key, func(w io.Writer) error {
			var werr error
			aborted := true
			for b := range p.ch {
				if b == nil {
					aborted = false
					continue
				}
				if werr == nil {
					if _, err := w.Write(b); err != nil {
						werr = fmt.Errorf("writing pack %s: %w", key, err)
					}
				}
				p.recycle(b)
			}
			if werr == nil && aborted {
				werr = errPackAborted
			}
			return werr
		})
		p.done <- packResult{size, err}
		// A Put that failed before calling write (no temp file) must not
		// leave the run blocked sending to it.
		for range p.ch {
		}
	}()
	return p, nil
}

// recycle hands a batch the store wrote back to the run.
func (p *packWriter) recycle(b []byte) {
	if cap(b) != packBatch {
		return // the index
	}
	select {
	case p.free <- b[:0]:
	default:
	}
}

// flushBatch sends the batch being filled to the store and starts another.
func (p *packWriter) flushBatch() {
	if len(p.batch) == 0 {
		return
	}
	p.ch <- p.batch
	p.batch = p.take()
}

// take returns a spare batch, or a new one.
func (p *packWriter) take() []byte {
	select {
	case b := <-p.free:
		return b
	default:
		// Aligned, so store.Local writes every full batch with O_DIRECT as
		// it is, without copying it into a buffer of its own.
		return store.AlignedBuffer(packBatch)
	}
}

// put appends b to the pack's bytes. Batches are sent full (all but the
// pack's last), so every batch starts at a multiple of packBatch in the
// pack: with aligned memory, a write the store can make with O_DIRECT.
func (p *packWriter) put(b []byte) {
	for len(b) > 0 {
		c := copy(p.batch[len(p.batch):cap(p.batch)], b)
		p.batch = p.batch[:len(p.batch)+c]
		b = b[c:]
		if len(p.batch) == cap(p.batch) {
			p.flushBatch()
		}
	}
}

// add appends a blob's stored bytes (copied: the caller keeps stored) and
// returns its offset.
func (p *packWriter) add(id ID, typ, flags byte, stored []byte, raw int) uint32 {
	off := uint32(p.size)
	p.entries = append(p.entries, packEntry{ID: id, Type: typ, Flags: flags, Offset: off, Stored: uint32(len(stored)), Raw: uint32(raw)})
	p.size += int64(len(stored))
	p.put(stored)
	return off
}

// addSealed is add for a sealed run: it records the blob at its place,
// len(stored) plus sl.overhead() bytes, and hands a copy of stored (the
// blob's bytes after compression; the caller keeps stored) to the pack's
// sealing goroutine.
func (p *packWriter) addSealed(sl *Sealer, id ID, typ, flags byte, stored []byte, raw int) uint32 {
	off := uint32(p.size)
	n := len(stored) + sl.overhead()
	p.entries = append(p.entries, packEntry{ID: id, Type: typ, Flags: flags, Offset: off, Stored: uint32(n), Raw: uint32(raw)})
	p.size += int64(n)
	var c []byte
	select {
	case c = <-p.spare:
	default:
	}
	p.seal <- sealJob{stored: append(c[:0], stored...), off: off, id: id, flags: flags}
	return off
}

// sealing seals the pack's blobs in order, each for its place (the pack's
// key, its offset the nonce), straight into the batch when it fits there,
// else (it would straddle two batches) into scratch, then copied; it puts
// them in and gives each copy back, until seal is closed.
func (p *packWriter) sealing(sl *Sealer) {
	defer close(p.sealed)
	for j := range p.seal {
		if n := len(j.stored) + sl.overhead(); cap(p.batch)-len(p.batch) >= n {
			p.batch = sl.sealBlobTo(p.batch, p.id, j.off, j.id, j.flags, j.stored)
			if len(p.batch) == cap(p.batch) {
				p.flushBatch()
			}
		} else {
			p.scratch = sl.sealBlobTo(p.scratch[:0], p.id, j.off, j.id, j.flags, j.stored)
			p.put(p.scratch)
		}
		select {
		case p.spare <- j.stored:
		default:
		}
	}
}

// settleSealing waits until a sealed pack's sealing goroutine has put in
// every blob handed to it (none: a plain pack); the batches are the run's
// again then.
func (p *packWriter) settleSealing() {
	if p.seal != nil {
		close(p.seal)
		<-p.sealed
		p.seal = nil
	}
}

// commit writes the index and commits the pack without waiting for the
// store: wait returns the result.
func (p *packWriter) commit() {
	p.settleSealing()
	p.flushBatch()
	p.ch <- encodePackIndex(p.entries)
	p.ch <- nil // the commit mark
	close(p.ch)
}

// wait waits for a committed (or aborted) pack's Put; it returns the
// pack's size.
func (p *packWriter) wait() (int64, error) {
	r := <-p.done
	if r.err != nil {
		return 0, r.err
	}
	return r.size, nil
}

// abort gives the pack up: nothing is committed.
func (p *packWriter) abort() {
	p.settleSealing()
	close(p.ch)
	<-p.done
}

func layoutPackKey(id ID) (string, error) { return jobapi.PackKey(id.String()) }
