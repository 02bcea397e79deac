package chunked

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"sync"

	"github.com/restic/chunker"

	"github.com/worldbackup/worldbackup/jobapi"
)

// ErrNeedKey is wrapped by the error of an encrypted run read without a
// key; ErrWrongKey by that of a run sealed with another data key than the
// one given (another server's, or a key made after the old one was
// removed). Neither is damage: no retry, and no other archive, can help.
var (
	ErrNeedKey  = errors.New("the chunked run is encrypted: " + jobapi.NeedKeyAdvice())
	ErrWrongKey = errors.New("the chunked run is sealed with another data key")
)

// Sealer seals a chunked run's blobs and manifest with a server's data key
// (FORMAT.md, "Encryption"): blobs are named by an HMAC-SHA256 of their
// raw bytes under a key derived from it, so the store does not show which
// chunks two servers share, and stored encrypted with AES-256-GCM under a
// key derived per pack, the nonce the blob's offset in its pack; the
// manifest's body is encrypted too. A nil *Sealer keeps a run in the clear
// (blob IDs are plain SHA-256s). A Sealer is safe for concurrent use.
type Sealer struct {
	idKey    []byte
	packBase []byte
	manifest cipher.AEAD
	keyID    [keyIDSize]byte
	macs     sync.Pool

	mu    sync.Mutex
	packs map[ID]cipher.AEAD // per-pack AEADs, a small cache
}

// The sealing's sizes and names (FORMAT.md).
const (
	sealOverhead  = 16 // the GCM tag after each sealed blob or manifest body
	keyIDSize     = 8
	nonceSize     = 12
	cipherAESGCM  = 0x10 // a blob's flags' cipher nibble; the manifest's cipher byte is 1
	manifestAES   = 1
	packCacheMax  = 64
	infoBlobID    = "worldbackup chunked v2 blob id"
	infoManifest  = "worldbackup chunked v2 manifest"
	infoKeyID     = "worldbackup chunked v2 key id"
	infoPack      = "worldbackup chunked v2 pack"
	infoChunker   = "worldbackup chunked v2 chunker polynomial"
	sealedVersion = 2 // manifests and packs of sealed runs
)

// NewSealer returns the Sealer of the data key dataKey (32 random bytes,
// crypt.DataKey).
func NewSealer(dataKey [32]byte) *Sealer {
	derive := func(info string, n int) []byte {
		k, err := hkdf.Key(sha256.New, dataKey[:], nil, info, n)
		if err != nil {
			panic(err) // only for lengths hkdf refuses
		}
		return k
	}
	s := &Sealer{idKey: derive(infoBlobID, 32), packBase: append([]byte(nil), dataKey[:]...), packs: make(map[ID]cipher.AEAD)}
	s.manifest = newGCM(derive(infoManifest, 32))
	copy(s.keyID[:], derive(infoKeyID, keyIDSize))
	s.macs.New = func() any { return &mac{h: hmac.New(sha256.New, s.idKey)} }
	return s
}

// KeyID names the data key without revealing it: a manifest records it,
// so a run read with another key is told from a damaged one.
func (s *Sealer) KeyID() []byte {
	if s == nil {
		return nil
	}
	return s.keyID[:]
}

// chunkerPol returns the polynomial the run cuts files by content with
// (FORMAT.md, "How the stream is cut"): in the clear the fixed, public
// cdcPol; sealed, one derived from the data key (as restic derives one
// per repository), chunker.DerivePolynomial over the AES-256-CTR
// keystream (zero IV) of HKDF(data key, infoChunker). With the public one,
// anyone could compute the blob lengths a candidate file gives, and the
// pack index shows every blob's length: two servers storing the same file
// showed the same sequence. A reader needs none of it; runs of one key
// share the polynomial, so dedup between them is unchanged.
func (s *Sealer) chunkerPol() (chunker.Pol, error) {
	if s == nil {
		return cdcPol, nil
	}
	seed, err := hkdf.Key(sha256.New, s.packBase, nil, infoChunker, 32)
	if err != nil {
		return 0, err
	}
	defer clear(seed)
	b, err := aes.NewCipher(seed)
	if err != nil {
		return 0, err
	}
	pol, err := chunker.DerivePolynomial(keystream{cipher.NewCTR(b, make([]byte, aes.BlockSize))})
	if err != nil {
		return 0, fmt.Errorf("deriving the chunker polynomial: %w", err)
	}
	return pol, nil
}

// keystream reads a stream cipher's keystream.
type keystream struct{ cipher.Stream }

func (k keystream) Read(p []byte) (int, error) {
	clear(p)
	k.XORKeyStream(p, p)
	return len(p), nil
}

// String hides the key.
func (s *Sealer) String() string { return fmt.Sprintf("Sealer(key id %x)", s.KeyID()) }

func newGCM(key []byte) cipher.AEAD {
	b, err := aes.NewCipher(key)
	if err != nil {
		panic(err) // a 32-byte key always makes a cipher
	}
	g, err := cipher.NewGCM(b)
	if err != nil {
		panic(err)
	}
	return g
}

// blobID returns the name of the blob raw: its SHA-256 in the clear, its
// HMAC-SHA256 under the blob ID key when sealed. It allocates nothing.
func (s *Sealer) blobID(raw []byte) ID {
	if s == nil {
		return ID(sha256.Sum256(raw))
	}
	m := s.macs.Get().(*mac)
	m.h.Reset()
	m.h.Write(raw)
	id := ID(m.h.Sum(m.sum[:0]))
	s.macs.Put(m)
	return id
}

