package worldcheck

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/pierrec/lz4/v4"
)

// lz4BlockOf returns one lz4-java block: its header and its bytes.
func lz4BlockOf(t *testing.T, method byte, data []byte) []byte {
	t.Helper()
	body := data
	if method == lz4Block {
		out := make([]byte, lz4.CompressBlockBound(len(data)))
		n, err := lz4.CompressBlock(data, out, nil)
		if err != nil || n == 0 {
			t.Fatalf("lz4: %v (%d)", err, n)
		}
		body = out[:n]
	}
	b := append([]byte(lz4Magic), method|6)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(body)))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(data)))
	b = append(b, 0, 0, 0, 0)
	return append(b, body...)
}

func TestLZ4Stream(t *testing.T) {
	a, b := bytes.Repeat([]byte("chunk sections "), 2000), []byte("raw tail")
	end := lz4BlockOf(t, lz4Raw, nil)
	claim := func(method byte, clen, olen uint32) []byte {
		h := append([]byte(lz4Magic), method|6)
		h = binary.LittleEndian.AppendUint32(h, clen)
		return append(binary.LittleEndian.AppendUint32(h, olen), 0, 0, 0, 0)
	}
	tests := []struct {
		name string
		in   []byte
		want string // "" decodes to a+b
	}{
		{"two blocks", concat(lz4BlockOf(t, lz4Block, a), lz4BlockOf(t, lz4Raw, b), end), ""},
		{"no end mark", concat(lz4BlockOf(t, lz4Block, a), lz4BlockOf(t, lz4Raw, b)), "no LZ4Block header"},
		{"bad magic", []byte("LZ4Blocc" + strings.Repeat("\x00", 13)), "no LZ4Block header"},
		{"unknown method", concat(claim(0x30, 0, 1), end), "unknown block method"},
		{"raw length mismatch", concat(claim(lz4Raw, 1, 2), []byte{1}, end), "claims"},
		{"block larger than its size class", concat(claim(lz4Block, 0, 1<<17), end), "out of bounds"},
		{"compressed length past the end", concat(claim(lz4Block, 1<<20, 10), end), "out of bounds"},
		{"corrupt block", concat(claim(lz4Block, 3, 100), []byte{0xff, 0xff, 0xff}, end), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var dst bytes.Buffer
			err := lz4Stream(&dst, tc.in)
			switch {
			case tc.name == "corrupt block":
				if err == nil {
					t.Fatal("a corrupt block decoded")
				}
			case tc.want == "":
				if err != nil || !bytes.Equal(dst.Bytes(), append(append([]byte(nil), a...), b...)) {
					t.Fatalf("err %v, %d bytes decoded", err, dst.Len())
				}
			case err == nil || !strings.Contains(err.Error(), tc.want):
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}

func concat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
