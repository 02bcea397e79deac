// Package tarstream turns a world folder into a compressed tar archive in one
// streaming pass: walk → tar → compression → SHA-256 and byte count → the
// destination writer.
//
// The archive holds the entries below the world root with slash paths
// relative to it (no "./" prefix), so `tar --zstd -xf A -C DIR` recreates the
// tree in DIR. Long or non-UTF-8 names use PAX records. Symbolic links are
// stored as links and never followed (not even at the root); files with
// several names are stored once, then as hard links; fifos, sockets and
// devices are skipped with a warning and never opened. A file that vanishes
// during the walk is a warning; a file that grows or shrinks while it is read
// is stored with the size it had when opened (cut, or padded with zeros) and a
// warning, so the archive stays valid. Any other read error fails the stream
// with the file's path.
//
// Four goroutines share the work: one walks the world, reads the files and
// writes the tar stream; one compresses it; one hashes the compressed stream;
// one writes it to the destination. They hand each other a few large
// buffers, so memory use is fixed whatever the size of the world: file data
// is read straight into the compressor's input buffers, then moves through
// the compressor's bounded window and the buffers that carry the compressed
// stream to the hash and the destination.
package tarstream

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
)

// Options configure one stream.
type Options struct {
	// Compression of the tar stream; "" means Zstd.
	Compression Compression
	// Excludes are glob patterns of entries to leave out (see ValidateExcludes).
	Excludes []string
	// Log receives warnings (vanished, changed or skipped files); nil discards them.
	Log hclog.Logger
	// Progress, when set, is updated while the stream runs, so another
	// goroutine can report progress.
	Progress *Progress
	// Avoid are folders that must not be archived (the archive root, the
	// folder the archive is written in): a folder of the world that is one
	// of them (the same device and inode, whatever its path: a bind mount
	// of the archive root into the world) is skipped with a warning, and a
	// world that is one of them is refused with ErrSelfContaining. Missing
	// paths are ignored.
	Avoid []string

	// Seal, when set, wraps the compressed stream before it is hashed and
	// written (the age encryption of package crypt): Size and SHA256 are
	// then the sealed bytes'. Its Close finishes the sealed stream.
	Seal func(io.Writer) (io.WriteCloser, error)

	// afterHeader is a test seam: called with the entry's relative path after
	// a regular file's header is written and before its data is read.
	afterHeader func(rel string)
}

// Progress counts the work done so far; its fields may be read while Write
// runs.
type Progress struct {
	Files       atomic.Int64 // entries other than directories written so far
	InputBytes  atomic.Int64 // file data read so far
	OutputBytes atomic.Int64 // archive bytes written so far
}

// Result describes a finished stream.
type Result struct {
	// Files counts the non-directory entries (regular files, hard links and
	// symbolic links) in the archive.
	Files int64
	// Dirs counts the directory entries in the archive.
	Dirs int64
	// InputBytes is the file data read from the world.
	InputBytes int64
	// Size is the number of archive bytes written to the destination.
	Size int64
	// SHA256 is the lowercase hex SHA-256 of the archive bytes.
	SHA256 string
	// Excluded counts the entries left out by an exclude pattern.
	Excluded int64
	// Skipped counts the special files (fifos, sockets, devices) left out.
	Skipped int64
	// Warnings counts the files that vanished or changed during the walk,
	// and the symlinks that a restore would refuse (see package safelink).
	Warnings int64
}

// Write streams the world folder root as a compressed tar archive into dst
// and returns what it wrote. It does not close dst. On error, what was
// written to dst is not a valid archive and must be discarded.
func Write(ctx context.Context, dst io.Writer, root string, o Options) (Result, error) {
	o = o.withDefaults()
	m, err := compileExcludes(o.Excludes)
	if err != nil {
		return Result{}, err
	}
	// Three steps after this goroutine (which walks, reads and tars), each
	// on a goroutine of its own: the compressor, fed the tar stream in
	// large buffers, then the hash and the write of the compressed stream,
	// fed in large aligned buffers.
	h := sha256.New()
	hw := hashWriter{w: dst, h: h, n: &o.Progress.OutputBytes}
	sk := newStage(stageBuffer, true, hw.hash, hw.write)
	defer sk.abort() // stops the goroutine on the error paths
	var out io.Writer = sk
	var sw io.WriteCloser = nopWriteCloser{}
	// sealed is the encryption's own step, between the compressor and
	// the hash, on a goroutine of its own, so that encrypting overlaps
	// compressing rather than adding to it; nil without Seal.
	var sealed *stage
	if o.Seal != nil {
		if sw, err = o.Seal(sk); err != nil {
			return Result{}, err
		}
		sealed = newStage(stageBuffer, false, func(b []byte) error {
			_, err := sw.Write(b)
			return err
		})
		defer sealed.abort()
		out = sealed
	}
	cw, err := newCompressor(out, o.Compression)
	if err != nil {
		return Result{}, err
	}
	in := newStage(stageBuffer, false, func(b []byte) error {
		_, err := cw.Write(b)
		return err
	})
	tw := tar.NewWriter(in)
	w := &walker{
		root:  filepath.Clean(root),
		tw:    tw,
		space: in.Space,
		ex:    m,
		log:   o.Log,
		prog:  o.Progress,
		hook:  o.afterHeader,
		avoid: o.Avoid,
		links: make(map[fileID]string),
	}
	err = w.walkRoot(ctx)
	if err == nil {
		if err = tw.Close(); err != nil {
			err = fmt.Errorf("finishing tar stream: %w", err)
		}
	}
	if err != nil {
		in.abort()
		_ = cw.Close() // stops the compressor's goroutines; the output is void anyway
		return Result{}, err
	}
	if err := in.close(); err != nil {
		_ = cw.Close()
		return Result{}, fmt.Errorf("compressing the tar stream: %w", err)
	}
	if err := cw.Close(); err != nil {
		return Result{}, fmt.Errorf("finishing %s stream: %w", o.Compression, err)
	}
	if sealed != nil {
		if err := sealed.close(); err != nil {
			return Result{}, fmt.Errorf("encrypting the archive: %w", err)
		}
	}
	if err := sw.Close(); err != nil {
		return Result{}, fmt.Errorf("finishing the encrypted stream: %w", err)
	}
	if err := sk.close(); err != nil {
		return Result{}, fmt.Errorf("writing the archive: %w", err)
	}
	w.res.Size = o.Progress.OutputBytes.Load()
	w.res.SHA256 = hex.EncodeToString(h.Sum(nil))
	return w.res, nil
}

// ErrSelfContaining is wrapped by the error of a stream whose world folder
// is one of Options.Avoid: the archive would hold itself.
var ErrSelfContaining = errors.New("the world folder is the archive folder")

// reservedPrefix starts the names, at the top of a world, of the restore's
// own files (its marker, staging and previous folders): never archived.
const reservedPrefix = ".worldbackup-"

// readBuffer is the largest read of file data: file data is read straight
// into the compressor's input buffers.
const readBuffer = stageBuffer
