package chunked

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
)

// Segment kinds in a manifest body.
const (
	segEnd  = 0
	segMeta = 1 // tar metadata: one blob
	segFile = 2 // a regular file's data: a file record
)

// Manifest is one run: the ordered segments of its tar stream.
type Manifest struct {
	Server string
	RunID  string
	// Created is when the run was written, nanoseconds since the epoch.
	Created int64
	// SinceFullRead counts the runs since the last one that read every
	// file: 0 when this run did.
	SinceFullRead uint64
	// KeyID names the data key of a sealed run (Sealer.KeyID); empty in
	// the clear.
	KeyID []byte
	// Packs is the pack table: every pack a blob of the run is in,
	// directly or through a list blob.
	Packs []ID
	// Segments are the parts of the tar stream, in order.
	Segments []Segment
	// StreamSize is the length of the tar stream (of a manifest from
	// OpenStream: once its segments were walked to the end).
	StreamSize int64

	// sl opens the blobs of a sealed run (the Sealer it was decoded
	// with); nil in the clear.
	sl *Sealer

	// body is the whole manifest of OpenStream, whose Segments are nil:
	// eachSegment decodes them from it one at a time (opening it with sl
	// again when sealed).
	body []byte
}

// eachSegment calls fn with the run's segments in order: m.Segments, or
// those of m.body decoded one at a time (then StreamSize is set at the
// end).
func (m *Manifest) eachSegment(fn func(Segment) error) error {
	if m.body == nil {
		for _, seg := range m.Segments {
			if err := fn(seg); err != nil {
				return err
			}
		}
		return nil
	}
	_, sr, err := decodeHead(m.body, m.sl)
	if err != nil {
		return err
	}
	defer sr.close()
	for {
		seg, ok, err := sr.next()
		if err != nil {
			return err
		}
		if !ok {
			m.StreamSize = sr.streamSize
			return nil
		}
		if err := fn(seg); err != nil {
			return err
		}
	}
}

// Sealed reports whether the run is encrypted.
func (m *Manifest) Sealed() bool { return m.sl != nil }

// Segment is a part of the tar stream: tar metadata (Meta), or the data of
// a regular file (File).
type Segment struct {
	Meta *Ref
	File *FileRecord
}

// FileRecord is a regular file's data: the blobs, listed by its list blobs
// in order, and the metadata the next run compares to skip reading it.
type FileRecord struct {
	Path    string
	Size    int64
	MtimeNs int64
	CtimeNs int64
	Inode   uint64
	// Reusable is false for a file that changed while it was read.
	Reusable bool
	// Lists are the list blobs naming the file's data blobs.
	Lists []Ref
	// DataPacks are the packs (indexes into Manifest.Packs) the data
	// blobs are in.
	DataPacks []uint32
}

// Encode returns the manifest's bytes, in the clear.
func (m *Manifest) Encode() ([]byte, error) { return m.EncodeSealed(nil) }

// EncodeSealed returns the manifest's bytes, its body sealed by sl (in the
// clear when sl is nil; its KeyID is then ignored, else sl's).
func (m *Manifest) EncodeSealed(sl *Sealer) ([]byte, error) {
	if sl != nil {
		m.KeyID = sl.KeyID()
	}
	if len(m.KeyID) > maxKeyID {
		return nil, fmt.Errorf("key ID of %d bytes: at most %d", len(m.KeyID), maxKeyID)
	}
	var body encoder
	body.str(m.Server)
	body.str(m.RunID)
	body.varint(m.Created)
	body.uvarint(m.SinceFullRead)
	body.uvarint(uint64(len(m.Packs)))
	for _, p := range m.Packs {
		body.id(p)
	}
	for _, s := range m.Segments {
		switch {
		case s.Meta != nil:
			body.byte(segMeta)
			body.ref(*s.Meta)
		case s.File != nil:
			f := s.File
			body.byte(segFile)
			body.str(f.Path)
			body.uvarint(uint64(f.Size))
			body.varint(f.MtimeNs)
			body.varint(f.CtimeNs)
			body.uvarint(f.Inode)
			if f.Reusable {
				body.byte(1)
			} else {
				body.byte(0)
			}
			body.uvarint(uint64(len(f.Lists)))
			for _, r := range f.Lists {
				body.ref(r)
			}
			body.uvarint(uint64(len(f.DataPacks)))
			for _, p := range f.DataPacks {
				body.uvarint(uint64(p))
			}
		}
	}
	body.byte(segEnd)
	body.uvarint(uint64(m.StreamSize))
	body.uvarint(uint64(len(m.Segments)))
	if err := checkManifestSize(len(body.b), 0, len(m.Segments)); err != nil {
		return nil, err
	}

	out := []byte(manifestMagic)
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	defer enc.Close()
	if sl == nil {
		out = append(out, Version, cipherNone, manifestZst, byte(len(m.KeyID)))
		out = append(out, m.KeyID...)
		out = enc.EncodeAll(body.b, out)
		return out, checkManifestSize(len(body.b), len(out), len(m.Segments))
	}
	out = append(out, sealedVersion, manifestAES, manifestZst, byte(len(m.KeyID)))
	out = append(out, m.KeyID...)
	out, err = sl.sealManifest(out, enc.EncodeAll(body.b, nil))
	if err != nil {
		return nil, err
	}
	return out, checkManifestSize(len(body.b), len(out), len(m.Segments))
}

