// Package regfile opens the files the archiver reads from places others
// can write (archives in a folder store, the files of mounted Secrets):
// regular files only (a symbolic link to one is followed), opened without
// blocking, so that a FIFO, a device or a folder at the path is refused at
// once instead of blocking the open forever (a FIFO without a writer) or
// giving endless bytes (/dev/zero). It is the one owner of that rule.
package regfile

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// ErrNotRegular is wrapped by Open's error for a path that is not a
// regular file.
var ErrNotRegular = errors.New("is not a regular file (a device, FIFO or folder)")

// Open opens the regular file path for reading. A missing file is the
// *fs.PathError of the open (errors.Is(err, fs.ErrNotExist) holds);
// anything else than a regular file is refused with an error wrapping
// ErrNotRegular and naming path.
func Open(path string) (*os.File, error) {
	// O_NONBLOCK: opening a FIFO must not wait for a writer. Reads of a
	// regular file do not heed it.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s %w", path, ErrNotRegular)
	}
	return f, nil
}
