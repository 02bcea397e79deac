package chunked

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/klauspost/compress/zstd"

	"github.com/worldbackup/worldbackup/archiver/regfile"
	"github.com/worldbackup/worldbackup/jobapi"
)

// Open reads the manifest at key, checks it against sum (its lowercase hex
// SHA-256, the catalog row's) and parses it. A mismatch or a malformed
// manifest wraps ErrCorrupt; a missing one ErrMissing.
func Open(ctx context.Context, st Store, key, sum string) (*Manifest, error) {
	return OpenSealed(ctx, st, key, sum, nil)
}

// OpenSealed is Open for a run that may be sealed: sl opens it (see
// DecodeManifestSealed). The manifest is checked against sum first, so a
// tampered object is refused as corrupt before any key is tried.
func OpenSealed(ctx context.Context, st Store, key, sum string, sl *Sealer) (*Manifest, error) {
	b, err := readManifest(ctx, st, key, sum)
	if err != nil {
		return nil, err
	}
	m, err := DecodeManifestSealed(b, sl)
	if err == nil {
		err = checkRun(m, key)
	}
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", key, err)
	}
	return m, nil
}

// OpenStream is Open for the readers of a run's stream (Rebuild, Verify):
// it checks the manifest against sum and parses its header and pack
// table, and leaves the file records in the manifest's compressed bytes,
// to be decoded one at a time as the stream is walked. So a restore holds
// the manifest's bytes (tens of bytes per file) and one record, not every
// record (a few hundred bytes per file and its list refs). Its Segments
// are nil; a malformed record fails the walk when it is reached.
func OpenStream(ctx context.Context, st Store, key, sum string) (*Manifest, error) {
	return OpenStreamSealed(ctx, st, key, sum, nil)
}

// OpenStreamSealed is OpenStream for a run that may be sealed: sl opens
// the manifest (see DecodeManifestSealed) and, as the stream is walked,
// its blobs. The manifest is checked against sum before any key is tried.
func OpenStreamSealed(ctx context.Context, st Store, key, sum string, sl *Sealer) (*Manifest, error) {
	b, err := readManifest(ctx, st, key, sum)
	if err != nil {
		return nil, err
	}
	m, sr, err := decodeHead(b, sl)
	if err == nil {
		sr.close()
		err = checkRun(m, key)
	}
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", key, err)
	}
	m.body = b
	return m, nil
}

// checkRun checks that the manifest m, read at key, is the run key names
// (jobapi.ManifestKey): its body's server and run ID. The catalog row's
// checksum says which object was recorded, not which run it is, and a
// sealed body authenticates under the server's key whatever its run: a
// manifest put under another run's key (and its checksum in that run's
// row) is refused as damage instead of restoring as that run. Every
// manifest is written under its own run's key, so this refuses none.
func checkRun(m *Manifest, key string) error {
	server, runID, ok := jobapi.SplitManifestKey(key)
	switch {
	case !ok:
		return fmt.Errorf("%q is not a chunked run's manifest key", key)
	case m.Server != server || m.RunID != runID:
		return fmt.Errorf("%w: the manifest is run %q of server %q, not the run its key names", ErrCorrupt, m.RunID, m.Server)
	}
	return nil
}

// openObject opens the store's object key, a run's manifest or pack (what
// names it in errors): one that is gone wraps ErrMissing, a FIFO or a
// folder put in its place ErrCorrupt (damage: no retry helps).
func openObject(ctx context.Context, st Store, what, key string) (io.ReadCloser, error) {
	rc, err := st.Open(ctx, key)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%w: %s %s is not in the store", ErrMissing, what, key)
	case errors.Is(err, regfile.ErrNotRegular):
		return nil, fmt.Errorf("%w: %s %w", ErrCorrupt, what, err)
	case err != nil:
		return nil, fmt.Errorf("opening %s %s: %w", what, key, err)
	}
	return rc, nil
}

