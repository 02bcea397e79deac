package chunked

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// ErrCorrupt is wrapped by the errors of a manifest, pack or blob whose
// bytes do not match their hash or do not parse: the archive is refused.
var ErrCorrupt = errors.New("chunked archive is corrupt")

// ErrMissing is wrapped by the errors of a pack or manifest that is not in
// the store.
var ErrMissing = errors.New("chunked archive object is missing")

// Format version and magic numbers (FORMAT.md).
const (
	Version       = 1
	manifestMagic = "WBCM"
	packMagic     = "WBPK"
	packEndMagic  = "WBPX"
)

// Bounds: every length read from the store is checked against them.
const (
	// MaxBlob is the largest blob (raw or stored).
	MaxBlob = 1 << 20
	// MaxManifest is the largest manifest object.
	MaxManifest = 256 << 20
	// maxManifestBody bounds a manifest's decompressed body.
	maxManifestBody = 1 << 30
	// maxPackIndex bounds a pack's index.
	maxPackIndex = 64 << 20
	// maxListEntries is the most blobs one list blob names (its encoding
	// then stays below MaxBlob).
	maxListEntries = 8192
	maxKeyID       = 255
	maxPath        = 64 << 10
)

// Blob flags: the low nibble is the compression, the high nibble the
// cipher (0, none: room for per-blob encryption later).
const (
	compNone    = 0
	compZstd    = 1
	compZero    = 2 // a zero run: Raw zero bytes, stored nowhere (ID, pack, offset, stored all 0)
	compMask    = 0x0f
	cipherMask  = 0xf0
	cipherNone  = 0x00
	manifestZst = 1 // the manifest body is one zstd stream
)

// ID is the SHA-256 of a blob's raw bytes, or a pack's random name.
type ID [32]byte

// sealedExtra is what sealing adds to a stored blob of a run of cipher c.
func sealedExtra(c byte) int {
	if c == cipherNone {
		return 0
	}
	return sealOverhead
}

func (id ID) String() string { return hex.EncodeToString(id[:]) }

// ParseID parses a 64-digit lowercase hex ID.
func ParseID(s string) (ID, error) {
	var id ID
	if len(s) != 64 {
		return id, fmt.Errorf("%q is not a 64-digit hex ID", s)
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil || hex.EncodeToString(id[:]) != s {
		return id, fmt.Errorf("%q is not a 64-digit lowercase hex ID", s)
	}
	return id, nil
}

// Ref locates a blob: its ID, the pack holding it (an index into the pack
// table of the manifest or list blob it appears in), where it starts in
// the pack, its stored and raw lengths and its flags.
type Ref struct {
	ID     ID
	Pack   uint32
	Offset uint32
	Stored uint32
	Raw    uint32
	Flags  byte
}

// encoder appends the format's primitives to a buffer.
type encoder struct{ b []byte }

func (e *encoder) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *encoder) byte(v byte)      { e.b = append(e.b, v) }
func (e *encoder) id(v ID)          { e.b = append(e.b, v[:]...) }
func (e *encoder) str(s string)     { e.uvarint(uint64(len(s))); e.b = append(e.b, s...) }
func (e *encoder) ref(r Ref) {
	e.id(r.ID)
	e.uvarint(uint64(r.Pack))
	e.uvarint(uint64(r.Offset))
	e.uvarint(uint64(r.Stored))
	e.uvarint(uint64(r.Raw))
	e.byte(r.Flags)
}

// decoder reads the format's primitives; the first error sticks.
type decoder struct {
	r   io.ByteReader
	rd  io.Reader
	err error
	// cipher is the cipher nibble every stored blob of the run has (0:
	// none; cipherAESGCM in a sealed run).
	cipher byte
}

func newDecoder(r interface {
	io.ByteReader
	io.Reader
}) *decoder {
	return &decoder{r: r, rd: r}
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) uvarint(what string, max uint64) uint64 {
	if d.err != nil {
		return 0
	}
	v, err := binary.ReadUvarint(d.r)
	if err != nil {
		d.fail("reading %s: %v", what, err)
		return 0
	}
	if v > max {
		d.fail("%s %d is larger than %d", what, v, max)
		return 0
	}
	return v
}

func (d *decoder) varint(what string) int64 {
	if d.err != nil {
		return 0
	}
	v, err := binary.ReadVarint(d.r)
	if err != nil {
		d.fail("reading %s: %v", what, err)
	}
	return v
}

func (d *decoder) byte(what string) byte {
	if d.err != nil {
		return 0
	}
	b, err := d.r.ReadByte()
	if err != nil {
		d.fail("reading %s: %v", what, err)
	}
	return b
}

func (d *decoder) full(what string, p []byte) {
	if d.err != nil {
		return
	}
	if _, err := io.ReadFull(d.rd, p); err != nil {
		d.fail("reading %s: %v", what, err)
	}
}

func (d *decoder) id(what string) ID {
	var id ID
	d.full(what, id[:])
	return id
}

func (d *decoder) str(what string, max uint64) string {
	n := d.uvarint(what+" length", max)
	if d.err != nil {
		return ""
	}
	b := make([]byte, n)
	d.full(what, b)
	if d.err == nil && !utf8.Valid(b) && what != "path" {
		d.fail("%s is not UTF-8", what)
	}
	return string(b)
}

// ref reads a Ref whose pack index must be below packs.
func (d *decoder) ref(packs int) Ref {
	r := Ref{ID: d.id("blob ID")}
	r.Pack = uint32(d.uvarint("pack index", uint64(max(packs, 1)-1)))
	// (a zero run's pack index is 0 whatever the table)
	r.Offset = uint32(d.uvarint("blob offset", 1<<32-1))
	r.Stored = uint32(d.uvarint("stored length", MaxBlob+maxOverhead))
	r.Raw = uint32(d.uvarint("raw length", MaxBlob))
	r.Flags = d.byte("blob flags")
	if d.err == nil {
		if c := r.Flags & cipherMask; r.Flags&compMask == compZero && c != cipherNone {
			d.fail("a zero run has cipher %d", c>>4)
		} else if r.Flags&compMask != compZero && c != d.cipher {
			d.fail("blob %s has cipher %d in a run of cipher %d", r.ID, c>>4, d.cipher>>4)
		}
		switch c := r.Flags & compMask; {
		case c == compZero:
			if r.ID != (ID{}) || r.Pack != 0 || r.Offset != 0 || r.Stored != 0 {
				d.fail("a zero run names a blob, a pack or a stored length")
			}
		case packs == 0:
			d.fail("a blob names a pack, but the pack table is empty")
		case c != compNone && c != compZstd:
			d.fail("blob %s has unknown compression %d", r.ID, c)
		case c == compNone && int(r.Stored) != int(r.Raw)+sealedExtra(d.cipher):
			d.fail("blob %s is stored uncompressed, but its stored length %d differs from its raw length %d", r.ID, r.Stored, r.Raw)
		}
	}
	return r
}

// maxOverhead is the most a stored blob exceeds MaxBlob by: zstd adds
// nothing (a blob it cannot shrink is stored uncompressed), sealing its tag.
const maxOverhead = sealOverhead // a sealed blob's GCM tag
