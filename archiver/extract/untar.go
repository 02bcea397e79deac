package extract

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"

	"github.com/worldbackup/worldbackup/archiver/crypt"
	"github.com/worldbackup/worldbackup/archiver/safelink"
	"github.com/worldbackup/worldbackup/archiver/tarstream"
)

// copyBufSize is the buffer for file content.
const copyBufSize = 256 << 10

// Folders are remembered until the end (their modes and times are applied
// last). maxDirBookkeeping bounds that memory whatever the archive says;
// dirOverhead is the per-folder cost besides the name.
const (
	maxDirBookkeeping = 256 << 20
	dirOverhead       = 128
)

// hashFile returns the SHA-256 (hex) and size of r's remaining bytes.
func hashFile(ctx context.Context, r io.Reader) (string, int64, error) {
	h := sha256.New()
	n, err := io.CopyBuffer(h, &ctxReader{ctx: ctx, r: r}, make([]byte, copyBufSize))
	if err != nil {
		return "", n, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
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

// hashReader hashes what is read through it (counts only, when h is nil).
type hashReader struct {
	r io.Reader
	h hash.Hash
	n int64
}

func (hr *hashReader) Read(p []byte) (int, error) {
	n, err := hr.r.Read(p)
	if hr.h != nil {
		hr.h.Write(p[:n])
	}
	hr.n += int64(n)
	return n, err
}

// tailReader remembers the last 1024 bytes read, to check that a tar stream
// ended with its end-of-archive marker (two zero blocks) rather than being
// cut at an entry boundary, which archive/tar does not report.
type tailReader struct {
	r    io.Reader
	tail [1024]byte
	n    int64
}

func (t *tailReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	b := p[:n]
	if len(b) >= len(t.tail) {
		copy(t.tail[:], b[len(b)-len(t.tail):])
	} else if len(b) > 0 {
		copy(t.tail[:], t.tail[len(b):])
		copy(t.tail[len(t.tail)-len(b):], b)
	}
	t.n += int64(n)
	return n, err
}

func (t *tailReader) endsWithMarker() bool {
	return t.n >= int64(len(t.tail)) && bytes.Count(t.tail[:], []byte{0}) == len(t.tail)
}

// dirMeta is what a directory entry asks for, applied once everything inside
// the directory is written.
type dirMeta struct {
	implicit     bool // created as a parent of another entry, no entry of its own
	mode         fs.FileMode
	uid, gid     int
	mtime, atime time.Time
}

// extractor writes one tar stream into a staging root.
type extractor struct {
	root      *os.Root
	o         Options
	res       *Result
	asRoot    bool
	dirs      map[string]*dirMeta // every directory created, by cleaned path ("." for the root)
	rootHdr   *tar.Header         // the archive's entry for "." (./), if any
	applyRoot bool                // apply rootHdr to the staging root (beside layout: it becomes DIR)
	buf       []byte
	dirBytes  int64 // memory held by dirs, roughly
	index     int64
	raw       string // current entry's raw name

	// cached handle of the last parent folder, for *at syscalls
	curDir  string
	curFile *os.File
}

// refuse makes a RefusedError about the current entry.
func (x *extractor) refuse(format string, args ...any) error {
	return &RefusedError{Index: x.index, Name: x.raw, Reason: fmt.Sprintf(format, args...)}
}

// sourceReader remembers the first error of the archive's own reads (other
// than EOF): a disk or a network that failed, not the archive's contents.
type sourceReader struct {
	r   io.Reader
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF && s.err == nil {
		s.err = err
	}
	return n, err
}

// extract streams f (positioned at its start) through the decompressor and
// the tar reader into st, then checks that f's bytes still hash to sha.
// When reading f itself failed, the error is that I/O failure, whatever the
// decompressor or the tar reader made of the stream that broke off (a retry
// may succeed), never a refusal of the archive.
func extract(ctx context.Context, f io.Reader, st *staging, o Options, res *Result) error {
	src := &sourceReader{r: f}
	err := extractFrom(ctx, src, st, o, res)
	if err != nil && src.err != nil {
		return fmt.Errorf("reading archive: %w", src.err)
	}
	return err
}

func extractFrom(ctx context.Context, f io.Reader, st *staging, o Options, res *Result) error {
	// A Verified stream checks itself (a chunked run: every blob against
	// its hash): hashing it again here would only cost time.
	hr := &hashReader{r: &ctxReader{ctx: ctx, r: f}}
	if !o.Verified {
		hr.h = sha256.New()
	}
	br := bufio.NewReaderSize(hr, copyBufSize)
	head, perr := br.Peek(tarstream.HeadSize)
	if perr != nil && perr != io.EOF && perr != bufio.ErrBufferFull {
		// The stream failed before its first bytes: say why, not "empty".
		var pe *fs.PathError
		if errors.As(perr, &pe) || errors.Is(perr, context.Canceled) || errors.Is(perr, context.DeadlineExceeded) {
			return fmt.Errorf("reading archive: %w", perr)
		}
		return &RefusedError{Reason: "at the start of the archive: " + perr.Error()}
	}
	if !tarstream.IsTarHeader(head) && crypt.IsEncrypted(head) {
		// An age file: the checksum covered its ciphertext; open it, then
		// read what it holds by the same rules.
		if o.Decrypt == nil {
			return crypt.ErrNoKey
		}
		pr, err := o.Decrypt(br)
		if errors.Is(err, crypt.ErrCorrupt) {
			return &RefusedError{Reason: err.Error()}
		}
		if err != nil {
			return err
		}
		pbr := bufio.NewReaderSize(pr, copyBufSize)
		if head, err = pbr.Peek(tarstream.HeadSize); err != nil && err != io.EOF && err != bufio.ErrBufferFull {
			if errors.Is(err, crypt.ErrCorrupt) {
				return &RefusedError{Reason: err.Error()}
			}
			return fmt.Errorf("reading archive: %w", err)
		}
		br = pbr
		res.Encrypted = true
	}
	comp, err := tarstream.Detect(head)
	if err != nil {
		return &RefusedError{Reason: err.Error()}
	}
	dr, err := tarstream.Decompress(br, comp, o.MaxDecoderMemory)
	if err != nil {
		return &RefusedError{Reason: fmt.Sprintf("corrupt %s stream: %v", comp, err)}
	}
	defer dr.Close()
	res.Compression = string(comp)
	tail := &tailReader{r: dr}
	tr := tar.NewReader(tail)

	x := &extractor{
		root:      st.root,
		o:         o,
		res:       res,
		asRoot:    os.Geteuid() == 0,
		dirs:      map[string]*dirMeta{".": {implicit: true}},
		applyRoot: st.applyRoot,
		buf:       make([]byte, copyBufSize),
	}
	defer x.closeDir()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		before := tail.n
		hdr, err := tr.Next()
		if err == io.EOF {
			// A complete archive ends with two zero blocks, read by this last
			// Next (after the previous entry's padding). Zeros at the tail
			// alone are not proof: a file's data can end with zeros.
			if tail.n-before < 1024 || !tail.endsWithMarker() {
				return &RefusedError{Reason: fmt.Sprintf("the tar stream ends after entry %d %q without its end-of-archive marker: the archive is truncated", x.index, x.raw)}
			}
			// Only padding may follow, and nothing the compressed stream.
			if err := tarstream.FinishTar(tail, x.buf); err != nil {
				if errors.Is(err, tarstream.ErrTrailingData) {
					return &RefusedError{Reason: err.Error()}
				}
				return fmt.Errorf("reading archive: %w", err)
			}
			break
		}
		if err != nil {
			return x.streamError(err)
		}
		x.index++
		x.raw = hdr.Name
		if x.index > o.MaxEntries {
			return x.refuse("the archive has more than %d entries (raise --max-entries if it is genuine)", o.MaxEntries)
		}
		if err := x.entry(hdr, tr); err != nil {
			return err
		}
		res.Entries++
	}
	if o.RunID != "" {
		if err := x.writeMarker(); err != nil {
			return err
		}
	}
	if err := x.finishDirs(); err != nil {
		return err
	}
	st.rootMeta = x.rootHdr != nil
	// The checksum was verified in a first pass; make sure these are the same bytes.
	if _, err := io.CopyBuffer(io.Discard, hr, x.buf); err != nil {
		return fmt.Errorf("reading archive: %w", err)
	}
	if !o.Verified {
		if got := hex.EncodeToString(hr.h.Sum(nil)); got != o.SHA256 {
			return fmt.Errorf("%w: the archive changed while it was being extracted (SHA-256 now %s); nothing was restored", ErrChecksum, got)
		}
	}
	res.ArchiveBytes = hr.n
	return nil
}

// streamError turns an error of the tar reader or the decompressor into a
// refusal naming the last good entry, unless it is an I/O failure.
func (x *extractor) streamError(err error) error { return x.streamErrorIn(err, false) }

// streamErrorIn is streamError; inEntry says the stream broke inside the
// current entry's data rather than between entries.
func (x *extractor) streamErrorIn(err error, inEntry bool) error {
	var pe *fs.PathError
	if errors.As(err, &pe) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("reading archive: %w", err)
	}
	where := "at the start of the archive"
	if x.index > 0 {
		where = fmt.Sprintf("after entry %d %q", x.index, x.raw)
		if inEntry {
			where = fmt.Sprintf("in the data of entry %d %q", x.index, x.raw)
		}
	}
	why := err.Error()
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		why = "the archive is truncated (unexpected end of stream)"
	case errors.Is(err, tar.ErrHeader):
		why = "invalid tar header (corrupt archive, or a header field such as a PAX path holding a NUL byte)"
	case errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded):
		why = fmt.Sprintf("zstd frame needs more decoder memory than the %d-byte cap: %v", x.o.MaxDecoderMemory, err)
	}
	return &RefusedError{Reason: where + ": " + why}
}