// checkManifestSize refuses a manifest that a restore would refuse to read
// (its body over maxManifestBody, its object over MaxManifest): a run whose
// manifest is written but cannot be read back is no backup, and failing it
// keeps the previous runs, which a recorded run would push out of the
// retention rules. segments is what the manifest lists, for the message.
func checkManifestSize(body, object, segments int) error {
	if body > maxManifestBody || object > MaxManifest {
		return fmt.Errorf("the run's manifest (%d entries: %d bytes, %d stored) is over what a restore reads "+
			"(%d bytes, %d stored): back the world up in parts (excludes, or one server per dimension folder)",
			segments, body, object, maxManifestBody, MaxManifest)
	}
	return nil
}

// Sum returns the lowercase hex SHA-256 of b: a manifest's name in the
// catalog.
func Sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// DecodeManifest parses a manifest's bytes, in the clear. It checks the
// structure, not the hash: see Open.
func DecodeManifest(b []byte) (*Manifest, error) { return DecodeManifestSealed(b, nil) }

// DecodeManifestSealed parses a manifest's bytes, opening a sealed one
// with sl: one without sl wraps ErrNeedKey, one of another key (its key ID
// is not sl's) ErrWrongKey, one that does not authenticate ErrCorrupt. A
// manifest in the clear is read whatever sl.
func DecodeManifestSealed(b []byte, sl *Sealer) (*Manifest, error) {
	m, sr, err := decodeHead(b, sl)
	if err != nil {
		return nil, err
	}
	defer sr.close()
	for {
		seg, ok, err := sr.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			m.StreamSize = sr.streamSize
			return m, nil
		}
		m.Segments = append(m.Segments, seg)
	}
}

// segmentReader decodes a manifest body's segments one at a time, so a
// reader of a run holds one file record at a time, not all of them.
type segmentReader struct {
	dec        *zstd.Decoder
	br         *bufio.Reader
	d          *decoder
	packs      int
	count      uint64 // segments so far
	stream     int64  // the bytes they hold
	streamSize int64  // once the end is read
	end        bool
}

