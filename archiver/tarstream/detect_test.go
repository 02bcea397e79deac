package tarstream

import (
	"archive/tar"
	"bytes"
	"testing"
)

// tarHead returns the first HeadSize bytes of a plain tar whose first
// member is name.
func tarHead(t *testing.T, name string) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: 5, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()[:HeadSize]
}

// TestDetect: a plain tar is told by its header, whatever its first
// member's name spells; the magics of the compressed streams still count
// when no tar header is there.
func TestDetect(t *testing.T) {
	flipped := tarHead(t, "level.dat")
	flipped[0] ^= 1 // the checksum no longer matches
	for _, tc := range []struct {
		name string
		head []byte
		want Compression
	}{
		{"plain tar", tarHead(t, "level.dat"), None},
		{"a name that starts like a zstd skippable frame", tarHead(t, "P*M\x18.dat"), None},
		{"a name that starts like a zstd frame", tarHead(t, "\x28\xb5\x2f\xfd.dat"), None},
		{"a name that starts like a gzip member", tarHead(t, "\x1f\x8b.dat"), None},
		{"zstd frame", append([]byte{0x28, 0xb5, 0x2f, 0xfd}, make([]byte, 508)...), Zstd},
		{"zstd skippable frame", append([]byte{0x5a, 0x2a, 0x4d, 0x18}, make([]byte, 508)...), Zstd},
		{"gzip member", append([]byte{0x1f, 0x8b, 8}, make([]byte, 509)...), Gzip},
		// Not a header, but the ustar magic: the tar reader refuses it.
		{"tar header with a wrong checksum", flipped, None},
		{"neither", make([]byte, 512), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Detect(tc.head)
			if got != tc.want || (tc.want == "") != (err != nil) {
				t.Errorf("Detect = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if IsTarHeader(flipped) {
		t.Error("a header whose checksum does not match is taken for one")
	}
	if !IsTarHeader(tarHead(t, "age-encryption.org/v1\n-> X25519 x")) {
		t.Error("a tar whose first member is named like an age header is not a tar")
	}
}
