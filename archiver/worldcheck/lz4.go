package worldcheck

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/pierrec/lz4/v4"
)

// The game's lz4 chunks (compression 4) are lz4-java's LZ4BlockOutputStream
// format: blocks of a 21-byte header ("LZ4Block", a token whose high nibble
// is the method and low nibble the block size's log2 minus 10, compressed
// and original lengths and a checksum, little-endian) and the block's bytes,
// ended by an empty block.
const (
	lz4Magic      = "LZ4Block"
	lz4HeaderSize = 21
	lz4Raw        = 0x10
	lz4Block      = 0x20
)

// lz4 inflates an lz4-java block stream from src into c.buf, at most
// MaxDocument bytes. The compressed bytes are read first (they are at most
// MaxDocument too), then each block is decoded into c.buf.
func (c *checker) lz4(src io.Reader) error {
	c.raw.Reset()
	if n, err := c.raw.ReadFrom(io.LimitReader(src, MaxDocument+1)); err != nil {
		return fmt.Errorf("lz4 chunk cannot be read: %s", err)
	} else if n > MaxDocument {
		return fmt.Errorf("lz4 chunk is larger than %d bytes", MaxDocument)
	}
	if err := lz4Stream(&c.buf, c.raw.Bytes()); err != nil {
		return fmt.Errorf("lz4 chunk does not decompress: %s", err)
	}
	return nil
}

// lz4Stream decodes the block stream b into dst (reset first).
func lz4Stream(dst *bytes.Buffer, b []byte) error {
	dst.Reset()
	for {
		if len(b) < lz4HeaderSize || string(b[:8]) != lz4Magic {
			return errors.New("no LZ4Block header")
		}
		token := b[8]
		clen := int64(int32(binary.LittleEndian.Uint32(b[9:])))
		olen := int64(int32(binary.LittleEndian.Uint32(b[13:])))
		b = b[lz4HeaderSize:]
		method, maxBlock := token&0xf0, int64(1)<<(10+token&0x0f)
		switch {
		case method != lz4Raw && method != lz4Block:
			return fmt.Errorf("unknown block method %#x", method)
		case clen < 0 || olen < 0 || olen > maxBlock || clen > int64(len(b)):
			return fmt.Errorf("block lengths %d/%d out of bounds", clen, olen)
		case int64(dst.Len())+olen > MaxDocument:
			return fmt.Errorf("decompresses to more than %d bytes", MaxDocument)
		case olen == 0:
			if clen != 0 {
				return errors.New("empty block with data")
			}
			return nil // the end mark
		case method == lz4Raw:
			if clen != olen {
				return fmt.Errorf("raw block of %d bytes claims %d", clen, olen)
			}
			dst.Write(b[:clen])
		default:
			dst.Grow(int(olen))
			out := dst.AvailableBuffer()[:olen] // decoded in place, then taken in
			n, err := lz4.UncompressBlock(b[:clen], out)
			if err != nil {
				return err
			}
			if int64(n) != olen {
				return fmt.Errorf("block decodes to %d bytes, header says %d", n, olen)
			}
			dst.Write(out)
		}
		b = b[clen:]
	}
}
