//go:build linux

package extract

import (
	"bufio"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// syncFS flushes the filesystem holding f to disk (one syncfs call instead
// of an fsync per extracted file).
func syncFS(f *os.File) error { return unix.Syncfs(int(f.Fd())) }

// renameNoReplace renames without ever replacing an existing name.
func renameNoReplace(fromDir int, from string, toDir int, to string) error {
	err := unix.Renameat2(fromDir, from, toDir, to, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.ENOTSUP) {
		return renameNoReplaceFallback(fromDir, from, toDir, to)
	}
	if errors.Is(err, unix.EEXIST) {
		return &os.PathError{Op: "rename", Path: to, Err: os.ErrExist}
	}
	return err
}

// isMountPoint reports whether dir (absolute, symlinks resolved) is listed as
// a mount point in /proc/self/mountinfo.
func isMountPoint(dir string) bool {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && unescapeMountinfo(fields[4]) == dir {
			return true
		}
	}
	return false
}

// unescapeMountinfo decodes the octal escapes (\040 for a space, ...) of a
// mountinfo path field.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// timespecs is the utimensat argument for mtime and atime; a zero atime is
// left as it is.
func timespecs(mtime, atime time.Time) []unix.Timespec {
	ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(mtime.UnixNano())}
	if !atime.IsZero() {
		ts[0] = unix.NsecToTimespec(atime.UnixNano())
	}
	return ts
}

// inodeOf returns fi's inode number.
func inodeOf(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}