// readManifest reads the manifest at key and checks it against sum. The
// object is hashed as it streams first, and read into memory only when it
// matches, then hashed again: an object put in its place (up to
// MaxManifest of anything) never costs its size in memory.
func readManifest(ctx context.Context, st Store, key, sum string) ([]byte, error) {
	pass := func(into []byte) (n int64, got string, err error) {
		rc, err := openObject(ctx, st, "manifest", key)
		if err != nil {
			return 0, "", err
		}
		defer rc.Close()
		h := sha256.New()
		var w io.Writer = h
		if into != nil {
			w = io.MultiWriter(h, &fill{b: into})
		}
		n, err = io.Copy(w, io.LimitReader(rc, MaxManifest+1))
		if err != nil {
			return 0, "", fmt.Errorf("reading manifest %s: %w", key, err)
		}
		if n > MaxManifest {
			return 0, "", fmt.Errorf("%w: manifest %s is larger than %d bytes", ErrCorrupt, key, MaxManifest)
		}
		return n, hex.EncodeToString(h.Sum(nil)), nil
	}
	n, got, err := pass(nil)
	if err != nil {
		return nil, err
	}
	if got != sum {
		return nil, fmt.Errorf("%w: manifest %s has SHA-256 %s, not %s", ErrCorrupt, key, got, sum)
	}
	b := make([]byte, 0, n)
	m, got, err := pass(b[:n])
	if err != nil {
		return nil, err
	}
	if m != n || got != sum {
		return nil, fmt.Errorf("%w: manifest %s changed while it was read (SHA-256 %s, %d bytes; then %s, %d bytes)",
			ErrCorrupt, key, sum, n, got, m)
	}
	return b[:n], nil
}

// fill is a writer into b that refuses to write past its end.
type fill struct {
	b   []byte
	off int
}

func (f *fill) Write(p []byte) (int, error) {
	if len(p) > len(f.b)-f.off {
		return 0, errors.New("more bytes than the first read of the object")
	}
	f.off += copy(f.b[f.off:], p)
	return len(p), nil
}

// Rebuild writes the run's tar stream to w, checking every blob against
// its name first: a damaged or missing blob stops it with an error
// wrapping ErrCorrupt or ErrMissing, before the bytes of that blob reach w.
// The packs are read ahead and the blobs decoded and hashed on a few
// goroutines (see stream), so w is written while the next blobs are
// checked.
func Rebuild(ctx context.Context, st Store, m *Manifest, w io.Writer) error {
	return stream(ctx, st, m, nil, func(b []byte) error {
		_, err := w.Write(b)
		return err
	})
}

// VerifyResult counts what Verify read.
type VerifyResult struct {
	Blobs int64 // blobs checked
	Bytes int64 // their raw bytes
	Packs int   // packs the run references
}

// Verify checks the run's blobs against their names: all of them, or when
// share is below 1 about that share of the data blobs (chosen by seed; the
// list and metadata blobs are always read).
func Verify(ctx context.Context, st Store, m *Manifest, share float64, seed uint64) (VerifyResult, error) {
	res := VerifyResult{Packs: len(m.Packs)}
	threshold := uint64(share * float64(1<<63) * 2)
	var want func(Ref) bool
	if share < 1 {
		want = func(r Ref) bool { return pick(r.ID, seed) < threshold }
	}
	err := stream(ctx, st, m, want, func(b []byte) error {
		res.Blobs++
		res.Bytes += int64(len(b))
		return nil
	})
	return res, err
}

// pick maps a blob and a seed to a uniform 64-bit value.
func pick(id ID, seed uint64) uint64 {
	var b [40]byte
	copy(b[:], id[:])
	for i := range 8 {
		b[32+i] = byte(seed >> (8 * i))
	}
	s := sha256.Sum256(b[:])
	var v uint64
	for i := range 8 {
		v = v<<8 | uint64(s[i])
	}
	return v
}

