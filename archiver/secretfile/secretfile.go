// Package secretfile reads the files of a mounted Secret (a key, a
// password, a webhook URL, felis.toml): regular files only (a symbolic
// link to one, as Kubernetes mounts them; opened by regfile, without
// blocking) read up to a bound, so that a FIFO, /dev/zero or a huge file
// cannot make the archiver wait or read forever. It is the one owner of
// that bound.
package secretfile

import (
	"errors"
	"fmt"
	"io"

	"github.com/worldbackup/worldbackup/archiver/regfile"
)

// ErrNotRegular and ErrTooLarge are Read's errors for a file that cannot be
// a Secret's key; the errors Read returns wrap them and name the file.
var (
	ErrNotRegular = errors.New("is not a regular file (a device, FIFO or folder): mount the Secret's key there")
	ErrTooLarge   = errors.New("is it the right file?")
)

// Read returns the content of the regular file path, at most max bytes.
// Its errors name the file, never its content: a missing file is the
// *fs.PathError of the open (errors.Is(err, fs.ErrNotExist) holds).
func Read(path string, max int64) ([]byte, error) {
	f, err := regfile.Open(path)
	if errors.Is(err, regfile.ErrNotRegular) {
		return nil, fmt.Errorf("%s %w", path, ErrNotRegular)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		clear(b)
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if int64(len(b)) > max {
		clear(b)
		return nil, fmt.Errorf("%s is larger than %d bytes: %w", path, max, ErrTooLarge)
	}
	return b, nil
}
