package tarstream

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
)

// Sink receives the uncompressed tar stream of WriteTar together with the
// bounds of each regular file's data, so a content-addressed store (package
// chunked) can cut the stream where the files are and skip reading files it
// already holds. Everything written outside BeginFile/EndFile is tar
// metadata: headers, PAX records, the padding after file data and the
// trailer.
type Sink interface {
	// Write receives the next bytes of the tar stream.
	io.Writer
	// Reusable reports whether the sink holds the data of the regular
	// file f from an earlier run, so it need not be read. Called before
	// the file is opened.
	Reusable(f File) bool
	// BeginFile is called after f's header was written, before its data.
	// reuse is what Reusable returned: when true, the f.Size bytes that
	// follow are zeros standing in for the data the sink already holds
	// (the file is not opened), which it must discard.
	BeginFile(f File, reuse bool) error
	// EndFile is called after the file's data. intact is false when the
	// file changed while it was read (it shrank or grew): what was stored
	// must then not be reused by a later run.
	EndFile(intact bool) error
}

// Spacer is a Sink that can be read into: Space returns the free end of
// the buffer its next Write fills, never empty; a Write of a prefix of it
// (file data read there) is then kept without a copy.
type Spacer interface {
	Space() []byte
}

// InPlace reports whether p lies at the free end of buf, within its
// capacity: data a Spacer's Space returned and the walk read into, which
// Write then keeps by extending buf, without a copy.
func InPlace(buf, p []byte) bool {
	return len(p) > 0 && len(p) <= cap(buf)-len(buf) && &p[0] == &buf[:len(buf)+1][len(buf)]
}

// File is a regular file as a Sink sees it: its path in the archive and the
// metadata a later run compares to decide whether it changed.
type File struct {
	Path    string // slash path relative to the world, as in the tar header
	Size    int64
	MtimeNs int64 // modification time, nanoseconds since the epoch
	CtimeNs int64 // status change time, nanoseconds since the epoch
	Inode   uint64
}

// WriteTar streams the world folder root as an uncompressed tar stream into
// sink, the same entries in the same order with the same headers as Write
// (o.Compression is ignored), and returns what it wrote. Result.SHA256 is
// empty: the sink names the content. On error, what was written is void.
func WriteTar(ctx context.Context, sink Sink, root string, o Options) (Result, error) {
	o = o.withDefaults()
	m, err := compileExcludes(o.Excludes)
	if err != nil {
		return Result{}, err
	}
	cw := &countWriter{w: sink, n: &o.Progress.OutputBytes}
	tw := tar.NewWriter(cw)
	// File data is read into the sink's own buffer when it offers one.
	var buf []byte
	var space func() []byte
	if sp, ok := sink.(Spacer); ok {
		space = sp.Space
	} else {
		buf = make([]byte, readBuffer)
	}
	w := &walker{
		root:  filepath.Clean(root),
		tw:    tw,
		sink:  sink,
		buf:   buf,
		space: space,
		ex:    m,
		log:   o.Log,
		prog:  o.Progress,
		hook:  o.afterHeader,
		avoid: o.Avoid,
		links: make(map[fileID]string),
	}
	if err := w.walkRoot(ctx); err != nil {
		return Result{}, err
	}
	if err := tw.Close(); err != nil {
		return Result{}, fmt.Errorf("finishing tar stream: %w", err)
	}
	w.res.Size = o.Progress.OutputBytes.Load()
	return w.res, nil
}

func (o Options) withDefaults() Options {
	if o.Compression == "" {
		o.Compression = Zstd
	}
	if o.Log == nil {
		o.Log = hclog.NewNullLogger()
	}
	if o.Progress == nil {
		o.Progress = new(Progress)
	}
	return o
}

// countWriter counts the bytes written through it into n.
type countWriter struct {
	w io.Writer
	n interface{ Add(int64) int64 }
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// zeros stands in for the data of a file a Sink reuses.
var zeros [64 << 10]byte

// writeZeros writes n zero bytes to tw.
func writeZeros(tw *tar.Writer, n int64) error {
	for n > 0 {
		k := min(int64(len(zeros)), n)
		if _, err := tw.Write(zeros[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}
