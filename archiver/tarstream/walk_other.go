//go:build !linux

package tarstream

import (
	"archive/tar"
	"context"
	"errors"

	"github.com/hashicorp/go-hclog"
)

// walker is only implemented on Linux, where the archiver runs.
type walker struct {
	root  string
	tw    *tar.Writer
	in    *stage
	sink  Sink
	buf   []byte
	ex    matcher
	log   hclog.Logger
	prog  *Progress
	hook  func(rel string)
	avoid []string // folders not to archive (Options.Avoid)
	links map[fileID]string
	res   Result
}

type fileID struct{ dev, ino uint64 }

func (w *walker) walkRoot(ctx context.Context) error {
	return errors.New("tarstream: only Linux is supported")
}