// walk calls data for every blob of the stream, in order, reading the list
// blobs on the way; it checks that each file's blobs add up to its size.
func walk(ctx context.Context, rd *reader, m *Manifest, data func(path string, pack ID, r Ref) error) error {
	return m.eachSegment(func(seg Segment) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if seg.Meta != nil {
			return data("", packOf(m.Packs, *seg.Meta), *seg.Meta)
		}
		f := seg.File
		var n int64
		for _, lr := range f.Lists {
			l, err := rd.list(ctx, m.Packs[lr.Pack], lr)
			if err != nil {
				return fmt.Errorf("%q: %w", f.Path, err)
			}
			for _, r := range l.Refs {
				n += int64(r.Raw)
				if n > f.Size {
					return fmt.Errorf("%w: the blobs of %q hold more than its %d bytes", ErrCorrupt, f.Path, f.Size)
				}
				if err := data(f.Path, packOf(l.Packs, r), r); err != nil {
					return fmt.Errorf("%q: %w", f.Path, err)
				}
			}
		}
		if n != f.Size {
			return fmt.Errorf("%w: the blobs of %q hold %d bytes, not its %d", ErrCorrupt, f.Path, n, f.Size)
		}
		return nil
	})
}

// packOf returns the pack of r in the table packs (none for a zero run).
func packOf(packs []ID, r Ref) ID {
	if r.Flags&compMask == compZero {
		return ID{}
	}
	return packs[r.Pack]
}

// reader reads blobs from packs, keeping a few packs open at their read
// position: a run's blobs mostly follow each other in its packs, so reads
// go forward, and a backward read reopens the pack. Small blobs read once
// are kept for repeats (a zero padding shared by many chunks).
type reader struct {
	st      Store
	sl      *Sealer // opens the blobs of a sealed run
	ciphers cipherCache
	open    []*cursor // most recently used last
	cache   map[ID][]byte
	cached  int
	dec     *zstd.Decoder
	scratch []byte
	zeros   []byte // never written: the bytes of zero runs
}

type cursor struct {
	pack ID
	rc   io.ReadCloser
	br   *bufio.Reader // reads rc ahead in large reads
	pos  int64         // the position of br's next byte in the pack
}

// Reader bounds.
const (
	maxOpenPacks  = 8
	cacheBlobMax  = 16 << 10
	cacheBytesMax = 8 << 20
	cursorBuf     = 256 << 10 // a cursor's buffer
)

func newReader(st Store) *reader {
	dec, _ := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(MaxBlob),
		zstd.WithDecoderMaxWindow(MaxBlob))
	return &reader{st: st, cache: make(map[ID][]byte), dec: dec}
}

func (r *reader) close() {
	for _, c := range r.open {
		c.rc.Close()
	}
	r.open = nil
	r.dec.Close()
}

// list reads and parses the list blob ref in pack.
func (r *reader) list(ctx context.Context, pack ID, ref Ref) (*list, error) {
	b, err := r.blob(ctx, pack, ref)
	if err != nil {
		return nil, err
	}
	l, err := decodeListCipher(b, r.sl.cipherFlag())
	if err != nil {
		return nil, fmt.Errorf("list blob %s: %w", ref.ID, err)
	}
	return l, nil
}

// blob returns the raw bytes of ref in pack, checked against ref.ID. The
// slice is valid until the next call.
func (r *reader) blob(ctx context.Context, pack ID, ref Ref) ([]byte, error) {
	if ref.Flags&compMask == compZero {
		if cap(r.zeros) < int(ref.Raw) {
			r.zeros = make([]byte, ref.Raw)
		}
		return r.zeros[:ref.Raw], nil
	}
	if b, ok := r.cache[ref.ID]; ok {
		return b, nil
	}
	if cap(r.scratch) < int(ref.Stored) {
		r.scratch = make([]byte, ref.Stored)
	}
	key, stored, err := r.read(ctx, pack, ref, r.scratch[:ref.Stored])
	if err != nil {
		return nil, err
	}
	raw, err := checkSealed(r.dec, r.sl, &r.ciphers, pack, key, ref, stored)
	if err != nil {
		return nil, err
	}
	if len(raw) <= cacheBlobMax && r.cached+len(raw) <= cacheBytesMax {
		r.cache[ref.ID] = bytes.Clone(raw)
		r.cached += len(raw)
	}
	return raw, nil
}