// entry checks and writes one archive member.
func (x *extractor) entry(hdr *tar.Header, tr io.Reader) error {
	name, err := cleanName(hdr.Name)
	if err != nil {
		return x.refuse("%v", err)
	}
	if hdr.Size < 0 {
		return x.refuse("negative size")
	}
	switch hdr.Typeflag {
	case tar.TypeReg, tar.TypeGNUSparse:
		if name == "" {
			return x.refuse("a file entry names the target folder itself")
		}
		if hdr.Size > x.o.MaxBytes-x.res.Bytes {
			return x.refuse("its %d bytes bring the total past the %d-byte cap (raise --max-bytes if the archive is genuine)", hdr.Size, x.o.MaxBytes)
		}
		return x.file(name, hdr, tr)
	case tar.TypeDir:
		return x.dir(name, hdr)
	case tar.TypeSymlink:
		if name == "" {
			return x.refuse("a symlink entry names the target folder itself")
		}
		if err := safelink.Check(name, hdr.Linkname); err != nil {
			return x.refuse("%v", err)
		}
		return x.symlink(name, hdr)
	case tar.TypeLink:
		if name == "" {
			return x.refuse("a hardlink entry names the target folder itself")
		}
		return x.hardlink(name, hdr)
	case tar.TypeChar, tar.TypeBlock:
		return x.refuse("device files are not allowed in a world archive")
	case tar.TypeFifo:
		return x.refuse("fifos are not allowed in a world archive")
	case tar.TypeXGlobalHeader:
		return nil // PAX global header: no file
	default:
		return x.refuse("unsupported entry type %q", string(hdr.Typeflag))
	}
}

