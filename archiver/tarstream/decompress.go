package tarstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// The reading side of archives: restore and verify both read an archive
// through Detect, Decompress and FinishTar, so they accept and refuse the
// same archives.

// DefaultMaxWindow caps the memory of the zstd decoder: it covers every
// compression level and --long=27.
const DefaultMaxWindow int64 = 128 << 20

// HeadSize is how many first bytes of an archive Detect needs.
const HeadSize = 512

// ErrTrailingData is wrapped by the error of an archive that does not end
// where its tar stream and compressed stream end.
var ErrTrailingData = errors.New("the archive does not end cleanly after its tar stream")

var (
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}
	gzipMagic = []byte{0x1f, 0x8b}
)

// IsTarHeader reports whether head starts with a tar header block: the
// ustar magic at its place and a checksum that matches (unsigned, or signed
// as some old tars wrote it). A plain tar's first bytes are a member's name,
// which may spell any magic (a file named "P*M\x18.dat" starts like a zstd
// skippable frame), so a header is recognised before any magic.
func IsTarHeader(head []byte) bool {
	if len(head) < 512 || string(head[257:262]) != "ustar" {
		return false
	}
	field := bytes.TrimRight(bytes.TrimLeft(head[148:156], " "), " \x00")
	var want int64
	if len(field) == 0 {
		return false
	}
	for _, c := range field {
		if c < '0' || c > '7' {
			return false
		}
		want = want*8 + int64(c-'0')
	}
	var unsigned, signed int64
	for i, c := range head[:512] {
		if i >= 148 && i < 156 {
			c = ' '
		}
		unsigned += int64(c)
		signed += int64(int8(c))
	}
	return want == unsigned || want == signed
}

// Detect tells an archive's compression from its first HeadSize bytes (or
// all of them, if fewer): a plain tar (a tar header: IsTarHeader), a zstd
// frame or skippable frame, or a gzip member. Anything else is an error
// naming what it looks like.
func Detect(head []byte) (Compression, error) {
	switch {
	case IsTarHeader(head):
		return None, nil
	case bytes.HasPrefix(head, zstdMagic) || (len(head) >= 4 && head[0]&0xf0 == 0x50 && bytes.Equal(head[1:4], []byte{0x2a, 0x4d, 0x18})):
		return Zstd, nil // a zstd frame, or a skippable frame (magic 0x184D2A5?)
	case bytes.HasPrefix(head, gzipMagic):
		return Gzip, nil
	case len(head) >= 262 && string(head[257:262]) == "ustar":
		return None, nil
	case len(head) == 0:
		return "", errors.New("the archive is empty")
	}
	kind := "unknown format"
	switch {
	case bytes.HasPrefix(head, []byte{0xfd, '7', 'z', 'X', 'Z', 0}):
		kind = "xz"
	case bytes.HasPrefix(head, []byte("BZh")):
		kind = "bzip2"
	case bytes.HasPrefix(head, []byte{0x04, 0x22, 0x4d, 0x18}):
		kind = "lz4"
	}
	return "", fmt.Errorf("not a tar archive compressed with zstd or gzip, nor a plain tar (%s)", kind)
}

// Decompress returns a reader of the tar stream inside r, compressed with c.
// Closing it releases the decoder; it never closes r. zstd frames whose
// window or decoder memory exceeds maxWindow bytes (0: DefaultMaxWindow) are
// refused with an error wrapping zstd.ErrWindowSizeExceeded or
// zstd.ErrDecoderSizeExceeded. Read to its end, the reader fails on any byte
// after the compressed stream (see FinishTar).
func Decompress(r io.Reader, c Compression, maxWindow int64) (io.ReadCloser, error) {
	if maxWindow <= 0 {
		maxWindow = DefaultMaxWindow
	}
	switch c {
	case Zstd:
		dec, err := zstd.NewReader(r,
			zstd.WithDecoderMaxMemory(uint64(maxWindow)),
			zstd.WithDecoderMaxWindow(uint64(maxWindow)),
			zstd.WithDecoderConcurrency(2),
		)
		if err != nil {
			return nil, fmt.Errorf("starting the zstd decoder: %w", err)
		}
		return zstdReadCloser{dec}, nil
	case Gzip:
		// Single-threaded: a read-ahead goroutine would keep reading r
		// after an error, behind its caller's back.
		gz, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("reading the gzip header: %w", err)
		}
		return gz, nil
	case None:
		return io.NopCloser(r), nil
	default:
		return nil, fmt.Errorf("unknown compression %q", c)
	}
}

// FinishTar reads what follows the end-of-archive marker of the tar stream
// r (a Decompress reader, after tar.Reader.Next returned io.EOF): only zero
// padding may follow, up to the end of the compressed stream, and the archive
// must end there. Anything else is an error wrapping ErrTrailingData. buf is
// the read buffer.
func FinishTar(r io.Reader, buf []byte) error {
	var padding int64
	for {
		n, err := r.Read(buf)
		for i, b := range buf[:n] {
			if b != 0 {
				return fmt.Errorf("%w: non-zero data %d bytes after the tar end-of-archive marker", ErrTrailingData, padding+int64(i))
			}
		}
		padding += int64(n)
		if err == io.EOF {
			return nil
		}
		var pe *fs.PathError
		if errors.As(err, &pe) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return err // reading failed; the archive may be fine
		}
		if err != nil {
			return fmt.Errorf("%w: after the tar end-of-archive marker: %w (bytes after the compressed stream, or a damaged end)", ErrTrailingData, err)
		}
	}
}

type zstdReadCloser struct{ *zstd.Decoder }

func (z zstdReadCloser) Close() error { z.Decoder.Close(); return nil }
