package extract

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// ErrInUse is returned by WorldInUse when a running game server holds a
// world's session.lock.
var ErrInUse = errors.New("the world is in use by a running server")

// ErrNotFolder is returned by WorldInUse for a dir that exists but is not a
// folder: a regular file, or a symlink loop. No retry can help.
var ErrNotFolder = errors.New("not a folder")

// WorldInUse reports, as an error wrapping ErrInUse, whether a process holds
// a lock on session.lock in dir or in one of its folders (a server folder
// holds world/, world_nether/, ... each with its own session.lock, which a
// running Minecraft server keeps locked). A missing dir is not in use.
// Locks of other machines sharing the volume are not visible. A dir that is
// not a folder gives an error wrapping ErrNotFolder.
func WorldInUse(dir string) error {
	if err := CheckFolder(dir); err != nil {
		return err
	}
	candidates := []string{filepath.Join(dir, "session.lock")}
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("looking for session.lock files in %q: %w", dir, err)
	}
	for _, e := range entries {
		if e.IsDir() {
			candidates = append(candidates, filepath.Join(dir, e.Name(), "session.lock"))
		}
	}
	for _, p := range candidates {
		held, err := lockHeld(p)
		if err != nil {
			return fmt.Errorf("checking %q: %w", p, err)
		}
		if held {
			return fmt.Errorf("%w: %s is locked; stop the game server (scale its StatefulSet to 0) before restoring", ErrInUse, p)
		}
	}
	return nil
}

// CheckFolder returns an error wrapping ErrNotFolder when dir exists but
// is not a folder (a regular file, a symlink loop): no restore into it can
// work. A missing dir, or one that cannot be looked at, gives nil.
func CheckFolder(dir string) error {
	switch fi, err := os.Stat(dir); {
	case errors.Is(err, syscall.ELOOP):
		return fmt.Errorf("%q is %w: its symbolic links form a loop", dir, ErrNotFolder)
	case err == nil && !fi.IsDir():
		return fmt.Errorf("%q is %w: it is a %s", dir, ErrNotFolder, kind(fi.Mode()))
	}
	return nil
}

// kind names the type of a file that is not a folder.
func kind(m os.FileMode) string {
	switch {
	case m.IsRegular():
		return "regular file"
	case m&os.ModeDevice != 0:
		return "device"
	case m&os.ModeNamedPipe != 0:
		return "named pipe"
	case m&os.ModeSocket != 0:
		return "socket"
	}
	return "file of mode " + m.String()
}
