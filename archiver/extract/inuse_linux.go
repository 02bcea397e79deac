package extract

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// lockHeld reports whether another process holds a POSIX record lock (what
// Java's FileChannel.lock takes on Linux) or an flock on the file at p. It
// only tests: it takes no lock that outlives the call and changes nothing.
func lockHeld(p string) (bool, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ELOOP) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return false, err
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 0}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &lk); err != nil {
		return false, err
	}
	if lk.Type != unix.F_UNLCK {
		return true, nil
	}
	switch err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); {
	case errors.Is(err, unix.EWOULDBLOCK):
		return true, nil
	case err != nil:
		return false, err
	}
	return false, unix.Flock(int(f.Fd()), unix.LOCK_UN)
}
