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

// WalkPage is the most objects Walk hands over at once.
const WalkPage = 1000

// walkKey reports whether rel, a slash path below a walked folder, names a
// committed object: no element starts with '.' (temp and lock files, and
// what is below a folder named so).
func walkKey(rel string) bool {
	for e := range strings.SplitSeq(rel, "/") {
		if e == "" || strings.HasPrefix(e, ".") {
			return false
		}
	}
	return true
}

// Walk calls fn with the committed archives below the folder dir, at any
// depth, in pages of at most WalkPage, each page sorted by key (temp and
// lock files are left out). It reads one folder at a time, so its memory
// is one page and the largest folder's names, however many objects there
// are. A missing folder walks nothing; an error from fn stops the walk and
// is returned.
func (l *Local) Walk(ctx context.Context, dir string, fn func([]Object) error) error {
	if err := checkKey(dir); err != nil {
		return err
	}
	base := filepath.Join(l.root, filepath.FromSlash(dir))
	page := make([]Object, 0, WalkPage)
	flush := func() error {
		if len(page) == 0 {
			return nil
		}
		err := fn(page)
		page = page[:0]
		return err
	}
	err := filepath.WalkDir(base, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if p == base && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed since its folder was read
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if p == base {
			return nil
		}
		if strings.HasPrefix(e.Name(), ".") {
			if e.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if !e.Type().IsRegular() {
			return nil
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(base, p)
		if err != nil {
			return err
		}
		page = append(page, Object{Key: path.Join(dir, filepath.ToSlash(rel)), Size: info.Size(), ModTime: info.ModTime()})
		if len(page) == WalkPage {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return fmt.Errorf("walking archives below %q: %w", dir, err)
	}
	return nil
}

// Walk calls fn with the archives below dir, at any depth, in pages of at
// most WalkPage sorted by key.
func (m *Mem) Walk(ctx context.Context, dir string, fn func([]Object) error) error {
	if err := checkKey(dir); err != nil {
		return err
	}
	m.mu.Lock()
	var all []Object
	for key, b := range m.objs {
		if rel, ok := strings.CutPrefix(key, dir+"/"); ok && walkKey(rel) {
			all = append(all, Object{Key: key, Size: int64(len(b)), ModTime: m.times[key]})
		}
	}
	m.mu.Unlock()
	sort.Slice(all, func(i, j int) bool { return all[i].Key < all[j].Key })
	for len(all) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(len(all), WalkPage)
		if err := fn(all[:n]); err != nil {
			return err
		}
		all = all[n:]
	}
	return nil
}
