//go:build !linux

package extract

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// syncFS flushes f's folder (no syncfs outside Linux).
func syncFS(f *os.File) error { return f.Sync() }

// renameNoReplace renames without replacing an existing name.
func renameNoReplace(fromDir int, from string, toDir int, to string) error {
	return renameNoReplaceFallback(fromDir, from, toDir, to)
}

// isMountPoint is only detected on Linux; elsewhere the device and
// writability checks decide.
func isMountPoint(string) bool { return false }

// timespecs is the utimensat argument for mtime and atime; a zero atime
// becomes mtime (UTIME_OMIT differs between systems).
func timespecs(mtime, atime time.Time) []unix.Timespec {
	if atime.IsZero() {
		atime = mtime
	}
	return []unix.Timespec{unix.NsecToTimespec(atime.UnixNano()), unix.NsecToTimespec(mtime.UnixNano())}
}

// inodeOf returns 0: markers are bound by inode on Linux only, so a marker
// is never bound elsewhere.
func inodeOf(os.FileInfo) uint64 { return 0 }