// decodeHead parses a manifest's header and pack table, opening a sealed
// one with sl (see DecodeManifestSealed), and returns a reader of its
// segments (to close).
func decodeHead(b []byte, sl *Sealer) (*Manifest, *segmentReader, error) {
	if len(b) > MaxManifest {
		return nil, nil, fmt.Errorf("%w: manifest of %d bytes is larger than %d", ErrCorrupt, len(b), MaxManifest)
	}
	if len(b) < 8 || string(b[:4]) != manifestMagic {
		return nil, nil, fmt.Errorf("%w: not a chunked manifest (no %q magic)", ErrCorrupt, manifestMagic)
	}
	switch {
	case b[4] == Version && b[5] == cipherNone:
	case b[4] == sealedVersion && b[5] == manifestAES:
	case b[4] != Version && b[4] != sealedVersion:
		return nil, nil, fmt.Errorf("%w: manifest version %d; this archiver reads versions %d and %d", ErrCorrupt, b[4], Version, sealedVersion)
	default:
		return nil, nil, fmt.Errorf("%w: manifest version %d with cipher %d is unknown", ErrCorrupt, b[4], b[5])
	}
	if b[6] != manifestZst {
		return nil, nil, fmt.Errorf("%w: manifest body compression %d is unknown", ErrCorrupt, b[6])
	}
	k := int(b[7])
	if len(b) < 8+k {
		return nil, nil, fmt.Errorf("%w: manifest cut inside its key ID", ErrCorrupt)
	}
	m := &Manifest{}
	if k > 0 {
		m.KeyID = bytes.Clone(b[8 : 8+k])
	}
	zbody := b[8+k:]
	if b[5] == manifestAES {
		switch {
		case sl == nil:
			return nil, nil, ErrNeedKey
		case !bytes.Equal(m.KeyID, sl.KeyID()):
			return nil, nil, fmt.Errorf("%w: the manifest names data key %x, the key given is %x", ErrWrongKey, m.KeyID, sl.KeyID())
		}
		var err error
		if zbody, err = sl.openManifest(b[:8+k], zbody); err != nil {
			return nil, nil, err
		}
		m.sl = sl
	}
	dec, err := zstd.NewReader(bytes.NewReader(zbody), zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxMemory(64<<20), zstd.WithDecoderMaxWindow(8<<20))
	if err != nil {
		return nil, nil, err
	}
	lr := &io.LimitedReader{R: dec, N: maxManifestBody}
	br := bufio.NewReaderSize(lr, 64<<10)
	d := newDecoder(br)
	d.cipher = m.sl.cipherFlag()
	m.Server = d.str("server", 63)
	m.RunID = d.str("run ID", 128)
	m.Created = d.varint("creation time")
	m.SinceFullRead = d.uvarint("runs since a full read", 1<<62)
	np := d.uvarint("pack count", maxManifestBody/32)
	for i := uint64(0); i < np && d.err == nil; i++ {
		m.Packs = append(m.Packs, d.id("pack ID"))
	}
	if d.err != nil {
		dec.Close()
		return nil, nil, d.err
	}
	return m, &segmentReader{dec: dec, br: br, d: d, packs: len(m.Packs)}, nil
}

func (sr *segmentReader) close() { sr.dec.Close() }

// next returns the next segment, or false at the end of a well-formed
// body (then streamSize is set); the end's checks (the segment count, the
// stream size, nothing after it) are made there.
func (sr *segmentReader) next() (Segment, bool, error) {
	d := sr.d
	if sr.end || d.err != nil {
		return Segment{}, false, d.err
	}
	switch kind := d.byte("segment kind"); kind {
	case segEnd:
		size := d.uvarint("stream size", 1<<62)
		n := d.uvarint("segment count", 1<<40)
		if d.err != nil {
			return Segment{}, false, d.err
		}
		if n != sr.count {
			d.fail("manifest counts %d segments, but holds %d", n, sr.count)
		} else if int64(size) < sr.stream {
			d.fail("stream size %d is below the %d bytes the segments hold", size, sr.stream)
		}
		if _, err := sr.br.ReadByte(); err != io.EOF && d.err == nil {
			d.fail("data after the end of the manifest")
		}
		if d.err != nil {
			return Segment{}, false, d.err
		}
		sr.end, sr.streamSize = true, int64(size)
		return Segment{}, false, nil
	case segMeta:
		r := d.ref(sr.packs)
		if d.err != nil {
			return Segment{}, false, d.err
		}
		sr.stream += int64(r.Raw)
		sr.count++
		return Segment{Meta: &r}, true, nil
	case segFile:
		f := &FileRecord{Path: d.str("path", maxPath)}
		f.Size = int64(d.uvarint("file size", 1<<62))
		f.MtimeNs = d.varint("mtime")
		f.CtimeNs = d.varint("ctime")
		f.Inode = d.uvarint("inode", 1<<64-1)
		switch d.byte("reusable flag") {
		case 0:
		case 1:
			f.Reusable = true
		default:
			d.fail("reusable flag of %q is not 0 or 1", f.Path)
		}
		nl := d.uvarint("list count", uint64(f.Size)+1)
		for i := uint64(0); i < nl && d.err == nil; i++ {
			lr := d.ref(sr.packs)
			if d.err == nil && lr.Flags&compMask == compZero {
				// A list is a blob in a pack, never a zero run (which
				// names no pack: the table may even be empty).
				d.fail("a list blob of %q is a zero run", f.Path)
			}
			f.Lists = append(f.Lists, lr)
		}
		nd := d.uvarint("data pack count", uint64(sr.packs))
		for i := uint64(0); i < nd && d.err == nil; i++ {
			f.DataPacks = append(f.DataPacks, uint32(d.uvarint("data pack index", uint64(max(sr.packs, 1)-1))))
		}
		if d.err != nil {
			return Segment{}, false, d.err
		}
		sr.stream += f.Size
		sr.count++
		return Segment{File: f}, true, nil
	default:
		d.fail("unknown segment kind %d", kind)
		return Segment{}, false, d.err
	}
}
