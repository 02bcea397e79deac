package crypt

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"filippo.io/age"
)

// roomWriter is a spacer as tarstream's stage is one: buffers of room
// bytes whose free end Space returns; a Write of that room is kept in place
// (counted in inPlace), any other is copied.
type roomWriter struct {
	out     bytes.Buffer
	buf     []byte
	inPlace int
}

var _ spacer = (*roomWriter)(nil)

func newRoomWriter(room int) *roomWriter { return &roomWriter{buf: make([]byte, 0, room)} }

func (r *roomWriter) Space() []byte {
	if len(r.buf) == cap(r.buf) {
		r.out.Write(r.buf)
		r.buf = r.buf[:0]
	}
	return r.buf[len(r.buf):cap(r.buf)]
}

func (r *roomWriter) Write(p []byte) (int, error) {
	if len(p) > 0 && len(p) <= cap(r.buf)-len(r.buf) && &p[0] == &r.buf[:len(r.buf)+1][len(r.buf)] {
		r.buf = r.buf[:len(r.buf)+len(p)]
		r.inPlace++
		return len(p), nil
	}
	for n := len(p); len(p) > 0; {
		c := copy(r.Space(), p)
		r.buf, p = r.buf[:len(r.buf)+c], p[c:]
		if len(p) == 0 {
			return n, nil
		}
	}
	return 0, nil
}

func (r *roomWriter) bytes() []byte {
	r.out.Write(r.buf)
	r.buf = r.buf[:0]
	return r.out.Bytes()
}

// TestEncryptIsAge: what Encrypt writes is an age file that age itself
// (and Decrypt) reads back, for payloads on and around the chunk boundaries,
// written whole or in pieces, into a plain writer or a spacer, where the
// chunks are sealed in place.
func TestEncryptIsAge(t *testing.T) {
	k, id := keysOf(t)
	const chunk = payloadChunk
	sizes := []int{0, 1, chunk - 1, chunk, chunk + 1, 2 * chunk, 3*chunk - 5, 32 * chunk, 32*chunk + 17}
	pieces := []int{0, 1000, chunk, 3*chunk + 1} // 0: one Write
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range sizes {
		plain := make([]byte, size)
		for i := range plain {
			plain[i] = byte(rng.Uint32())
		}
		for _, piece := range pieces {
			for _, room := range []int{0, 2 << 20, 200 << 10} { // 0: a plain writer
				t.Run(fmt.Sprintf("size=%d/piece=%d/room=%d", size, piece, room), func(t *testing.T) {
					var dst io.Writer
					var buf bytes.Buffer
					var rw *roomWriter
					if room > 0 {
						rw = newRoomWriter(room)
						dst = rw
					} else {
						dst = &buf
					}
					w, err := k.Encrypt(dst)
					if err != nil {
						t.Fatal(err)
					}
					for p := plain; len(p) > 0; {
						n := len(p)
						if piece > 0 {
							n = min(n, piece)
						}
						if _, err := w.Write(p[:n]); err != nil {
							t.Fatal(err)
						}
						p = p[n:]
					}
					if err := w.Close(); err != nil {
						t.Fatal(err)
					}
					if _, err := w.Write([]byte("x")); err == nil {
						t.Error("a Write after Close succeeded")
					}
					ct := buf.Bytes()
					if rw != nil {
						ct = rw.bytes()
						if size > 2*chunk && rw.inPlace == 0 {
							t.Error("no chunk was sealed in place")
						}
					}
					readsBack(t, k, id, ct, plain)
				})
			}
		}
	}
}

// TestEncryptHybridIdentity: a key file holding a post-quantum hybrid
// identity (AGE-SECRET-KEY-PQ-1...) encrypts to its recipient, with its
// label, and age reads the file back with that identity.
func TestEncryptHybridIdentity(t *testing.T) {
	id, err := age.GenerateHybridIdentity()
	if err != nil {
		t.Fatal(err)
	}
	k := newOnly(t, id)
	plain := bytes.Repeat([]byte("post-quantum "), 20000)
	var ct bytes.Buffer
	w, err := k.Encrypt(&ct)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(plain); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(ct.Bytes()[:200], []byte("-> mlkem768x25519 ")) {
		t.Fatalf("the header has no hybrid stanza: %q", ct.Bytes()[:100])
	}
	readsBack(t, k, id, ct.Bytes(), plain)
}

// readsBack checks that age, with id, and k's Decrypt both read plain
// back from the age file ct.
func readsBack(t *testing.T, k *Keys, id age.Identity, ct, plain []byte) {
	t.Helper()
	for name, open := range map[string]func(io.Reader) (io.Reader, error){
		"age":     func(r io.Reader) (io.Reader, error) { return age.Decrypt(r, id) },
		"Decrypt": k.Decrypt,
	} {
		r, err := open(bytes.NewReader(ct))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("%s: read %d bytes (want %d), err %v", name, len(got), len(plain), err)
		}
	}
}
