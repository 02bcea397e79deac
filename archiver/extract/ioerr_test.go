package extract

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// errNet stands for a network that failed under a stream of the archive
// (an S3 GET cut, its resumes refused).
var errNet = errors.New("reading s3://bucket/key from byte 4096 again: api error SlowDown: 503 (test)")

// failingReader reads data's first n bytes, then fails with errNet; n < 0:
// reads data whole.
type failingReader struct {
	r *bytes.Reader
	n int64
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n < 0 {
		return f.r.Read(p)
	}
	if f.n == 0 {
		return 0, errNet
	}
	if int64(len(p)) > f.n {
		p = p[:f.n]
	}
	n, err := f.r.Read(p)
	f.n -= int64(n)
	return n, err
}

func (f *failingReader) Close() error { return nil }

// TestReadErrorIsNotRefusal: a stream of the archive that breaks off with
// an I/O error, in the checksum pass or in the extraction pass, at any
// point of any compression, fails the restore with that error: an I/O
// failure a retry may fix, not a refusal of the archive (which would exit
// 3, "a retry cannot help", for an archive that verifies afterwards).
func TestReadErrorIsNotRefusal(t *testing.T) {
	var files []ent
	for i := range 40 {
		files = append(files, reg(fmt.Sprintf("region/r.%d.0.mca", i), strings.Repeat(fmt.Sprintf("chunk %d ", i), 4000)))
	}
	tarData := buildTar(t, files...)
	for _, comp := range []struct {
		name string
		data []byte
	}{
		{"zstd", zstdBytes(t, tarData)},
		{"gzip", gzipBytes(t, tarData)},
		{"none", tarData},
	} {
		for _, tc := range []struct {
			name   string
			open   int   // which open fails: 1 the checksum pass, 2 the extraction
			offset int64 // after how many bytes
		}{
			{"checksum pass at the start", 1, 0},
			{"checksum pass mid-stream", 1, int64(len(comp.data) / 2)},
			{"extraction at the start", 2, 0},
			{"extraction in the header", 2, 100},
			{"extraction mid-stream", 2, int64(len(comp.data) / 2)},
			{"extraction before the end", 2, int64(len(comp.data) - 10)},
		} {
			t.Run(comp.name+"/"+tc.name, func(t *testing.T) {
				s := newScene(t, true)
				opens := 0
				o := Options{Archive: "s3://bucket/key", SHA256: sha(comp.data), Into: s.world, Replace: true,
					Open: func(context.Context) (io.ReadCloser, error) {
						opens++
						n := int64(-1)
						if opens == tc.open {
							n = tc.offset
						}
						return &failingReader{r: bytes.NewReader(comp.data), n: n}, nil
					}}
				before := snapshot(t, s.tmp)
				_, err := Restore(t.Context(), nil, o)
				switch {
				case err == nil:
					t.Fatal("the restore succeeded on a stream that broke off")
				case errors.Is(err, ErrRefused) || errors.Is(err, ErrChecksum):
					t.Fatalf("a broken stream refused the archive: %v", err)
				case !errors.Is(err, errNet):
					t.Fatalf("error %v does not wrap the read's error", err)
				}
				if d := diffSnapshots(before, snapshot(t, s.tmp)); d != "" {
					t.Errorf("the failed restore changed the target:\n%s", d)
				}
			})
		}
	}
}
