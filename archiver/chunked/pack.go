package chunked

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/worldbackup/worldbackup/archiver/crashguard"
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
	// blobs meanwhile: addSealed copies each blob into a group, handed
	// over once it holds sealGroupSize bytes.
	group  *sealGroup      // being filled
	seal   chan *sealGroup // to the sealing goroutine
	sealed chan struct{}   // closed once sealing has put every blob in
	spare  chan *sealGroup // groups sealing is done with, for reuse (the run's pool)
	cipher *blobCipher     // the pack's, used by sealing alone
}

// sealGroup is blobs for a pack's sealing goroutine, handed over together
// (one channel operation and wake-up per sealGroupSize bytes, not per
// blob of a few KiB): their bytes after compression, copied one after
// the other into buf, and each one's place.
type sealGroup struct {
	buf  []byte
	jobs []sealJob
}

// sealJob is one blob of a sealGroup: where its bytes end in the group's
// buf (they start where the previous blob's end), its offset in the pack,
// ID and flags.
type sealJob struct {
	end   int
	off   uint32
	id    ID
	flags byte
}

// sealGroupSize is the bytes a group gathers before it is handed over, and
// sealQueue how many groups wait to be sealed: an open pack holds at most
// (sealQueue+2) groups of sealGroupSize + MaxBlob bytes.
const (
	sealGroupSize = 256 << 10
	sealQueue     = 4
)

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

// packPool holds what the packs of a run reuse, so a pack does not
// allocate its own afresh: the batches (at 32 MiB a pack, that was a third
// of the run's bytes allocated, cleared and collected) and a sealed run's
// seal groups.
type packPool struct {
	batches chan []byte
	groups  chan *sealGroup
}

func newPackPool() *packPool {
	// Two packs are open at a time: the data pack and the lists pack.
	return &packPool{batches: make(chan []byte, packQueue+2), groups: make(chan *sealGroup, 2*(sealQueue+2))}
}

// newPackWriterHeader is newPackWriter with the pack's header (a sealed
// run's: sealedPackHeader), taking its batches (and seal groups) from pool
// and giving them back there (nil: a pool of its own). With sl, its blobs
// are sealed with sl (addSealed), on a goroutine of its own.
func newPackWriterHeader(ctx context.Context, st Store, id ID, header []byte, pool *packPool, sl *Sealer) (*packWriter, error) {
	key, err := jobapi.PackKey(id.String())
	if err != nil {
		return nil, err
	}
	if pool == nil {
		pool = newPackPool()
	}
	p := &packWriter{id: id, key: key, ch: make(chan []byte, packQueue), free: pool.batches,
		done: make(chan packResult, 1), size: int64(len(packHeader))}
	p.batch = append(p.take(), header...)
	if sl != nil {
		p.seal, p.sealed, p.spare = make(chan *sealGroup, sealQueue), make(chan struct{}), pool.groups
		p.cipher = sl.cipherOf(id)
		go p.sealing(sl)
	}
	go func() {
		defer crashguard.Recover()
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
// len(stored) plus sl.overhead() bytes, and copies stored (the blob's bytes
// after compression; the caller keeps stored) into the group for the
// pack's sealing goroutine.
func (p *packWriter) addSealed(sl *Sealer, id ID, typ, flags byte, stored []byte, raw int) uint32 {
	off := uint32(p.size)
	n := len(stored) + sl.overhead()
	p.entries = append(p.entries, packEntry{ID: id, Type: typ, Flags: flags, Offset: off, Stored: uint32(n), Raw: uint32(raw)})
	p.size += int64(n)
	g := p.group
	if g == nil {
		select {
		case g = <-p.spare:
		default:
			g = &sealGroup{buf: make([]byte, 0, sealGroupSize+MaxBlob)}
		}
		p.group = g
	}
	g.buf = append(g.buf, stored...)
	g.jobs = append(g.jobs, sealJob{end: len(g.buf), off: off, id: id, flags: flags})
	if len(g.buf) >= sealGroupSize {
		p.seal <- g
		p.group = nil
	}
	return off
}

// sealing seals the pack's blobs in order, each for its place (the pack's
// key, its offset the nonce), straight into the batch when it fits there,
// else (it would straddle two batches) into scratch, then copied; it puts
// them in and gives each group back, until seal is closed.
func (p *packWriter) sealing(sl *Sealer) {
	defer crashguard.Recover()
	defer close(p.sealed)
	for g := range p.seal {
		start := 0
		for _, j := range g.jobs {
			stored := g.buf[start:j.end]
			start = j.end
			if n := len(stored) + sl.overhead(); cap(p.batch)-len(p.batch) >= n {
				p.batch = p.cipher.seal(p.batch, j.off, j.id, j.flags, stored)
				if len(p.batch) == cap(p.batch) {
					p.flushBatch()
				}
			} else {
				p.scratch = p.cipher.seal(p.scratch[:0], j.off, j.id, j.flags, stored)
				p.put(p.scratch)
			}
		}
		g.buf, g.jobs = g.buf[:0], g.jobs[:0]
		select {
		case p.spare <- g:
		default:
		}
	}
}

// settleSealing hands a sealed pack's last group over and waits until its
// sealing goroutine has put in every blob (nothing to do for a plain
// pack); the batches are the run's again then.
func (p *packWriter) settleSealing() {
	if p.seal != nil {
		if g := p.group; g != nil && len(g.jobs) > 0 {
			p.seal <- g
		}
		p.group = nil
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