// parent makes sure every folder above name exists as a real directory
// created by this extraction, creating missing ones, and refuses a parent
// that is a symlink or a file. It returns the parent's path ("." at top).
func (x *extractor) parent(name string) (string, error) {
	dir := path.Dir(name)
	if _, ok := x.dirs[dir]; ok {
		return dir, nil
	}
	// Find the deepest ancestor already created as a directory.
	parts := strings.Split(dir, "/")
	known := len(parts) - 1
	for known > 0 {
		if _, ok := x.dirs[strings.Join(parts[:known], "/")]; ok {
			break
		}
		known--
	}
	// parts[known] is not a directory of ours. The staging folder started
	// empty, so if it exists it is an earlier non-directory entry.
	first := strings.Join(parts[:known+1], "/")
	fi, err := x.root.Lstat(first)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return "", fmt.Errorf("checking folder %q: %w", first, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return "", x.refuse("its parent %q is a symlink: entries are never written through symlinks", first)
	default:
		return "", x.refuse("its parent %q is not a directory", first)
	}
	// Create the missing folders walking down with one handle per level, so
	// a deep new path costs O(depth) system calls, not O(depth²).
	cur := x.root
	if known > 0 {
		if cur, err = x.root.OpenRoot(strings.Join(parts[:known], "/")); err != nil {
			return "", fmt.Errorf("opening folder %q: %w", strings.Join(parts[:known], "/"), err)
		}
	}
	defer func() {
		if cur != x.root {
			cur.Close()
		}
	}()
	for k := known; k < len(parts); k++ {
		p := strings.Join(parts[:k+1], "/")
		if err := x.track(p, &dirMeta{implicit: true}); err != nil {
			return "", err
		}
		if err := cur.Mkdir(parts[k], 0o700); err != nil {
			delete(x.dirs, p)
			return "", fmt.Errorf("creating folder %q: %w", p, err)
		}
		if k == len(parts)-1 {
			break
		}
		next, err := cur.OpenRoot(parts[k])
		if err != nil {
			return "", fmt.Errorf("opening folder %q: %w", p, err)
		}
		if cur != x.root {
			cur.Close()
		}
		cur = next
	}
	return dir, nil
}

