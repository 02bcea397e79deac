package tarstream

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"

	"github.com/worldbackup/worldbackup/archiver/safelink"
)

// walker walks the world through directory file descriptors: every entry is
// opened relative to its parent with O_NOFOLLOW, so no symbolic link is ever
// followed, and a path swapped for a link mid-walk cannot lead outside the
// world.
type walker struct {
	root string
	tw   *tar.Writer
	// space, when set, returns where to read the next file data: the
	// free end of the buffer tw's destination fills (the compressor's
	// stage, or a Sink that is a Spacer), which keeps it without a copy.
	space func() []byte
	sink  Sink   // WriteTar's destination, told where each file's data is
	buf   []byte // the read buffer without space
	ex    matcher
	log   hclog.Logger
	prog  *Progress
	hook  func(rel string)
	avoid []string          // folders not to archive (Options.Avoid)
	links map[fileID]string // first archived name of each multiply-linked file
	// avoided are the folders of avoid that exist, by device and inode.
	avoided map[fileID]string
	res     Result
}

// fileID identifies a file for hard-link detection.
type fileID struct{ dev, ino uint64 }

// dirBatch is the number of directory entries read at a time, so a huge
// directory is never held in memory whole.
const dirBatch = 256

func (w *walker) full(rel string) string { return filepath.Join(w.root, filepath.FromSlash(rel)) }

func (w *walker) walkRoot(ctx context.Context) error {
	fd, err := openat(unix.AT_FDCWD, w.root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW)
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		var st unix.Stat_t
		if unix.Lstat(w.root, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return fmt.Errorf("opening world %q: it is a symbolic link, which is never followed; give the real folder", w.root)
		}
		return fmt.Errorf("opening world %q: not a folder", w.root)
	}
	if err != nil {
		return fmt.Errorf("opening world %q: %w", w.root, err)
	}
	w.avoided = make(map[fileID]string, len(w.avoid))
	for _, p := range w.avoid {
		var st unix.Stat_t
		if unix.Stat(p, &st) == nil {
			w.avoided[fileID{dev: uint64(st.Dev), ino: st.Ino}] = p
		}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return fmt.Errorf("reading world %q: %w", w.root, err)
	}
	if p, ok := w.avoided[fileID{dev: uint64(st.Dev), ino: st.Ino}]; ok {
		unix.Close(fd)
		return fmt.Errorf("%w: %q is %q (the same folder, maybe through a mount): the archive would hold itself", ErrSelfContaining, w.root, p)
	}
	return w.walkDir(ctx, fd, "")
}

// walkDir archives the entries of the directory open as fd (named rel, ""
// for the root) and closes fd.
func (w *walker) walkDir(ctx context.Context, fd int, rel string) error {
	d := os.NewFile(uintptr(fd), w.full(rel))
	defer d.Close()
	for {
		names, err := d.Readdirnames(dirBatch)
		for _, name := range names {
			if err := w.entry(ctx, fd, rel, name); err != nil {
				return err
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading folder %q: %w", w.full(rel), err)
		}
	}
}

// entry archives the entry name of the directory dirfd (named parent).
func (w *walker) entry(ctx context.Context, dirfd int, parent, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	rel := path.Join(parent, name)
	if parent == "" && strings.HasPrefix(name, reservedPrefix) {
		w.log.Debug("excluded: reserved for the restore", "path", rel)
		w.res.Excluded++
		return nil
	}
	var st unix.Stat_t
	if err := fstatat(dirfd, name, &st); err != nil {
		if w.ex.match(rel, true) != "" || w.ex.match(rel, false) != "" {
			return nil
		}
		if errors.Is(err, unix.ENOENT) {
			w.warn("file vanished during the walk; skipped", rel)
			return nil
		}
		return fmt.Errorf("reading %q: %w", w.full(rel), err)
	}
	typ := st.Mode & unix.S_IFMT
	if p := w.ex.match(rel, typ == unix.S_IFDIR); p != "" {
		w.log.Debug("excluded", "path", rel, "pattern", p)
		w.res.Excluded++
		return nil
	}
	switch typ {
	case unix.S_IFDIR:
		return w.dir(ctx, dirfd, name, rel)
	case unix.S_IFREG:
		return w.file(ctx, dirfd, name, rel, &st)
	case unix.S_IFLNK:
		return w.symlink(dirfd, name, rel, &st)
	default:
		w.log.Warn("special file skipped", "path", rel, "type", typeName(typ))
		w.res.Skipped++
		return nil
	}
}

func (w *walker) dir(ctx context.Context, dirfd int, name, rel string) error {
	fd, err := openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW)
	if err != nil {
		return w.openFailed(err, rel)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return fmt.Errorf("reading %q: %w", w.full(rel), err)
	}
	if p, ok := w.avoided[fileID{dev: uint64(st.Dev), ino: st.Ino}]; ok {
		unix.Close(fd)
		w.log.Warn("folder skipped: it is the archive folder (the same folder, maybe through a mount); the archive would hold itself",
			"path", rel, "archive_folder", p)
		w.res.Warnings++
		return nil
	}
	hdr := header(rel+"/", &st, tar.TypeDir)
	if err := w.tw.WriteHeader(hdr); err != nil {
		unix.Close(fd)
		return fmt.Errorf("writing header for %q: %w", rel, err)
	}
	w.res.Dirs++
	return w.walkDir(ctx, fd, rel)
}

