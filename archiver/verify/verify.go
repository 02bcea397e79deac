// Package verify checks an archive against what the catalog recorded: its
// size and SHA-256, and that it decompresses and parses as tar to the end.
// As a restore does, it reads the archive twice when the digest is known,
// each time streaming with fixed memory: first to check size and digest
// (at most the recorded size and one byte), then, only if they match, to
// parse it, hashing again what it parses. Bytes that do not match the row
// are never decompressed: a tampered archive cannot keep the verify busy
// decompressing a bomb until its deadline.
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
	"strings"

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
	// Size is the archive's bytes; Want.Size+1 for a longer archive, which
	// is read no further.
	Size int64
	// SHA256 is the digest of the archive's bytes; "" for a longer one.
	SHA256   string
	Entries  int64 // tar entries
	TarBytes int64 // uncompressed tar stream bytes
}

// Opener opens the archive from its start; Archive calls it once per
// pass. Its errors are returned as they are.
type Opener func(ctx context.Context) (io.ReadCloser, error)

// Archive checks the archive open opens against want. With want.SHA256 it
// first reads the archive (at most want.Size+1 bytes when want.Size is
// known) to check size and digest, and parses it only when they match;
// without, it parses in one pass. The error wraps ErrMismatch or ErrCorrupt
// and says what differs.
func Archive(ctx context.Context, open Opener, want Want) (Report, error) {
	buf := make([]byte, copyBuffer)
	if want.SHA256 != "" {
		if rep, err := pass(ctx, open, want, buf, false); err != nil {
			return rep, err
		}
	}
	// The parsing pass hashes again: a file changed since is a mismatch.
	return pass(ctx, open, want, buf, true)
}

// pass reads the archive once: it counts and hashes it and, when parse,
// decompresses and reads the tar stream to its end.
func pass(ctx context.Context, open Opener, want Want, buf []byte, parseIt bool) (Report, error) {
	r, err := open(ctx)
	if err != nil {
		return Report{}, err
	}
	defer r.Close()
	var src io.Reader = r
	if want.Size >= 0 {
		src = io.LimitReader(r, want.Size+1) // one byte more tells a longer file
	}
	h := sha256.New()
	hr := &countReader{r: io.TeeReader(src, h)}
	var (
		rep      Report
		parseErr error
	)
	if parseIt {
		rep, parseErr = parse(ctx, hr, want, buf)
	}
	// Read what the decompressor left, so size and digest cover the file.
	if err := drain(ctx, hr, buf); err != nil {
		return rep, fmt.Errorf("reading archive: %w", err)
	}
	rep.Size = hr.n
	longer := want.Size >= 0 && rep.Size > want.Size
	if !longer { // else the digest would be of a prefix: not reported
		rep.SHA256 = hex.EncodeToString(h.Sum(nil))
	}
	if err := ctx.Err(); err != nil {
		return rep, err
	}

	var errs []error
	switch {
	case longer:
		errs = append(errs, fmt.Errorf("%w: size is more than %d bytes, want %d", ErrMismatch, want.Size, want.Size))
	case want.Size >= 0 && rep.Size != want.Size:
		errs = append(errs, fmt.Errorf("%w: size is %d bytes, want %d", ErrMismatch, rep.Size, want.Size))
	}
	if want.SHA256 != "" && !longer && rep.SHA256 != want.SHA256 {
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
		if sparse(h) {
			// Its holes are not in the archive: reading them would
			// make up as many zeros as the header claims (2^62 bytes
			// in a crafted one). tr.Next reads the stored data.
			continue
		}
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

// sparse reports whether h is a GNU sparse file (the old GNU format's
// type S, or PAX's GNU.sparse records), which archive/tar reads with its
// holes filled in.
func sparse(h *tar.Header) bool {
	if h.Typeflag == tar.TypeGNUSparse {
		return true
	}
	for k := range h.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
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