// track records a directory, refusing archives whose folder bookkeeping
// would take more than maxDirBookkeeping bytes of memory.
func (x *extractor) track(name string, m *dirMeta) error {
	if _, ok := x.dirs[name]; !ok {
		x.dirBytes += int64(len(name)) + dirOverhead
		if x.dirBytes > maxDirBookkeeping {
			return x.refuse("the archive has more folders than a restore keeps track of (%d MiB of folder names): it is not a world", maxDirBookkeeping>>20)
		}
	}
	x.dirs[name] = m
	return nil
}

// exists refuses a name that an earlier entry already took.
func (x *extractor) duplicate(name string, err error) error {
	if errors.Is(err, fs.ErrExist) {
		if _, isDir := x.dirs[name]; isDir {
			return x.refuse("duplicate entry: %q is already a directory", name)
		}
		return x.refuse("duplicate entry: %q was already extracted", name)
	}
	return nil
}

func (x *extractor) file(name string, hdr *tar.Header, tr io.Reader) error {
	dir, err := x.parent(name)
	if err != nil {
		return err
	}
	f, err := x.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		if d := x.duplicate(name, err); d != nil {
			return d
		}
		return fmt.Errorf("creating %q: %w", name, err)
	}
	n, err := io.CopyBuffer(f, io.LimitReader(tr, hdr.Size), x.buf)
	if err == nil && n != hdr.Size {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		f.Close()
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return fmt.Errorf("writing %q: %w", name, err)
		}
		return x.streamErrorIn(err, true)
	}
	x.res.Bytes += n
	if x.asRoot {
		if err := f.Chown(hdr.Uid, hdr.Gid); err != nil {
			f.Close()
			return fmt.Errorf("setting owner of %q: %w", name, err)
		}
	}
	if err := f.Chmod(fs.FileMode(hdr.Mode) & fs.ModePerm); err != nil {
		f.Close()
		return fmt.Errorf("setting mode of %q: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %q: %w", name, err)
	}
	x.res.Files++
	return x.setTimes(dir, path.Base(name), hdr.ModTime, hdr.AccessTime)
}

