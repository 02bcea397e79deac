package crypt

import (
	"bufio"
	"bytes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"runtime"

	"filippo.io/age"
	"golang.org/x/crypto/chacha20poly1305"
)

// The age payload (the C2SP age spec's "payload"): after the header, a
// 16-byte nonce, then the plaintext in chunks of 64 KiB, each sealed with
// ChaCha20-Poly1305 under a key derived from the file key and that nonce;
// a chunk's AEAD nonce is its index (11 bytes, big-endian) and a flag set
// on the last chunk only.
//
// age's reader opens one chunk after the other on the reading goroutine,
// which in a restore is the one that also hashes the archive and feeds the
// decompressor, and it allocates 64 KiB per chunk (a GiB of garbage per
// GiB of archive). openReader opens batches of chunks on several goroutines
// ahead of the reader, into buffers it reuses. The header (the file key
// unwrapped by an identity and the header's MAC checked) stays age's own:
// age.ExtractHeader and age.DecryptHeader.
const (
	payloadNonceSize = 16
	payloadChunk     = 64 << 10
	sealedChunk      = payloadChunk + chacha20poly1305.Overhead
	lastChunkFlag    = 0x01
	openBatch        = 16 // chunks a goroutine opens at once (1 MiB)
	// maxHeaderPeek bounds the header read ahead to be parsed: an archive's
	// header is one X25519 or hybrid stanza, a few hundred bytes to a few
	// KiB. A larger one is read by age.Decrypt itself.
	maxHeaderPeek = 64 << 10
)

// errTruncated and errTrailing are age's own two framing errors; a chunk
// that does not open is errChunk.
var (
	errTruncated = errors.New("the encrypted payload is truncated: its last chunk is missing")
	errTrailing  = errors.New("trailing data after the end of the encrypted payload")
	errChunk     = errors.New("a payload chunk does not authenticate: the archive is corrupt or was tampered with")
)

// openPayload reads the age header at the start of br with ids and returns
// the reader of its payload. ok is false when the header is not one it
// reads (larger than maxHeaderPeek, or not in age's canonical form): the
// caller then reads the file with age.Decrypt, from br as it was.
func openPayload(br *bufio.Reader, ids []age.Identity) (r io.Reader, ok bool, err error) {
	head, _ := br.Peek(maxHeaderPeek) // a shorter file: what there is
	hdr, err := age.ExtractHeader(bytes.NewReader(head))
	if err != nil || !bytes.HasPrefix(head, hdr) || len(head) < len(hdr)+payloadNonceSize {
		return nil, false, nil
	}
	fileKey, err := age.DecryptHeader(hdr, ids...)
	if err != nil {
		return nil, true, err
	}
	defer clear(fileKey)
	nonce := head[len(hdr) : len(hdr)+payloadNonceSize]
	aead, err := payloadAEAD(fileKey, nonce)
	if err != nil {
		return nil, true, err
	}
	if _, err := br.Discard(len(hdr) + payloadNonceSize); err != nil {
		return nil, true, err
	}
	return &openReader{src: br, aead: aead, depth: readAhead(runtime.GOMAXPROCS(0))}, true, nil
}

// maxReadAhead bounds how many batches an openReader reads ahead (each
// about 1 MiB sealed, and as much opened): memory must not grow with the
// host's CPUs, which a pod without a CPU limit sees all of. Two batches
// per core keep two cores busy; more buy little, as the reader's one
// consumer (the hash, the decompressor) is the bound past a few cores.
const maxReadAhead = 8

// readAhead is the read-ahead depth on procs cores.
func readAhead(procs int) int { return min(2*max(procs, 1), maxReadAhead) }

// payloadAEAD returns the cipher of an age payload: ChaCha20-Poly1305
// under the key derived from the file key and the payload's nonce, as age
// derives it (HKDF-SHA-256, info "payload").
func payloadAEAD(fileKey, nonce []byte) (cipher.AEAD, error) {
	key, err := hkdf.Key(sha256.New, fileKey, nonce, "payload", chacha20poly1305.KeySize)
	if err != nil {
		return nil, err
	}
	defer clear(key)
	return chacha20poly1305.New(key)
}

// openReader reads the payload from src: it reads up to depth batches of
// sealed chunks ahead, opens each on a goroutine of its own, and serves
// their plaintext in order. A batch is known to be the payload's last when
// src ends in it or right after it (one byte is read ahead to tell), so the
// last-chunk flag is checked where age checks it: on the final chunk, and
// nowhere else.
type openReader struct {
	src   io.Reader
	aead  cipher.AEAD // safe for concurrent use
	depth int

	next    uint64 // index of the next chunk to read from src
	carry   []byte // the byte read ahead to tell the end (0 or 1 byte)
	ended   bool   // src has ended: every batch is queued
	readErr error  // src failed: served once the queue is drained

	queue  []*openedBatch // opening or opened, oldest first
	spare  []*openedBatch
	cur    *openedBatch // being served
	unread []byte       // cur's plaintext not yet read
	err    error        // sticky: the payload's error, or io.EOF
}

