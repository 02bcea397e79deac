package crypt

import (
	"bytes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"filippo.io/age"
	"golang.org/x/crypto/chacha20poly1305"
)

// The age payload written by the tar format (the layout is open.go's).
//
// age's own writer copies each 64 KiB chunk into a buffer of its own,
// seals it there and writes the sealed chunk on, which copies it again into
// the stream's next buffer: two copies of the archive besides the cipher's
// pass. sealWriter seals the chunks straight from what it is written
// into the free end of its destination's buffer (a spacer: the tar stream's
// hash-and-write stage), so the cipher's own pass is the only one. The
// header stays age's own: age.Encrypt writes it, and the file key it wraps
// is kept (keyCapture) to derive the payload key as age does.

// spacer is a destination that can be written into: Space returns the free
// end of the buffer its next Write fills, and a Write of a prefix of that
// room is kept without a copy (tarstream's stage).
type spacer interface {
	Space() []byte
}

// Encrypt returns a writer that encrypts what it is written to the key
// file's first identity into w, as an age file: `age -d` reads it. Close
// finishes the age stream (it does not close w).
func (k *Keys) Encrypt(w io.Writer) (io.WriteCloser, error) {
	var head bytes.Buffer
	kc := &keyCapture{r: k.recipient}
	if _, err := age.Encrypt(&head, kc); err != nil {
		return nil, fmt.Errorf("writing the age header: %w", err)
	}
	defer clear(kc.fileKey)
	// age.Encrypt has written the header and the payload's nonce, and
	// nothing of the payload yet.
	hdr, err := age.ExtractHeader(bytes.NewReader(head.Bytes()))
	if err != nil || len(kc.fileKey) == 0 || head.Len() != len(hdr)+payloadNonceSize {
		return nil, errors.New("age wrote a header this archiver does not know: the age module's version is not the one it was built for")
	}
	aead, err := payloadAEAD(kc.fileKey, head.Bytes()[len(hdr):])
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(head.Bytes()); err != nil {
		return nil, err
	}
	sw := &sealWriter{dst: w, aead: aead, carry: make([]byte, 0, payloadChunk)}
	if sp, ok := w.(spacer); ok {
		sw.space = sp.Space
	}
	return sw, nil
}

// keyCapture is the recipient age.Encrypt is given: it wraps the file key
// for the key file's recipient, and keeps a copy of it.
type keyCapture struct {
	r       age.Recipient
	fileKey []byte
}

func (c *keyCapture) Wrap(fileKey []byte) ([]*age.Stanza, error) {
	c.fileKey = bytes.Clone(fileKey)
	return c.r.Wrap(fileKey)
}

// WrapWithLabels keeps the labels of a recipient that has them (the hybrid
// post-quantum one), as age would see them without the capture.
func (c *keyCapture) WrapWithLabels(fileKey []byte) ([]*age.Stanza, []string, error) {
	c.fileKey = bytes.Clone(fileKey)
	if rl, ok := c.r.(age.RecipientWithLabels); ok {
		return rl.WrapWithLabels(fileKey)
	}
	s, err := c.r.Wrap(fileKey)
	return s, nil, err
}

// sealWriter writes the age payload: chunks of payloadChunk bytes, each
// sealed under the next index, the last one flagged. A full chunk is sealed
// only once more bytes follow it (or at Close), since the last chunk may be
// full.
type sealWriter struct {
	dst   io.Writer
	space func() []byte // dst's free room, or nil
	aead  cipher.AEAD
	next  uint64 // index of the next chunk
	carry []byte // the chunk not yet sealed: at most payloadChunk bytes
	out   []byte // a sealed chunk that does not fit in dst's room
	err   error  // sticky
}

func (w *sealWriter) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	n := len(p)
	if len(w.carry) > 0 {
		c := copy(w.carry[len(w.carry):payloadChunk], p)
		w.carry, p = w.carry[:len(w.carry)+c], p[c:]
		if len(p) == 0 {
			return n, nil
		}
		// The carried chunk is full and more follows: it is not the last.
		if w.err = w.seal(w.carry, false); w.err != nil {
			return 0, w.err
		}
		w.carry = w.carry[:0]
	}
	for len(p) > payloadChunk {
		if w.err = w.seal(p[:payloadChunk], false); w.err != nil {
			return 0, w.err
		}
		p = p[payloadChunk:]
	}
	w.carry = append(w.carry, p...)
	return n, nil
}

// Close seals the last chunk (empty only when nothing was written, as
// age's is). It does not close dst.
func (w *sealWriter) Close() error {
	if w.err != nil {
		return w.err
	}
	if w.err = w.seal(w.carry, true); w.err != nil {
		return w.err
	}
	w.err = errors.New("the age stream is closed")
	return nil
}

// seal seals chunk into dst's free room when it fits there (the Write then
// keeps it in place), else into w.out, and writes it.
func (w *sealWriter) seal(chunk []byte, last bool) error {
	var nonce [chacha20poly1305.NonceSize]byte
	binary.BigEndian.PutUint64(nonce[3:11], w.next)
	if last {
		nonce[len(nonce)-1] = lastChunkFlag
	}
	w.next++
	to := w.out[:0]
	if w.space != nil {
		if room := w.space(); len(room) >= len(chunk)+w.aead.Overhead() {
			to = room[:0]
		}
	}
	if cap(to) < len(chunk)+w.aead.Overhead() {
		w.out = make([]byte, 0, sealedChunk)
		to = w.out
	}
	_, err := w.dst.Write(w.aead.Seal(to, nonce[:], chunk, nil))
	return err
}
