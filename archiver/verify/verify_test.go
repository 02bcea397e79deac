package verify

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/worldbackup/worldbackup/archiver/tarstream"
)

func makeArchive(t *testing.T, c tarstream.Compression) []byte {
	t.Helper()
	root := t.TempDir()
	for i, name := range []string{"world/level.dat", "world/region/r.0.0.mca", "world/playerdata/p.dat"} {
		p := filepath.Join(root, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, bytes.Repeat([]byte{byte('a' + i)}, 100_000*(i+1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if _, err := tarstream.Write(t.Context(), &out, root, tarstream.Options{Compression: c}); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// opener opens b.
func opener(b []byte) Opener {
	return func(context.Context) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestArchive(t *testing.T) {
	tests := []struct {
		name         string
		mutate       func(b []byte) []byte
		want         func(good []byte) Want // nil: the good archive's size and digest
		wantMismatch bool
		wantCorrupt  bool
		wantText     []string
	}{
		{name: "intact"},
		{
			name:         "flipped byte",
			mutate:       func(b []byte) []byte { b[len(b)/2] ^= 0x40; return b },
			wantMismatch: true,
			wantText:     []string{"sha256 is"},
		},
		{
			name:         "truncated",
			mutate:       func(b []byte) []byte { return b[:len(b)*2/3] },
			wantMismatch: true,
			wantText:     []string{"size is", "sha256 is"},
		},
		{
			name:         "garbage appended",
			mutate:       func(b []byte) []byte { return append(b, "trailing garbage"...) },
			wantMismatch: true,
			wantText:     []string{"size is more than"},
		},
		{
			// Not parsed: a tampered archive could be a decompression
			// bomb.
			name:         "not an archive, the row's size and digest",
			mutate:       func(b []byte) []byte { return bytes.Repeat([]byte{'x'}, len(b)) },
			wantMismatch: true,
			wantText:     []string{"sha256 is"},
		},
		{
			// The row was made from the file with its trailing bytes: the
			// checksum matches, the archive is refused all the same (as a
			// restore refuses it).
			name:   "garbage appended, checksum matching",
			mutate: func(b []byte) []byte { return append(b, "trailing garbage"...) },
			want: func(good []byte) Want {
				return Want{Size: -1, SHA256: digest(append(bytes.Clone(good), "trailing garbage"...))}
			},
			wantCorrupt: true,
			wantText:    []string{"does not end cleanly after its tar stream"},
		},
		{
			name:         "wrong digest in the row",
			want:         func(good []byte) Want { return Want{Size: int64(len(good)), SHA256: strings.Repeat("0", 64)} },
			wantMismatch: true,
			wantText:     []string{"want " + strings.Repeat("0", 64)},
		},
		{
			name:        "not an archive",
			mutate:      func(b []byte) []byte { return bytes.Repeat([]byte("not an archive "), 100) },
			want:        func(good []byte) Want { return Want{Size: -1} },
			wantCorrupt: true,
		},
		{
			name:        "empty file",
			mutate:      func(b []byte) []byte { return nil },
			want:        func(good []byte) Want { return Want{Size: -1} },
			wantCorrupt: true,
		},
		{
			name: "nothing to compare",
			want: func(good []byte) Want { return Want{Size: -1} },
		},
	}
	for _, c := range tarstream.Compressions {
		good := makeArchive(t, c)
		for _, tt := range tests {
			t.Run(string(c)+"/"+tt.name, func(t *testing.T) {
				b := bytes.Clone(good)
				if tt.mutate != nil {
					b = tt.mutate(b)
				}
				want := Want{Size: int64(len(good)), SHA256: digest(good)}
				if tt.want != nil {
					want = tt.want(good)
				}
				want.Compression = c
				rep, err := Archive(t.Context(), opener(b), want)
				wantSize, wantSum := int64(len(b)), digest(b)
				if want.Size >= 0 && wantSize > want.Size { // read no further than one byte past
					wantSize, wantSum = want.Size+1, ""
				}
				if rep.Size != wantSize || rep.SHA256 != wantSum {
					t.Errorf("report says %d bytes sha256 %q; want %d bytes sha256 %q (the file has %d)", rep.Size, rep.SHA256, wantSize, wantSum, len(b))
				}
				if !tt.wantMismatch && !tt.wantCorrupt {
					if err != nil {
						t.Fatalf("Archive: %v", err)
					}
					if rep.Entries != 6 {
						t.Errorf("%d entries, want 6", rep.Entries)
					}
					return
				}
				if err == nil {
					t.Fatal("Archive found nothing wrong")
				}
				if tt.wantMismatch && !errors.Is(err, ErrMismatch) {
					t.Errorf("error %q does not wrap ErrMismatch", err)
				}
				if tt.wantCorrupt != errors.Is(err, ErrCorrupt) {
					// Bytes that do not match the row are not parsed.
					t.Errorf("error %q: wraps ErrCorrupt %v, want %v", err, !tt.wantCorrupt, tt.wantCorrupt)
				}
				for _, s := range tt.wantText {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q lacks %q", err, s)
					}
				}
			})
		}
	}
}

func TestArchiveCanceled(t *testing.T) {
	good := makeArchive(t, tarstream.Zstd)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := Archive(ctx, opener(good), Want{Size: int64(len(good)), SHA256: digest(good), Compression: tarstream.Zstd})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Archive: %v, want context.Canceled", err)
	}
	if errors.Is(err, ErrCorrupt) || errors.Is(err, ErrMismatch) {
		t.Fatalf("a canceled check blames the archive: %v", err)
	}
}

// The compression is told by the bytes, as a restore tells it, and must be
// the recorded one.
func TestArchiveOtherCompression(t *testing.T) {
	gz := makeArchive(t, tarstream.Gzip)
	_, err := Archive(t.Context(), opener(gz), Want{Size: -1, Compression: tarstream.Zstd})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "compressed with gzip, not zstd") {
		t.Fatalf("Archive: %v, want ErrCorrupt naming both compressions", err)
	}
}

// gnuSparse is a plain tar holding one old-GNU sparse entry whose header
// claims realSize bytes, all of them a hole, with no data stored.
func gnuSparse(realSize int64) []byte {
	var h [512]byte
	copy(h[0:], "world/sparse")
	copy(h[100:], "0000644\x00")
	copy(h[108:], "0000000\x00")
	copy(h[116:], "0000000\x00")
	copy(h[124:], "00000000000\x00") // no data stored
	copy(h[136:], "00000000000\x00")
	h[156] = tar.TypeGNUSparse
	copy(h[257:], "ustar  \x00") // GNU magic and version
	h[483] = 0x80                // realsize, base-256
	binary.BigEndian.PutUint64(h[487:495], uint64(realSize))
	copy(h[148:], "        ")
	var sum int64
	for _, c := range h {
		sum += int64(c)
	}
	copy(h[148:], fmt.Sprintf("%06o\x00 ", sum))
	return append(h[:], make([]byte, 2*512)...) // the end marker
}

// TestArchiveSparseHoles: a sparse entry's holes are not made up: the
// archive matches its row (a row made from it, or --sha256 given by hand)
// and claims 2^62 bytes of holes, which the tar reader would fill with
// zeros until the verify's deadline.
func TestArchiveSparseHoles(t *testing.T) {
	b := gnuSparse(1 << 62)
	tr := tar.NewReader(bytes.NewReader(b))
	if h, err := tr.Next(); err != nil || h.Size != 1<<62 {
		t.Fatalf("the crafted entry does not read as a sparse file of 2^62 bytes: %+v, %v", h, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // the old code ran until this ended
	defer cancel()
	rep, err := Archive(ctx, opener(b), Want{Size: int64(len(b)), SHA256: digest(b), Compression: tarstream.None})
	if err != nil {
		t.Fatalf("Archive: %v", err)
	}
	if rep.Entries != 1 || rep.TarBytes != int64(len(b)) {
		t.Fatalf("report %+v, want 1 entry and %d tar bytes", rep, len(b))
	}
}

// TestArchiveReadsTwice: with a digest, the archive is opened twice (hash,
// then parse), and a file that changed between the two is a mismatch.
func TestArchiveReadsTwice(t *testing.T) {
	good := makeArchive(t, tarstream.Zstd)
	bad := bytes.Clone(good)
	bad[len(bad)/2] ^= 1
	tests := []struct {
		name      string
		want      Want
		files     [][]byte
		wantOpens int
		wantErr   error
	}{
		{"digest known", Want{Size: int64(len(good)), SHA256: digest(good)}, [][]byte{good, good}, 2, nil},
		{"no digest: one pass", Want{Size: -1}, [][]byte{good}, 1, nil},
		{"changed after the check", Want{Size: int64(len(good)), SHA256: digest(good)}, [][]byte{good, bad}, 2, ErrMismatch},
		{"mismatch: not opened again", Want{Size: int64(len(good)), SHA256: digest(good)}, [][]byte{bad}, 1, ErrMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opens := 0
			open := func(context.Context) (io.ReadCloser, error) {
				opens++
				if opens > len(tt.files) {
					t.Fatalf("opened %d times", opens)
				}
				return io.NopCloser(bytes.NewReader(tt.files[opens-1])), nil
			}
			tt.want.Compression = tarstream.Zstd
			_, err := Archive(t.Context(), open, tt.want)
			if opens != tt.wantOpens || (tt.wantErr == nil) != (err == nil) || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) {
				t.Fatalf("opened %d times, error %v; want %d, %v", opens, err, tt.wantOpens, tt.wantErr)
			}
		})
	}
}
