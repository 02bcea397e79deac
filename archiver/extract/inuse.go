package extract

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrInUse is returned by WorldInUse when a running game server holds a
// world's session.lock.
var ErrInUse = errors.New("the world is in use by a running server")

// WorldInUse reports, as an error wrapping ErrInUse, whether a process holds
// a lock on session.lock in dir or in one of its folders (a server folder
// holds world/, world_nether/, ... each with its own session.lock, which a
// running Minecraft server keeps locked). A missing dir is not in use.
// Locks of other machines sharing the volume are not visible.
func WorldInUse(dir string) error {
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
