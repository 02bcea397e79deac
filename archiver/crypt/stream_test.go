package crypt

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"filippo.io/age"
)

// TestSealWriterIsAge: what Encrypt writes is an age file that age itself
// decrypts, at every size around a chunk, a batch and the in-flight
// window, written in one call or in uneven pieces.
func TestSealWriterIsAge(t *testing.T) {
	p, id := identityFile(t)
	k, err := LoadKeyFile(p)
	if err != nil {
		t.Fatal(err)
	}
	batch := sealBatch * streamChunk
	window := 2*4*batch + 3 // beyond depth batches in flight on up to 4 cores
	sizes := []int{0, 1, streamChunk - 1, streamChunk, streamChunk + 1,
		batch - 1, batch, batch + 1, 3*batch + streamChunk, window}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range sizes {
		plain := make([]byte, size)
		for i := range plain {
			plain[i] = byte(rng.Uint32())
		}
		for _, pieces := range []string{"one write", "uneven writes"} {
			t.Run(fmt.Sprintf("%d bytes, %s", size, pieces), func(t *testing.T) {
				var ct bytes.Buffer
				w, err := k.Encrypt(&ct)
				if err != nil {
					t.Fatal(err)
				}
				rest := plain
				for len(rest) > 0 {
					n := len(rest)
					if pieces != "one write" {
						n = min(n, 1+rng.IntN(3*streamChunk))
					}
					if m, err := w.Write(rest[:n]); err != nil || m != n {
						t.Fatalf("write: %d, %v", m, err)
					}
					rest = rest[n:]
				}
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				chunks := max(1, (size+streamChunk-1)/streamChunk)
				hdr, err := age.ExtractHeader(bytes.NewReader(ct.Bytes()))
				if err != nil {
					t.Fatal(err)
				}
				if want := len(hdr) + streamNonceSize + size + 16*chunks; ct.Len() != want {
					t.Fatalf("size %d: %d bytes written, want %d (age's framing)", size, ct.Len(), want)
				}
				r, err := age.Decrypt(bytes.NewReader(ct.Bytes()), id)
				if err != nil {
					t.Fatalf("size %d: age.Decrypt: %v", size, err)
				}
				got, err := io.ReadAll(r)
				if err != nil || !bytes.Equal(got, plain) {
					t.Fatalf("size %d: age reads back %d bytes, %v", size, len(got), err)
				}
				// Cut at the last chunk boundary: age must see the
				// missing last chunk (the flag is on the real last one).
				if size > streamChunk {
					cut := len(hdr) + streamNonceSize + (chunks-1)*sealedChunk
					r, err := age.Decrypt(bytes.NewReader(ct.Bytes()[:cut]), id)
					if err == nil {
						_, err = io.ReadAll(r)
					}
					if err == nil {
						t.Fatalf("size %d: a stream cut at a chunk boundary decrypts", size)
					}
				}
			})
		}
	}
}

// failAfter fails every write after the first n bytes.
type failAfter struct{ n int }

var errDisk = errors.New("disk full")

func (f *failAfter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		return 0, errDisk
	}
	f.n -= len(p)
	return len(p), nil
}

// TestSealWriterFails: the destination's error comes back from Write or
// Close, and stays.
func TestSealWriterFails(t *testing.T) {
	p, _ := identityFile(t)
	k, _ := LoadKeyFile(p)
	w, err := k.Encrypt(&failAfter{n: 4096})
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, streamChunk)
	var werr error
	for range 200 {
		if _, werr = w.Write(chunk); werr != nil {
			break
		}
	}
	cerr := w.Close()
	if !errors.Is(werr, errDisk) && !errors.Is(cerr, errDisk) {
		t.Fatalf("write: %v, close: %v: want the destination's error", werr, cerr)
	}
	if _, err := w.Write(chunk); !errors.Is(err, errDisk) {
		t.Errorf("a write after the failure: %v", err)
	}
}

// BenchmarkEncrypt: age's own writer against sealWriter, 64 MiB of
// incompressible data.
func BenchmarkEncrypt(b *testing.B) {
	p, id := identityFile(b)
	k, _ := LoadKeyFile(p)
	plain := make([]byte, 64<<20)
	for i := range plain {
		plain[i] = byte(i * 7)
	}
	for _, c := range []struct {
		name string
		enc  func(io.Writer) (io.WriteCloser, error)
	}{
		{"age", func(w io.Writer) (io.WriteCloser, error) { return age.Encrypt(w, id.Recipient()) }},
		{"sealWriter", k.Encrypt},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(plain)))
			for b.Loop() {
				w, _ := c.enc(io.Discard)
				for off := 0; off < len(plain); off += 2 << 20 {
					w.Write(plain[off : off+2<<20])
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
