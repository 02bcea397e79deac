package crypt

import (
	"bytes"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"filippo.io/age"
	"golang.org/x/crypto/chacha20poly1305"
)

// ageFile encrypts plain with age itself to id.
func ageFile(t *testing.T, id *age.X25519Identity, plain []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := age.Encrypt(&b, id.Recipient())
	if err != nil {
		t.Fatal(err)
	}
	w.Write(plain)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// readAll reads f's plaintext with k (openReader) and with age.Decrypt.
func readAll(k *Keys, id *age.X25519Identity, f []byte) (ours []byte, oursErr error, ages []byte, agesErr error) {
	if r, err := k.Decrypt(bytes.NewReader(f)); err != nil {
		oursErr = err
	} else {
		ours, oursErr = io.ReadAll(r)
	}
	if r, err := age.Decrypt(bytes.NewReader(f), id); err != nil {
		agesErr = err
	} else {
		ages, agesErr = io.ReadAll(r)
	}
	return
}

// TestOpenReaderAgreesWithAge: for age files of every size around a chunk
// and a batch, and for each of them cut, extended, or with a byte flipped
// at every chunk, the parallel reader gives back what age.Decrypt gives
// back, and fails (with ErrCorrupt) exactly where age fails.
func TestOpenReaderAgreesWithAge(t *testing.T) {
	p, id := identityFile(t)
	k, err := LoadKeyFile(p)
	if err != nil {
		t.Fatal(err)
	}
	batch := openBatch * payloadChunk
	rng := rand.New(rand.NewPCG(3, 4))
	for _, size := range []int{0, 1, payloadChunk - 1, payloadChunk, payloadChunk + 1, 3 * payloadChunk,
		batch - 1, batch, batch + 1, 2 * batch, 5*batch + 7} {
		plain := make([]byte, size)
		for i := range plain {
			plain[i] = byte(rng.Uint32())
		}
		f := ageFile(t, id, plain)
		hdr, err := age.ExtractHeader(bytes.NewReader(f))
		if err != nil {
			t.Fatal(err)
		}
		start := len(hdr) + payloadNonceSize
		if r, err := k.Decrypt(bytes.NewReader(f)); err != nil {
			t.Fatal(err)
		} else if pr := r.(*payload).r; !isOpenReader(pr) {
			t.Fatalf("%d bytes: read by %T, not the parallel reader", size, pr)
		}
		cases := map[string][]byte{"intact": f}
		chunks := max(1, (size+payloadChunk-1)/payloadChunk)
		for c := range chunks {
			at := start + c*sealedChunk + rng.IntN(min(sealedChunk, len(f)-start-c*sealedChunk))
			flipped := bytes.Clone(f)
			flipped[at] ^= 0x20
			cases[fmt.Sprintf("chunk %d flipped", c)] = flipped
			cases[fmt.Sprintf("cut after chunk %d", c)] = f[:min(len(f), start+c*sealedChunk)]
			cases[fmt.Sprintf("cut inside chunk %d", c)] = f[:min(len(f)-1, start+c*sealedChunk+17)]
		}
		cases["cut in the nonce"] = f[:len(hdr)+5]
		cases["one byte more"] = append(bytes.Clone(f), 0)
		cases["the last chunk twice"] = append(bytes.Clone(f), f[max(start, len(f)-sealedChunk):]...)
		for name, b := range cases {
			t.Run(fmt.Sprintf("%d bytes, %s", size, name), func(t *testing.T) {
				ours, oursErr, ages, agesErr := readAll(k, id, b)
				if (oursErr == nil) != (agesErr == nil) {
					t.Fatalf("ours: %v, age: %v", oursErr, agesErr)
				}
				if agesErr == nil {
					if !bytes.Equal(ours, ages) || (name == "intact" && !bytes.Equal(ours, plain)) {
						t.Fatalf("ours read %d bytes, age %d, want the same %d", len(ours), len(ages), len(plain))
					}
					return
				}
				if !errors.Is(oursErr, ErrCorrupt) {
					t.Fatalf("ours: %v, want ErrCorrupt", oursErr)
				}
			})
		}
	}
}

// TestOpenReaderFlagInTheMiddle: a payload whose last-chunk flag is on a
// chunk that others follow (sealed with the right key: only the framing
// is wrong) is refused, by age and by the parallel reader alike.
func TestOpenReaderFlagInTheMiddle(t *testing.T) {
	p, id := identityFile(t)
	k, _ := LoadKeyFile(p)
	f := ageFile(t, id, make([]byte, 3*payloadChunk))
	hdr, _ := age.ExtractHeader(bytes.NewReader(f))
	fileKey, err := age.DecryptHeader(hdr, id)
	if err != nil {
		t.Fatal(err)
	}
	nonce := f[len(hdr) : len(hdr)+payloadNonceSize]
	key, _ := hkdf.Key(sha256.New, fileKey, nonce, "payload", chacha20poly1305.KeySize)
	aead, _ := chacha20poly1305.New(key)
	for _, flagged := range []int{0, 1, 2} {
		t.Run(fmt.Sprintf("chunk %d of 4 flagged", flagged), func(t *testing.T) {
			out := bytes.Clone(f[:len(hdr)+payloadNonceSize])
			for i := range 4 {
				var n [chacha20poly1305.NonceSize]byte
				binary.BigEndian.PutUint64(n[3:11], uint64(i))
				if i == flagged || i == 3 {
					n[11] = lastChunkFlag
				}
				out = aead.Seal(out, n[:], make([]byte, payloadChunk), nil)
			}
			_, oursErr, _, agesErr := readAll(k, id, out)
			if agesErr == nil || !errors.Is(oursErr, ErrCorrupt) {
				t.Fatalf("ours: %v, age: %v: want both refused", oursErr, agesErr)
			}
		})
	}
}

// failingReader returns its bytes, then err.
type failingReader struct {
	b   []byte
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if len(f.b) == 0 {
		return 0, f.err
	}
	n := copy(p, f.b)
	f.b = f.b[n:]
	return n, nil
}

// TestOpenReaderSourceFails: a source that fails midway gives its own
// error, not a refusal of the archive (a retry may succeed).
func TestOpenReaderSourceFails(t *testing.T) {
	p, id := identityFile(t)
	k, _ := LoadKeyFile(p)
	f := ageFile(t, id, make([]byte, 3*openBatch*payloadChunk))
	errIO := errors.New("connection reset")
	r, err := k.Decrypt(&failingReader{b: f[:len(f)/2], err: errIO})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(r); !errors.Is(err, errIO) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("read: %v, want the source's error", err)
	}
}

