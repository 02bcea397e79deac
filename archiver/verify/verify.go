// Package verify checks an archive against what the catalog recorded: its
// size and SHA-256, and that it decompresses and parses as tar to the end.
// It reads the archive once, in a streaming pass with fixed memory.
package verify

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/worldbackup/worldbackup/archiver/crypt"
	"github.com/worldbackup/worldbackup/archiver/tarstream"
)

// ErrMismatch is wrapped by the errors of an archive whose size or SHA-256
// differs from the expected one.
var ErrMismatch = errors.New("archive does not match")

// ErrCorrupt is wrapped by the errors of an archive that does not
// decompress or parse as tar to its end.
var ErrCorrupt = errors.New("archive is corrupt")

// Want is what the archive must be.
type Want struct {
	// Size in bytes; negative: not checked.
	Size int64
	// SHA256 is the lowercase hex digest; "": not checked.
	SHA256 string
	// Compression of the tar stream.
	Compression tarstream.Compression
	// Decrypt opens an encrypted (age) archive (crypt.Keys.Decrypt); nil:
	// an encrypted archive fails with crypt.ErrNoKey.
	Decrypt func(io.Reader) (io.Reader, error)
}

// Report describes the archive as read.
type Report struct {
	Size     int64  // archive bytes
	SHA256   string // of the archive bytes
	Entries  int64  // tar entries
	TarBytes int64  // uncompressed tar stream bytes
}

// Archive reads r to its end and checks it against want. The error wraps
// ErrMismatch and/or ErrCorrupt and says what differs.
func Archive(ctx context.Context, r io.Reader, want Want) (Report, error) {
	h := sha256.New()
	hr := &countReader{r: io.TeeReader(r, h)}
	buf := make([]byte, copyBuffer)
	rep, parseErr := parse(ctx, hr, want, buf)
	// Read what the decompressor left, so size and digest cover the file.
	if err := drain(ctx, hr, buf); err != nil {
		return rep, fmt.Errorf("reading archive: %w", err)
	}
	rep.Size = hr.n
	rep.SHA256 = hex.EncodeToString(h.Sum(nil))
	if err := ctx.Err(); err != nil {
		return rep, err
	}

	var errs []error
	if want.Size >= 0 && rep.Size != want.Size {
		errs = append(errs, fmt.Errorf("%w: size is %d bytes, want %d", ErrMismatch, rep.Size, want.Size))
	}
	if want.SHA256 != "" && rep.SHA256 != want.SHA256 {
		errs = append(errs, fmt.Errorf("%w: sha256 is %s, want %s", ErrMismatch, rep.SHA256, want.SHA256))
	}
	if parseErr != nil {
		errs = append(errs, parseErr)
	}
	return rep, errors.Join(errs...)
}

// copyBuffer is the size of the one buffer the archive is read through.
const copyBuffer = 256 << 10

// drain reads r to its end, checking ctx between reads.
func drain(ctx context.Context, r io.Reader, buf []byte) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		_, err := r.Read(buf)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// parse decompresses and reads the tar stream to its end, as a restore
// does: the compression told by the bytes (which must be the expected one),
// the tar end-of-archive marker, only zero padding after it, and nothing
// after the compressed stream.
func parse(ctx context.Context, r io.Reader, want Want, buf []byte) (rep Report, err error) {
	c := want.Compression
	br := bufio.NewReaderSize(r, tarstream.HeadSize)
	head, _ := br.Peek(tarstream.HeadSize)
	if !tarstream.IsTarHeader(head) && crypt.IsEncrypted(head) {
		if want.Decrypt == nil {
			return rep, crypt.ErrNoKey
		}
		pr, err := want.Decrypt(br)
		if errors.Is(err, crypt.ErrCorrupt) {
			return rep, fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		if err != nil {
			return rep, err
		}
		br = bufio.NewReaderSize(pr, tarstream.HeadSize)
		head, _ = br.Peek(tarstream.HeadSize)
	}
	got, err := tarstream.Detect(head)
	if err != nil {
		return rep, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if got != c {
		return rep, fmt.Errorf("%w: the archive is compressed with %s, not %s", ErrCorrupt, got, c)
	}
	dr, err := tarstream.Decompress(br, c, 0)
	if err != nil {
		return rep, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	defer dr.Close()
	cr := &countReader{r: dr}
	tr := tar.NewReader(cr)
	for {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return rep, fmt.Errorf("%w: reading tar entry %d: %w", ErrCorrupt, rep.Entries+1, err)
		}
		rep.Entries++
		if err := drain(ctx, tr, buf); err != nil {
			if ctx.Err() != nil {
				return rep, err
			}
			return rep, fmt.Errorf("%w: reading %q: %w", ErrCorrupt, h.Name, err)
		}
	}
	if cr.n == 0 {
		return rep, fmt.Errorf("%w: empty stream, not even a tar end marker", ErrCorrupt)
	}
	// The rest of the stream (tar padding, the compressed frame's end and
	// checksum) must decode too, and the file end there.
	if err := tarstream.FinishTar(&ctxReader{ctx: ctx, r: cr}, buf); err != nil {
		if ctx.Err() != nil {
			return rep, ctx.Err()
		}
		return rep, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	rep.TarBytes = cr.n
	return rep, nil
}

// ctxReader stops reading once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// countReader counts what is read through it.
type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