// read reads the stored bytes of ref in pack into buf (len(buf) is
// ref.Stored) and returns the pack's key. It does not check them.
func (r *reader) read(ctx context.Context, pack ID, ref Ref, buf []byte) (string, []byte, error) {
	key, err := jobapi.PackKey(pack.String())
	if err != nil {
		return "", nil, err
	}
	c, err := r.cursor(ctx, pack, key, int64(ref.Offset))
	if err != nil {
		return key, nil, err
	}
	n, err := io.ReadFull(c.br, buf)
	c.pos += int64(n)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return key, nil, fmt.Errorf("%w: pack %s ends before blob %s at %d+%d", ErrCorrupt, key, ref.ID, ref.Offset, ref.Stored)
	}
	if err != nil {
		return key, nil, fmt.Errorf("reading pack %s: %w", key, err)
	}
	return key, buf, nil
}

// check decodes the stored bytes of ref (read from the pack at key) and
// checks them against ref.ID; it returns the raw bytes (stored itself for
// an uncompressed blob).
func check(dec *zstd.Decoder, key string, ref Ref, stored []byte) ([]byte, error) {
	return checkSealed(dec, nil, nil, ID{}, key, ref, stored)
}

// checkSealed is check for a blob of a run sealed by sl (in the clear when
// nil): the stored bytes are opened first (in place, with the cipher of
// pack kept in cc), then decoded, then named by sl's keyed hash.
func checkSealed(dec *zstd.Decoder, sl *Sealer, cc *cipherCache, pack ID, key string, ref Ref, stored []byte) ([]byte, error) {
	if sl != nil {
		var err error
		if stored, err = cc.of(sl, pack).openBlob(key, ref, stored); err != nil {
			return nil, err
		}
	}
	raw := stored
	if ref.Flags&compMask == compZstd {
		var err error
		raw, err = dec.DecodeAll(stored, make([]byte, 0, ref.Raw))
		if err != nil {
			return nil, fmt.Errorf("%w: blob %s in pack %s at %d does not decompress: %v", ErrCorrupt, ref.ID, key, ref.Offset, err)
		}
	}
	if len(raw) != int(ref.Raw) || sl.blobID(raw) != ref.ID {
		return nil, fmt.Errorf("%w: blob %s in pack %s at %d does not match its hash", ErrCorrupt, ref.ID, key, ref.Offset)
	}
	return raw, nil
}

// cursor returns pack's reader positioned at off.
func (r *reader) cursor(ctx context.Context, pack ID, key string, off int64) (*cursor, error) {
	var c *cursor
	for i, o := range r.open {
		if o.pack == pack {
			c = o
			r.open = append(append(r.open[:i:i], r.open[i+1:]...), c)
			break
		}
	}
	if c != nil && c.pos > off {
		if s, ok := c.rc.(io.Seeker); ok {
			if _, err := s.Seek(off, io.SeekStart); err != nil {
				return nil, fmt.Errorf("reading pack %s: %w", key, err)
			}
			c.br.Reset(c.rc)
			c.pos = off
			return c, nil
		}
		c.rc.Close()
		r.open = r.open[:len(r.open)-1]
		c = nil
	}
	if c == nil {
		rc, err := openObject(ctx, r.st, "pack", key)
		if err != nil {
			return nil, err
		}
		c = &cursor{pack: pack, rc: rc, br: bufio.NewReaderSize(rc, cursorBuf)}
		if len(r.open) == maxOpenPacks {
			r.open[0].rc.Close()
			r.open = r.open[1:]
		}
		r.open = append(r.open, c)
	}
	if skip := off - c.pos; skip > 0 {
		s, seeker := c.rc.(io.Seeker)
		switch {
		case skip <= int64(c.br.Buffered()) || !seeker:
			n, err := io.CopyN(io.Discard, c.br, skip)
			c.pos += n
			if errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("%w: pack %s ends before offset %d", ErrCorrupt, key, off)
			}
			if err != nil {
				return nil, fmt.Errorf("reading pack %s: %w", key, err)
			}
		default:
			if _, err := s.Seek(off, io.SeekStart); err != nil {
				return nil, fmt.Errorf("reading pack %s: %w", key, err)
			}
			c.br.Reset(c.rc)
		}
		c.pos = off
	}
	return c, nil
}
