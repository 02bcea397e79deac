package verify

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
			wantCorrupt:  true,
			wantText:     []string{"size is", "sha256 is"},
		},
		{
			name:         "garbage appended",
			mutate:       func(b []byte) []byte { return append(b, "trailing garbage"...) },
			wantMismatch: true,
			wantCorrupt:  true,
			wantText:     []string{"size is", "does not end cleanly after its tar stream"},
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
				rep, err := Archive(t.Context(), bytes.NewReader(b), want)
				if rep.Size != int64(len(b)) || rep.SHA256 != digest(b) {
					t.Errorf("report says %d bytes sha256 %s; the file has %d bytes sha256 %s", rep.Size, rep.SHA256, len(b), digest(b))
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
				if tt.wantCorrupt && !errors.Is(err, ErrCorrupt) {
					t.Errorf("error %q does not wrap ErrCorrupt", err)
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
	_, err := Archive(ctx, bytes.NewReader(good), Want{Size: int64(len(good)), SHA256: digest(good), Compression: tarstream.Zstd})
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
	_, err := Archive(t.Context(), bytes.NewReader(gz), Want{Size: -1, Compression: tarstream.Zstd})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "compressed with gzip, not zstd") {
		t.Fatalf("Archive: %v, want ErrCorrupt naming both compressions", err)
	}
}
