package crypt

import (
	"bytes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"

	"filippo.io/age"
	"golang.org/x/crypto/chacha20poly1305"
)

// The age payload (the C2SP age spec's "payload" section): a 16-byte
// nonce after the header, then the plaintext in chunks of streamChunk
// bytes, each sealed with ChaCha20-Poly1305 under a key derived from the
// file key and that nonce, the chunk's AEAD nonce being its index (11
// bytes, big-endian) and a last-chunk flag. age's own writer seals one
// chunk after the other on the caller's goroutine; since every chunk's
// nonce is known in advance, sealWriter seals batches of chunks on several
// goroutines at once and writes them in order, so that a tar backup's
// encryption is not a single-core stage on the critical path. The header
// (the file key wrapped to the recipient, and its MAC) is age's own
// (age.Encrypt), and the file key is read back from it with the identity
// (age.DecryptHeader): only the payload's framing is written here, and the
// tests read every size and batch boundary back with age.Decrypt and the
// age CLI.
const (
	streamNonceSize = 16       // the payload nonce after the header
	streamChunk     = 64 << 10 // plaintext bytes per sealed chunk
	lastChunkFlag   = 0x01     // the last byte of the last chunk's AEAD nonce
	sealBatch       = 16       // chunks per batch: one goroutine's share (1 MiB)
	sealedChunk     = streamChunk + chacha20poly1305.Overhead
)

// newSealWriter writes an age file encrypted to the first identity of k
// into dst: the header and nonce now, the payload as it is written. Close
// seals the last chunk and writes what is still in flight; it does not
// close dst.
func (k *Keys) newSealWriter(dst io.Writer) (*sealWriter, error) {
	var head bytes.Buffer
	if _, err := age.Encrypt(&head, k.recipient); err != nil {
		return nil, fmt.Errorf("age header: %w", err)
	}
	// age.Encrypt wrote the header, then the payload nonce; its writer is
	// dropped unused (it holds no goroutine and nothing to release).
	hdr, err := age.ExtractHeader(bytes.NewReader(head.Bytes()))
	if err != nil {
		return nil, fmt.Errorf("age header: %w", err)
	}
	if head.Len() != len(hdr)+streamNonceSize || !bytes.Equal(head.Bytes()[:len(hdr)], hdr) {
		return nil, errors.New("age header: age.Encrypt wrote an unexpected layout")
	}
	fileKey, err := age.DecryptHeader(hdr, k.identities[0])
	if err != nil {
		return nil, fmt.Errorf("age header: reading back the file key: %w", err)
	}
	defer clear(fileKey)
	nonce := head.Bytes()[len(hdr):]
	payloadKey, err := hkdf.Key(sha256.New, fileKey, nonce, "payload", chacha20poly1305.KeySize)
	if err != nil {
		return nil, fmt.Errorf("age payload key: %w", err)
	}
	defer clear(payloadKey)
	aead, err := chacha20poly1305.New(payloadKey)
	if err != nil {
		return nil, fmt.Errorf("age payload key: %w", err)
	}
	if _, err := dst.Write(head.Bytes()); err != nil {
		return nil, err
	}
	depth := 2 * runtime.GOMAXPROCS(0)
	return &sealWriter{
		dst:   dst,
		aead:  aead,
		depth: depth,
		buf:   make([]byte, 0, sealBatch*streamChunk),
	}, nil
}

// sealWriter seals the payload in batches of sealBatch chunks, each on a
// goroutine of its own, at most depth batches in flight, and writes the
// sealed batches to dst in order from Write and Close (so dst is only ever
// written from the caller's goroutine). Memory is fixed: depth+1 plaintext
// and depth sealed batches.
type sealWriter struct {
	dst   io.Writer
	aead  cipher.AEAD // safe for concurrent use: Seal keeps no state
	depth int
	buf   []byte         // plaintext being gathered
	next  uint64         // index of buf's first chunk
	queue []*sealedBatch // in flight, oldest first
	spare []*sealedBatch // written out, their buffers reusable
	err   error
}

// sealedBatch is one batch: its plaintext, and its ciphertext once done
// is closed.
type sealedBatch struct {
	plain  []byte
	sealed []byte
	done   chan struct{}
}

func (w *sealWriter) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	n := len(p)
	for len(p) > 0 {
		// A full batch is sealed only once more data comes: the last
		// chunk of the payload carries the last-chunk flag, and may be a
		// full one.
		if len(w.buf) == cap(w.buf) {
			if err := w.submit(false); err != nil {
				return 0, err
			}
		}
		c := copy(w.buf[len(w.buf):cap(w.buf)], p)
		w.buf = w.buf[:len(w.buf)+c]
		p = p[c:]
	}
	return n, nil
}

// Close seals what is gathered as the last batch (an empty payload is one
// empty last chunk, as age writes it) and writes every batch still in
// flight.
func (w *sealWriter) Close() error {
	if w.err != nil {
		return w.err
	}
	err := w.submit(true)
	for err == nil && len(w.queue) > 0 {
		err = w.writeOldest()
	}
	for _, b := range w.spare {
		clear(b.plain[:cap(b.plain)])
	}
	clear(w.buf[:cap(w.buf)])
	w.spare = nil
	if err == nil {
		err = errors.New("the encrypted stream is closed")
		w.err = err
		return nil
	}
	return err
}

// submit starts sealing the gathered batch; last marks its last chunk as
// the payload's. Once depth batches are in flight, it first writes the
// oldest.
func (w *sealWriter) submit(last bool) error {
	for len(w.queue) >= w.depth {
		if err := w.writeOldest(); err != nil {
			return err
		}
	}
	b := w.take()
	b.plain, w.buf = w.buf, b.plain[:0]
	first := w.next
	w.next += uint64(max(1, (len(b.plain)+streamChunk-1)/streamChunk))
	w.queue = append(w.queue, b)
	go func() {
		b.sealed = sealChunks(w.aead, b.sealed[:0], b.plain, first, last)
		close(b.done)
	}()
	return nil
}

// take returns a batch to gather into: a spare one, or a new one.
func (w *sealWriter) take() *sealedBatch {
	var b *sealedBatch
	if n := len(w.spare); n > 0 {
		b, w.spare = w.spare[n-1], w.spare[:n-1]
	} else {
		b = &sealedBatch{
			plain:  make([]byte, 0, sealBatch*streamChunk),
			sealed: make([]byte, 0, sealBatch*sealedChunk),
		}
	}
	b.done = make(chan struct{})
	return b
}

// writeOldest waits for the oldest batch in flight and writes it to dst.
func (w *sealWriter) writeOldest() error {
	b := w.queue[0]
	w.queue = w.queue[1:]
	<-b.done
	if _, err := w.dst.Write(b.sealed); err != nil {
		w.err = err
		return err
	}
	w.spare = append(w.spare, b)
	return nil
}

// sealChunks appends plain, sealed chunk by chunk, to out: the chunks are
// numbered from first, and when last is set the final one carries the
// last-chunk flag. An empty plain is one empty chunk.
func sealChunks(aead cipher.AEAD, out, plain []byte, first uint64, last bool) []byte {
	var nonce [chacha20poly1305.NonceSize]byte
	for i := first; ; i++ {
		c := plain[:min(len(plain), streamChunk)]
		plain = plain[len(c):]
		binary.BigEndian.PutUint64(nonce[3:11], i)
		if last && len(plain) == 0 {
			nonce[len(nonce)-1] = lastChunkFlag
		}
		out = aead.Seal(out, nonce[:], c, nil)
		if len(plain) == 0 {
			return out
		}
	}
}