func (w *walker) file(ctx context.Context, dirfd int, name, rel string, lst *unix.Stat_t) error {
	// A file the sink holds from an earlier run is not opened: its header
	// comes from the lstat, its data from the sink. Files with several
	// names are always opened (the first name decides the links).
	if w.sink != nil && lst.Nlink <= 1 {
		if f := sinkFile(rel, lst); w.sink.Reusable(f) {
			hdr := header(rel, lst, tar.TypeReg)
			hdr.Size = lst.Size
			if err := w.tw.WriteHeader(hdr); err != nil {
				return fmt.Errorf("writing header for %q: %w", rel, err)
			}
			if err := w.sink.BeginFile(f, true); err != nil {
				return err
			}
			if err := writeZeros(w.tw, lst.Size); err != nil {
				return fmt.Errorf("writing %q to the archive: %w", rel, err)
			}
			if err := w.sink.EndFile(true); err != nil {
				return err
			}
			w.res.Files++
			w.prog.Files.Add(1)
			return nil
		}
	}
	// O_NONBLOCK: should the file have been replaced by a fifo since the
	// stat, the open must not wait for a writer (the fstat below skips it).
	fd, err := openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return w.openFailed(err, rel)
	}
	// The raw fd, not an *os.File: that would cost two more system calls
	// per file (its poller registration) for nothing.
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("reading %q: %w", w.full(rel), err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		w.warn("file changed type during the walk; skipped", rel)
		return nil
	}
	if st.Nlink > 1 {
		id := fileID{dev: uint64(st.Dev), ino: st.Ino}
		if first, ok := w.links[id]; ok {
			hdr := header(rel, &st, tar.TypeLink)
			hdr.Linkname = first
			if err := w.tw.WriteHeader(hdr); err != nil {
				return fmt.Errorf("writing header for %q: %w", rel, err)
			}
			w.res.Files++
			w.prog.Files.Add(1)
			return nil
		}
		w.links[id] = rel
	}
	hdr := header(rel, &st, tar.TypeReg)
	hdr.Size = st.Size
	if err := w.tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("writing header for %q: %w", rel, err)
	}
	if w.hook != nil {
		w.hook(rel)
	}
	if w.sink != nil {
		if err := w.sink.BeginFile(sinkFile(rel, &st), false); err != nil {
			return err
		}
	}
	warned := w.res.Warnings
	if err := w.copyData(ctx, fd, rel, st.Size); err != nil {
		return err
	}
	if w.sink != nil {
		if err := w.sink.EndFile(w.res.Warnings == warned); err != nil {
			return err
		}
	}
	w.res.Files++
	w.prog.Files.Add(1)
	return nil
}

// copyData writes exactly size bytes of the file open as fd to the tar
// stream: a file that shrank is padded with zeros, one that grew is cut at
// size.
func (w *walker) copyData(ctx context.Context, fd int, rel string, size int64) error {
	var done int64
	// grew: data was found past size; probed: a read asked for a byte past
	// size, so no extra read is needed to find out.
	grew, probed := false, false
	for done < size {
		if err := ctx.Err(); err != nil {
			return err
		}
		rest := size - done
		// Read straight into the destination's buffer; tw passes the
		// data on to it unchanged, which then keeps it without a copy.
		b := w.buf
		if w.space != nil {
			b = w.space()
		}
		b = b[:min(int64(len(b)), int64(readBuffer), rest+1)]
		probed = int64(len(b)) > rest
		n, err := readFD(fd, b)
		if int64(n) > rest {
			n, grew = int(rest), true
		}
		if n > 0 {
			if _, werr := w.tw.Write(b[:n]); werr != nil {
				return fmt.Errorf("writing %q to the archive: %w", rel, werr)
			}
			done += int64(n)
			w.res.InputBytes += int64(n)
			w.prog.InputBytes.Add(int64(n))
		}
		if err != nil {
			return fmt.Errorf("reading %q: %w", w.full(rel), err)
		}
		if n == 0 {
			break // the end of the file, before size
		}
	}
	if done < size {
		w.log.Warn("file shrank while read; padded with zeros to its size at open",
			"path", rel, "size", size, "read", done)
		w.res.Warnings++
		zeros := make([]byte, 64<<10)
		for pad := size - done; pad > 0; {
			n := min(int64(len(zeros)), pad)
			if _, err := w.tw.Write(zeros[:n]); err != nil {
				return fmt.Errorf("writing %q to the archive: %w", rel, err)
			}
			pad -= n
		}
		return nil
	}
	if !probed {
		// Probe for data past the size the header promised.
		var one [1]byte
		n, _ := readFD(fd, one[:])
		grew = n > 0
	}
	if grew {
		w.log.Warn("file grew while read; stored with its size at open", "path", rel, "size", size)
		w.res.Warnings++
	}
	return nil
}

