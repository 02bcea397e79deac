//go:build !linux

package store

import "errors"

// directFS: O_DIRECT is only used on Linux, where the archiver runs.
func directFS(magic int64) bool { return false }

// setDirect turns O_DIRECT on or off: only off is supported here.
func setDirect(f fder, on bool) error {
	if on {
		return errors.ErrUnsupported
	}
	return nil
}
