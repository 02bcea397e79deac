package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Object is an archive found by List.
type Object struct {
	Key     string // e.g. "survival/run-42.tar.zst"
	Size    int64
	ModTime time.Time // when the archive was committed
}

// List returns the committed archives directly inside the folder dir (a
// key prefix such as "survival"), sorted by key; temp and lock files (names
// starting with '.') and subfolders are not listed. A missing folder lists
// nothing.
func (l *Local) List(ctx context.Context, dir string) ([]Object, error) {
	if err := checkKey(dir); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(filepath.Join(l.root, filepath.FromSlash(dir)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing archives in %q: %w", dir, err)
	}
	var out []Object
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if strings.HasPrefix(e.Name(), ".") || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since ReadDir
		}
		if err != nil {
			return nil, fmt.Errorf("listing archives in %q: %w", dir, err)
		}
		out = append(out, Object{Key: path.Join(dir, e.Name()), Size: info.Size(), ModTime: info.ModTime()})
	}
	return out, nil // os.ReadDir sorts by name
}

// List returns the archives directly below dir, sorted by key.
func (m *Mem) List(ctx context.Context, dir string) ([]Object, error) {
	if err := checkKey(dir); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Object
	for key, b := range m.objs {
		if path.Dir(key) == dir {
			out = append(out, Object{Key: key, Size: int64(len(b)), ModTime: m.times[key]})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}
