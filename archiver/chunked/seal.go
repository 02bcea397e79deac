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
)

// ErrNeedKey is wrapped by the error of an encrypted run read without a
// key; ErrWrongKey by that of a run sealed with another data key than the
// one given (another server's, or a key made after the old one was
// removed). Neither is damage: no retry, and no other archive, can help.
var (
	ErrNeedKey  = errors.New("the chunked run is encrypted: pass --encryption-key-file")
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
	s.macs.New = func() any { return hmac.New(sha256.New, s.idKey) }
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
// HMAC-SHA256 under the blob ID key when sealed.
func (s *Sealer) blobID(raw []byte) ID {
	if s == nil {
		return ID(sha256.Sum256(raw))
	}
	m := s.macs.Get().(hash.Hash)
	m.Reset()
	m.Write(raw)
	var id ID
	m.Sum(id[:0])
	s.macs.Put(m)
	return id
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
	k, err := hkdf.Key(sha256.New, s.packBase, id[:], infoPack, 32)
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

// blobNonce is the nonce of the blob at off in its pack: unique per pack
// key, since a pack is written once and its blobs do not overlap.
func blobNonce(off uint32) []byte {
	var n [nonceSize]byte
	binary.BigEndian.PutUint64(n[4:], uint64(off))
	return n[:]
}

// blobAD is a blob's associated data: its ID and its flags, so a blob
// cannot be passed off as another, nor its compression changed. An array,
// so sealing and opening a blob allocate nothing for it.
func blobAD(id ID, flags byte) (ad [len(ID{}) + 1]byte) {
	copy(ad[:], id[:])
	ad[len(id)] = flags
	return ad
}

// sealBlobTo appends stored (the blob's bytes after compression) encrypted
// for its place at off in pack to dst, which must not overlap stored.
func (s *Sealer) sealBlobTo(dst []byte, pack ID, off uint32, id ID, flags byte, stored []byte) []byte {
	ad := blobAD(id, flags)
	return s.pack(pack).Seal(dst, blobNonce(off), stored, ad[:])
}

// openBlob decrypts the sealed bytes of ref read at its place in pack, in
// place; a blob that does not authenticate wraps ErrCorrupt.
func (s *Sealer) openBlob(pack ID, key string, ref Ref, sealed []byte) ([]byte, error) {
	if ref.Flags&cipherMask != cipherAESGCM {
		return nil, fmt.Errorf("%w: blob %s in pack %s at %d is not sealed, in a sealed run", ErrCorrupt, ref.ID, key, ref.Offset)
	}
	ad := blobAD(ref.ID, ref.Flags)
	out, err := s.pack(pack).Open(sealed[:0], blobNonce(ref.Offset), sealed, ad[:])
	if err != nil {
		return nil, fmt.Errorf("%w: blob %s in pack %s at %d does not authenticate (tampered, or not this key's)", ErrCorrupt, ref.ID, key, ref.Offset)
	}
	return out, nil
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
