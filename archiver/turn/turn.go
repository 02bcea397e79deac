// Package turn has a backup wait for its turn under a concurrency cap.
//
// A capped WorldBackup's Job is created before its turn, so that its pod
// starts (image, volumes, container) while earlier backups run; the
// provider's gate grants the turn by setting the pod's annotation
// jobapi.AnnotationTurn to jobapi.TurnGranted, and the kubelet writes the
// annotation's value into a file of a downward API volume (empty until
// then). File polls that file: it is a file named on the command line, so
// it must be a regular file and is read bounded.
package turn

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/worldbackup/worldbackup/jobapi"
)

// DefaultPoll is how often File looks at its file when Poll is 0.
const DefaultPoll = 100 * time.Millisecond

// maxBytes bounds what is read of the file: more than an annotation of
// ours holds.
const maxBytes = 256

// File is the turn granted through the file Path.
type File struct {
	Path string
	Poll time.Duration // 0: DefaultPoll
}

// Granted says whether the file grants the turn: true when it holds
// jobapi.TurnGranted, false when it is empty. Anything else (a missing or
// unreadable file, not a regular file, other content) is an error.
func (f File) Granted() (bool, error) {
	// O_NONBLOCK: a FIFO opens at once (and is refused below) rather than
	// waiting for a writer.
	fh, err := os.OpenFile(f.Path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return false, fmt.Errorf("reading the turn file: %w", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return false, fmt.Errorf("reading the turn file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return false, fmt.Errorf("the turn file %s is not a regular file (%s)", f.Path, st.Mode().Type())
	}
	b, err := io.ReadAll(io.LimitReader(fh, maxBytes+1))
	if err != nil {
		return false, fmt.Errorf("reading the turn file: %w", err)
	}
	switch v := bytes.TrimSpace(b); {
	case len(v) == 0:
		return false, nil
	case string(v) == jobapi.TurnGranted:
		return true, nil
	case len(b) > maxBytes:
		return false, fmt.Errorf("the turn file %s holds more than %d bytes: it is not the pod's %s annotation (an empty file or %q)",
			f.Path, maxBytes, jobapi.AnnotationTurn, jobapi.TurnGranted)
	default:
		return false, fmt.Errorf("the turn file %s holds %q, not the pod's %s annotation (an empty file or %q)",
			f.Path, v, jobapi.AnnotationTurn, jobapi.TurnGranted)
	}
}

// Wait returns nil once the file grants the turn, an error as soon as it
// cannot be read or holds anything else, or ctx's cause when ctx ends
// first.
func (f File) Wait(ctx context.Context) error {
	poll := f.Poll
	if poll <= 0 {
		poll = DefaultPoll
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		ok, err := f.Granted()
		if ok || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the run's turn: %w", context.Cause(ctx))
		case <-t.C:
		}
	}
}