func (x *extractor) dir(name string, hdr *tar.Header) error {
	meta := &dirMeta{
		mode:  fs.FileMode(hdr.Mode) & fs.ModePerm,
		uid:   hdr.Uid,
		gid:   hdr.Gid,
		mtime: hdr.ModTime,
		atime: hdr.AccessTime,
	}
	if name == "" {
		if x.rootHdr != nil {
			return x.refuse("duplicate entry for the archive's root folder")
		}
		x.rootHdr = hdr
		x.res.Dirs++
		return nil
	}
	if m, ok := x.dirs[name]; ok {
		if !m.implicit {
			return x.refuse("duplicate entry: directory %q was already extracted", name)
		}
		x.dirs[name] = meta // already counted by track
		x.res.Dirs++
		return nil
	}
	if _, err := x.parent(name); err != nil {
		return err
	}
	if err := x.root.Mkdir(name, 0o700); err != nil {
		if d := x.duplicate(name, err); d != nil {
			return d
		}
		return fmt.Errorf("creating folder %q: %w", name, err)
	}
	if err := x.track(name, meta); err != nil {
		return err
	}
	x.res.Dirs++
	return nil
}

func (x *extractor) symlink(name string, hdr *tar.Header) error {
	dir, err := x.parent(name)
	if err != nil {
		return err
	}
	if err := x.root.Symlink(hdr.Linkname, name); err != nil {
		if d := x.duplicate(name, err); d != nil {
			return d
		}
		return fmt.Errorf("creating symlink %q: %w", name, err)
	}
	x.res.Symlinks++
	d, err := x.dirHandle(dir)
	if err != nil {
		return err
	}
	if x.asRoot {
		if err := unix.Fchownat(int(d.Fd()), path.Base(name), hdr.Uid, hdr.Gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("setting owner of symlink %q: %w", name, err)
		}
	}
	return x.setTimes(dir, path.Base(name), hdr.ModTime, hdr.AccessTime)
}

func (x *extractor) hardlink(name string, hdr *tar.Header) error {
	target, err := cleanName(hdr.Linkname)
	if err != nil {
		return x.refuse("hardlink target %q: %v", hdr.Linkname, err)
	}
	if target == "" {
		return x.refuse("hardlink to the target folder itself")
	}
	// The target must be an earlier regular file, reached through real
	// folders only (so not through a symlink, not outside).
	if _, ok := x.dirs[path.Dir(target)]; !ok {
		return x.refuse("hardlink to %q, which is not an earlier entry", hdr.Linkname)
	}
	fi, err := x.root.Lstat(target)
	if errors.Is(err, fs.ErrNotExist) {
		return x.refuse("hardlink to %q, which is not an earlier entry", hdr.Linkname)
	}
	if err != nil {
		return fmt.Errorf("checking hardlink target %q: %w", target, err)
	}
	if !fi.Mode().IsRegular() {
		return x.refuse("hardlink to %q, which is not a regular file", hdr.Linkname)
	}
	if _, err := x.parent(name); err != nil {
		return err
	}
	if err := x.root.Link(target, name); err != nil {
		if d := x.duplicate(name, err); d != nil {
			return d
		}
		return fmt.Errorf("creating hardlink %q: %w", name, err)
	}
	x.res.Hardlinks++
	return nil
}

// writeMarker writes the restore marker at the top of the staging folder,
// before the folders' times are applied, recording its own inode (the
// swap moves it into place by rename, which keeps it).
func (x *extractor) writeMarker() (err error) {
	f, err := x.root.OpenFile(MarkerName, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("writing the restore marker: %w", err)
	}
	defer func() {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("writing the restore marker: %w", cerr)
		}
	}()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("writing the restore marker: %w", err)
	}
	b, err := json.Marshal(marker{RunID: x.o.RunID, SHA256: x.o.SHA256, Archive: x.o.Archive, RestoredAt: time.Now().UTC(), Inode: inodeOf(fi)})
	if err != nil {
		return fmt.Errorf("encoding the restore marker: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("writing the restore marker: %w", err)
	}
	return nil
}