// mac is a pooled HMAC with room for its sum (a sum into a caller's array
// would escape, one allocation per blob).
type mac struct {
	h   hash.Hash
	sum [sha256.Size]byte
}

// overhead is what sealing adds to a blob's stored bytes.
func (s *Sealer) overhead() int {
	if s == nil {
		return 0
	}
	return sealOverhead
}

// cipherFlag is the cipher nibble of the blobs s stores.
func (s *Sealer) cipherFlag() byte {
	if s == nil {
		return cipherNone
	}
	return cipherAESGCM
}

// pack returns the AEAD of the pack id: AES-256-GCM under
// HKDF-SHA256(data key, salt pack id, info infoPack).
func (s *Sealer) pack(id ID) cipher.AEAD {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.packs[id]; ok {
		return a
	}
	salt := id // only a miss lets the salt escape
	k, err := hkdf.Key(sha256.New, s.packBase, salt[:], infoPack, 32)
	if err != nil {
		panic(err)
	}
	if len(s.packs) >= packCacheMax {
		clear(s.packs)
	}
	a := newGCM(k)
	s.packs[id] = a
	return a
}

// blobCipher seals or opens the blobs of one pack: the pack's AEAD, and
// room for a blob's nonce and associated data, so that a blob costs no
// allocation (slices of a caller's arrays passed to the AEAD would
// escape). It is not safe for concurrent use: one per goroutine.
type blobCipher struct {
	aead  cipher.AEAD
	nonce [nonceSize]byte
	ad    [len(ID{}) + 1]byte
}

// cipherOf returns a blobCipher of the pack id.
func (s *Sealer) cipherOf(pack ID) *blobCipher { return &blobCipher{aead: s.pack(pack)} }

// place sets the nonce and associated data of the blob id at off: the
// nonce is the offset, unique per pack key since a pack is written once
// and its blobs do not overlap; the associated data is the blob's ID and
// flags, so a blob cannot be passed off as another, nor its compression
// changed.
func (c *blobCipher) place(off uint32, id ID, flags byte) {
	c.nonce = [nonceSize]byte{}
	binary.BigEndian.PutUint64(c.nonce[4:], uint64(off))
	copy(c.ad[:], id[:])
	c.ad[len(id)] = flags
}

// seal appends stored (the blob's bytes after compression) encrypted for
// its place at off in the pack to dst, which must not overlap stored.
func (c *blobCipher) seal(dst []byte, off uint32, id ID, flags byte, stored []byte) []byte {
	c.place(off, id, flags)
	return c.aead.Seal(dst, c.nonce[:], stored, c.ad[:])
}

// openBlob decrypts the sealed bytes of ref read at its place in the pack
// c is the cipher of, in place; a blob that does not authenticate wraps
// ErrCorrupt.
func (c *blobCipher) openBlob(key string, ref Ref, sealed []byte) ([]byte, error) {
	if ref.Flags&cipherMask != cipherAESGCM {
		return nil, fmt.Errorf("%w: blob %s in pack %s at %d is not sealed, in a sealed run", ErrCorrupt, ref.ID, key, ref.Offset)
	}
	c.place(ref.Offset, ref.ID, ref.Flags)
	out, err := c.aead.Open(sealed[:0], c.nonce[:], sealed, c.ad[:])
	if err != nil {
		return nil, fmt.Errorf("%w: blob %s in pack %s at %d does not authenticate (tampered, or not this key's)", ErrCorrupt, ref.ID, key, ref.Offset)
	}
	return out, nil
}

// cipherCache keeps a goroutine's blob cipher of the pack it opened last
// (a run's blobs are read pack after pack): no lock or allocation per
// blob. The zero value is empty.
type cipherCache struct {
	pack ID
	c    *blobCipher
}

// of returns the blob cipher of pack, sl's.
func (cc *cipherCache) of(sl *Sealer, pack ID) *blobCipher {
	if cc.c == nil || cc.pack != pack {
		cc.pack, cc.c = pack, sl.cipherOf(pack)
	}
	return cc.c
}

// sealManifest returns header followed by the sealed body: a random nonce,
// then AES-256-GCM of body under the manifest key, header and nonce its
// associated data.
func (s *Sealer) sealManifest(header, body []byte) ([]byte, error) {
	out := make([]byte, len(header), len(header)+nonceSize+len(body)+sealOverhead)
	copy(out, header)
	nonce := make([]byte, nonceSize)
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	out = append(out, nonce...)
	return s.manifest.Seal(out, nonce, body, out), nil
}

// openManifest opens a sealed manifest: header is its clear part, rest the
// nonce and the sealed body.
func (s *Sealer) openManifest(header, rest []byte) ([]byte, error) {
	if len(rest) < nonceSize+sealOverhead {
		return nil, fmt.Errorf("%w: sealed manifest cut short", ErrCorrupt)
	}
	ad := append(append([]byte(nil), header...), rest[:nonceSize]...)
	body, err := s.manifest.Open(nil, rest[:nonceSize], rest[nonceSize:], ad)
	if err != nil {
		return nil, fmt.Errorf("%w: the manifest does not authenticate (tampered)", ErrCorrupt)
	}
	return body, nil
}

// sameKey reports whether a and b seal with one key (or both are nil).
func sameKey(a, b *Sealer) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.keyID == b.keyID
}