type openedBatch struct {
	sealed []byte
	plain  []byte
	first  uint64 // index of its first chunk
	final  bool   // the payload's last batch
	err    error  // set before done is closed
	done   chan struct{}
}

func (r *openReader) Read(p []byte) (int, error) {
	for len(r.unread) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		if r.cur != nil {
			r.spare, r.cur = append(r.spare, r.cur), nil
		}
		r.fill()
		if len(r.queue) == 0 {
			switch {
			case r.readErr != nil:
				r.err = r.readErr
			default:
				r.err = io.EOF
			}
			continue
		}
		b := r.queue[0]
		r.queue = r.queue[1:]
		<-b.done
		if b.err != nil {
			r.err = b.err
			continue
		}
		r.cur, r.unread = b, b.plain
	}
	n := copy(p, r.unread)
	r.unread = r.unread[n:]
	return n, nil
}

// fill reads batches from src until depth are queued or src has ended, and
// starts opening each.
func (r *openReader) fill() {
	for !r.ended && r.readErr == nil && len(r.queue) < r.depth {
		b := r.take()
		n := copy(b.sealed[:cap(b.sealed)], r.carry)
		r.carry = r.carry[:0]
		m, err := io.ReadFull(r.src, b.sealed[n:cap(b.sealed)])
		n += m
		switch {
		case err == nil:
			// A full batch: its last chunk is the payload's last only if
			// nothing follows.
			var one [1]byte
			k, err := io.ReadFull(r.src, one[:])
			switch {
			case err == io.EOF:
				b.final = true
			case err != nil:
				r.readErr = err
			default:
				r.carry = append(r.carry, one[:k]...)
			}
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			b.final = true
		default:
			r.readErr = err
		}
		if r.readErr != nil {
			r.spare = append(r.spare, b)
			return
		}
		r.ended = b.final
		b.sealed = b.sealed[:n]
		b.first = r.next
		r.next += uint64((n + sealedChunk - 1) / sealedChunk)
		r.queue = append(r.queue, b)
		go func() {
			b.plain, b.err = openChunks(r.aead, b.plain[:0], b.sealed, b.first, b.final)
			close(b.done)
		}()
	}
}

// take returns a spare batch, or a new one.
func (r *openReader) take() *openedBatch {
	var b *openedBatch
	if n := len(r.spare); n > 0 {
		b, r.spare = r.spare[n-1], r.spare[:n-1]
	} else {
		b = &openedBatch{
			sealed: make([]byte, 0, openBatch*sealedChunk),
			plain:  make([]byte, 0, openBatch*payloadChunk),
		}
	}
	b.final, b.err, b.done = false, nil, make(chan struct{})
	return b
}

// openChunks appends the plaintext of the sealed chunks to out, the first
// numbered first; final says the batch ends the payload. The rules are
// age's: every chunk but the last is full and not flagged; the last is
// flagged, and empty only when it is the only one; a payload that ends on
// an unflagged chunk is truncated, one that goes on after a flagged chunk
// has trailing data.
func openChunks(aead cipher.AEAD, out, sealed []byte, first uint64, final bool) ([]byte, error) {
	var nonce [chacha20poly1305.NonceSize]byte
	if len(sealed) == 0 {
		// Only a payload with no chunk at all gets here.
		return out, errTruncated
	}
	for i := first; len(sealed) > 0; i++ {
		c := sealed[:min(len(sealed), sealedChunk)]
		sealed = sealed[len(c):]
		binary.BigEndian.PutUint64(nonce[3:11], i)
		last := final && len(sealed) == 0
		if last {
			if len(c) == aead.Overhead() && i > 0 {
				return out, errChunk // an empty last chunk after others
			}
			nonce[len(nonce)-1] = lastChunkFlag
		}
		n := len(out)
		opened, err := aead.Open(out, nonce[:], c, nil)
		if err == nil {
			out = opened
			continue
		}
		if len(c) < sealedChunk {
			return out, errChunk
		}
		// A full chunk that does not open as it was read: opened with the
		// other flag, it tells a cut or a tail from a damaged chunk.
		nonce[len(nonce)-1] ^= lastChunkFlag
		if _, err := aead.Open(out[n:n], nonce[:], c, nil); err == nil {
			if last {
				return out, errTruncated
			}
			return out, errTrailing
		}
		return out, errChunk
	}
	return out, nil
}
