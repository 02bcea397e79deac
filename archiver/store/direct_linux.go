//go:build linux

package store

import "golang.org/x/sys/unix"

// directFS reports whether archiveWriter uses O_DIRECT on the file system
// of statfs type magic: ext4 and XFS, known to mix direct and buffered
// writes to one file correctly.
func directFS(magic int64) bool {
	switch magic {
	case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC:
		return true
	default:
		return false
	}
}

// setDirect turns O_DIRECT on or off for f; on is refused on other file
// systems than directFS.
func setDirect(f fder, on bool) error {
	fd := int(f.Fd())
	if on {
		var st unix.Statfs_t
		if err := unix.Fstatfs(fd, &st); err != nil {
			return err
		}
		if !directFS(int64(st.Type)) {
			return unix.EOPNOTSUPP
		}
	}
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		return err
	}
	if on {
		flags |= unix.O_DIRECT
	} else {
		flags &^= unix.O_DIRECT
	}
	_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, flags)
	return err
}