// BenchmarkDecrypt: age's reader against openReader, 64 MiB.
func BenchmarkDecrypt(b *testing.B) {
	p, id := identityFile(b)
	k, _ := LoadKeyFile(p)
	var f bytes.Buffer
	w, _ := age.Encrypt(&f, id.Recipient())
	w.Write(make([]byte, 64<<20))
	w.Close()
	buf := make([]byte, 256<<10)
	for _, c := range []struct {
		name string
		dec  func(io.Reader) (io.Reader, error)
	}{
		{"age", func(r io.Reader) (io.Reader, error) { return age.Decrypt(r, id) }},
		{"openReader", k.Decrypt},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(f.Len()))
			for b.Loop() {
				r, err := c.dec(bytes.NewReader(f.Bytes()))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{r}, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func isOpenReader(r io.Reader) bool { _, ok := r.(*openReader); return ok }

// TestReadAheadBounded: the read-ahead grows with the cores up to
// maxReadAhead batches and no further, so a restore on a host of 128
// cores (a pod without a CPU limit) holds about as much as on 4.
func TestReadAheadBounded(t *testing.T) {
	for _, tc := range []struct{ procs, want int }{{0, 2}, {1, 2}, {2, 4}, {4, 8}, {16, 8}, {128, 8}} {
		t.Run(fmt.Sprint(tc.procs), func(t *testing.T) {
			if got := readAhead(tc.procs); got != tc.want {
				t.Errorf("readAhead(%d) = %d, want %d", tc.procs, got, tc.want)
			}
		})
	}
}