// sinkFile describes the regular file rel with metadata st to a Sink.
func sinkFile(rel string, st *unix.Stat_t) File {
	return File{
		Path:    rel,
		Size:    st.Size,
		MtimeNs: st.Mtim.Nano(),
		CtimeNs: st.Ctim.Nano(),
		Inode:   st.Ino,
	}
}

// readFD reads from fd into b, retrying when interrupted. It returns 0 and
// no error at the end of the file.
func readFD(fd int, b []byte) (int, error) {
	for {
		n, err := unix.Read(fd, b)
		if err == unix.EINTR {
			continue
		}
		return max(n, 0), err
	}
}

func (w *walker) symlink(dirfd int, name, rel string, st *unix.Stat_t) error {
	target, err := readlinkat(dirfd, name, st.Size)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			w.warn("file vanished during the walk; skipped", rel)
			return nil
		}
		if errors.Is(err, unix.EINVAL) {
			w.warn("file changed type during the walk; skipped", rel)
			return nil
		}
		return fmt.Errorf("reading link %q: %w", w.full(rel), err)
	}
	if err := safelink.Check(rel, target); err != nil {
		// Stored as it is (a backup keeps the world as it is), but the
		// user learns now that our restore will refuse the archive.
		w.log.Warn("symlink stored as a link, but `archiver restore` refuses archives with such links: remove it or exclude it",
			"path", rel, "target", target, "reason", err.Error())
		w.res.Warnings++
	}
	hdr := header(rel, st, tar.TypeSymlink)
	hdr.Linkname = target
	if err := w.tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("writing header for %q: %w", rel, err)
	}
	w.res.Files++
	w.prog.Files.Add(1)
	return nil
}

// openFailed turns a failed open of rel into a warning (vanished or changed
// into something else since the stat) or an error naming the path.
func (w *walker) openFailed(err error, rel string) error {
	switch {
	case errors.Is(err, unix.ENOENT):
		w.warn("file vanished during the walk; skipped", rel)
		return nil
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
		w.warn("file changed type during the walk; skipped", rel)
		return nil
	default:
		return fmt.Errorf("opening %q: %w", w.full(rel), err)
	}
}

func (w *walker) warn(msg, rel string) {
	w.log.Warn(msg, "path", rel)
	w.res.Warnings++
}

// header returns the tar header of the entry named name with the metadata
// in st. Times are kept to the second, so most headers stay plain USTAR.
func header(name string, st *unix.Stat_t, typ byte) *tar.Header {
	return &tar.Header{
		Typeflag: typ,
		Name:     name,
		Mode:     int64(st.Mode & 0o7777),
		Uid:      int(st.Uid),
		Gid:      int(st.Gid),
		ModTime:  time.Unix(st.Mtim.Sec, 0),
	}
}

func typeName(typ uint32) string {
	switch typ {
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	default:
		return fmt.Sprintf("mode %#o", typ)
	}
}

// openat opens name relative to dirfd, retrying when interrupted.
func openat(dirfd int, name string, flags int) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flags|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

func fstatat(dirfd int, name string, st *unix.Stat_t) error {
	for {
		err := unix.Fstatat(dirfd, name, st, unix.AT_SYMLINK_NOFOLLOW)
		if err != unix.EINTR {
			return err
		}
	}
}

// readlinkat reads the target of the link name in dirfd; size is the
// length lstat reported, a hint.
func readlinkat(dirfd int, name string, size int64) (string, error) {
	n := max(int(size)+1, 128)
	for {
		buf := make([]byte, n)
		got, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return "", err
		}
		if got < n {
			return string(buf[:got]), nil
		}
		if n >= 1<<16 {
			return "", fmt.Errorf("link target longer than %d bytes", n)
		}
		n *= 2
	}
}