// dirHandle returns an open handle on the directory dir (a real directory
// created by this extraction), caching the last one.
func (x *extractor) dirHandle(dir string) (*os.File, error) {
	if x.curFile != nil && x.curDir == dir {
		return x.curFile, nil
	}
	x.closeDir()
	f, err := x.root.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("opening folder %q: %w", dir, err)
	}
	x.curDir, x.curFile = dir, f
	return f, nil
}

func (x *extractor) closeDir() {
	if x.curFile != nil {
		x.curFile.Close()
		x.curFile, x.curDir = nil, ""
	}
}

// setTimes sets base's times in dir without following a symlink. A zero
// atime is left alone.
func (x *extractor) setTimes(dir, base string, mtime, atime time.Time) error {
	d, err := x.dirHandle(dir)
	if err != nil {
		return err
	}
	if err := unix.UtimesNanoAt(int(d.Fd()), base, timespecs(mtime, atime), unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("setting times of %q: %w", path.Join(dir, base), err)
	}
	return nil
}

// finishDirs applies the directory entries' modes, owners and times, now
// that nothing more will be written inside them: a depth-first walk that
// opens each folder relative to its parent's handle (O(1) per folder, even in
// a deep tree) and applies a folder's attributes after its children's.
// Folders created only as parents get mode 0755. The root's own entry (./)
// is applied last, in the beside layout only: inside, DIR (a volume root)
// keeps its own.
func (x *extractor) finishDirs() error {
	x.closeDir()
	children := make(map[string][]string, len(x.dirs))
	for n := range x.dirs {
		if n != "." {
			p := path.Dir(n)
			children[p] = append(children[p], path.Base(n))
		}
	}
	var walk func(f *os.File, name string) error
	walk = func(f *os.File, name string) error {
		for _, c := range children[name] {
			cn := path.Join(name, c)
			fd, err := unix.Openat(int(f.Fd()), c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("opening folder %q: %w", cn, err)
			}
			cf := os.NewFile(uintptr(fd), cn)
			err = walk(cf, cn)
			if err == nil {
				err = x.applyDir(cf, cn, x.dirs[cn])
			}
			cf.Close()
			if err != nil {
				return err
			}
		}
		return nil
	}
	rf, err := x.root.OpenFile(".", os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return fmt.Errorf("opening the staging folder: %w", err)
	}
	defer rf.Close()
	if err := walk(rf, "."); err != nil {
		return err
	}
	if h := x.rootHdr; h != nil && x.applyRoot {
		return x.applyDir(rf, ".", &dirMeta{mode: fs.FileMode(h.Mode) & fs.ModePerm, uid: h.Uid, gid: h.Gid, mtime: h.ModTime, atime: h.AccessTime})
	}
	return nil
}

// applyDir sets the folder f's mode, owner (as root) and times from m.
func (x *extractor) applyDir(f *os.File, name string, m *dirMeta) error {
	if m.implicit {
		return wrapDir(name, f.Chmod(0o755))
	}
	if x.asRoot {
		if err := f.Chown(m.uid, m.gid); err != nil {
			return wrapDir(name, err)
		}
	}
	// Times first: "." relative to the folder's own handle is the folder,
	// which a process that is not root can no longer look up once the
	// folder's mode lacks x (0000, 0600).
	if err := unix.UtimesNanoAt(int(f.Fd()), ".", timespecs(m.mtime, m.atime), 0); err != nil {
		return wrapDir(name, err)
	}
	return wrapDir(name, f.Chmod(m.mode))
}

func wrapDir(name string, err error) error {
	if err != nil {
		return fmt.Errorf("setting mode, owner or times of folder %q: %w", name, err)
	}
	return nil
}
