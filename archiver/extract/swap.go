package extract

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"
)

// Journal phases; see the package comment.
const (
	phaseStash   = "stash"
	phaseInstall = "install"
)

type journal struct {
	Phase   string `json:"phase"`
	Staging string `json:"staging"`
	SHA256  string `json:"sha256"`
}

// target is the folder being restored and the folder its staging, previous
// and journal names live in (base): DIR itself (inside) or its parent
// (beside). Every name below is one path component relative to base.
type target struct {
	dir      string // absolute, symlinks resolved
	layout   Layout
	base     *os.Root
	baseDir  *os.File // handle on base: *at calls, flock, fsync
	world    string   // beside: DIR's name in its parent; inside: ""
	staging  string   // prefix of staging folder names
	previous string
	journal  string
	log      hclog.Logger
}

// staging is one staging folder, open as a root.
type staging struct {
	name      string
	root      *os.Root
	rootMeta  bool // the archive had an entry for its root (./)
	applyRoot bool // the staging root becomes DIR (beside), so the ./ entry applies to it
}

// openTarget resolves into, picks the layout, opens base and locks it.
func openTarget(into string, layout Layout, log hclog.Logger) (*target, error) {
	abs, err := filepath.Abs(into)
	if err != nil {
		return nil, fmt.Errorf("resolving %s: %w", into, err)
	}
	exists := false
	if _, err := os.Lstat(abs); err == nil {
		if abs, err = filepath.EvalSymlinks(abs); err != nil {
			return nil, fmt.Errorf("resolving %s: %w", into, err)
		}
		fi, err := os.Stat(abs)
		if err != nil {
			return nil, fmt.Errorf("checking %s: %w", abs, err)
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("%s is not a folder", abs)
		}
		exists = true
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("checking %s: %w", abs, err)
	}
	if abs == "/" {
		return nil, errors.New("refusing to restore into /")
	}
	parent := filepath.Dir(abs)
	if layout == LayoutAuto {
		layout = LayoutBeside
		if exists {
			inside, why := needsInside(abs, parent)
			if inside {
				layout = LayoutInside
				log.Debug("staging inside the target folder", "reason", why)
			}
		}
	}
	t := &target{dir: abs, layout: layout, log: log}
	baseDir := parent
	if layout == LayoutInside {
		if !exists {
			if err := os.Mkdir(abs, 0o755); err != nil {
				return nil, fmt.Errorf("creating %s: %w", abs, err)
			}
		}
		baseDir = abs
		t.staging, t.previous, t.journal = reservedPrefix+"staging-", reservedPrefix+"previous", reservedPrefix+"swap"
	} else {
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return nil, fmt.Errorf("creating %s: %w", parent, err)
		}
		t.world = filepath.Base(abs)
		t.staging = "." + t.world + ".worldbackup-staging-"
		t.previous = t.world + ".previous"
		t.journal = "." + t.world + ".worldbackup-swap"
	}
	if t.base, err = os.OpenRoot(baseDir); err != nil {
		return nil, fmt.Errorf("opening %s: %w", baseDir, err)
	}
	if t.baseDir, err = t.base.OpenFile(".", os.O_RDONLY|syscall.O_DIRECTORY, 0); err != nil {
		t.base.Close()
		return nil, fmt.Errorf("opening %s: %w", baseDir, err)
	}
	if err := unix.Flock(int(t.baseDir.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("another restore into %s is running (lock on %s)", abs, baseDir)
		}
		return nil, fmt.Errorf("locking %s: %w", baseDir, err)
	}
	return t, nil
}

// needsInside reports whether DIR cannot be renamed in its parent.
func needsInside(dir, parent string) (bool, string) {
	if isMountPoint(dir) {
		return true, "mount point"
	}
	var a, b unix.Stat_t
	if unix.Stat(dir, &a) == nil && unix.Stat(parent, &b) == nil && a.Dev != b.Dev {
		return true, "parent on another device"
	}
	if err := unix.Access(parent, unix.W_OK); err != nil {
		return true, "parent not writable: " + err.Error()
	}
	return false, ""
}

func (t *target) close() {
	if t.baseDir != nil {
		t.baseDir.Close() // releases the flock
	}
	if t.base != nil {
		t.base.Close()
	}
}

func (t *target) exists(name string) (bool, error) {
	_, err := t.base.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// listDir returns the names in the folder name of base ("." for base).
func (t *target) listDir(name string) ([]string, error) {
	f, err := t.base.OpenFile(name, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// empty reports whether DIR has no contents (a volume's lost+found aside).
func (t *target) empty() (bool, error) {
	if t.layout == LayoutBeside {
		ok, err := t.exists(t.world)
		if err != nil || !ok {
			return true, err
		}
		names, err := t.listDir(t.world)
		return len(names) == 0, err
	}
	names, err := t.listDir(".")
	if err != nil {
		return false, fmt.Errorf("listing %s: %w", t.dir, err)
	}
	for _, n := range names {
		if n != lostFound {
			return false, nil
		}
	}
	return true, nil
}

func randomSuffix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (t *target) newStaging() (*staging, error) {
	name := t.staging + randomSuffix()
	if err := t.base.Mkdir(name, 0o700); err != nil {
		return nil, fmt.Errorf("creating staging folder %s: %w", filepath.Join(t.base.Name(), name), err)
	}
	r, err := t.base.OpenRoot(name)
	if err != nil {
		_ = t.base.RemoveAll(name)
		return nil, fmt.Errorf("opening staging folder %s: %w", filepath.Join(t.base.Name(), name), err)
	}
	return &staging{name: name, root: r, applyRoot: t.layout == LayoutBeside}, nil
}

func (t *target) dropStaging(st *staging) error {
	st.root.Close()
	return t.removeTree(st.name)
}

func (t *target) readJournal() (*journal, error) {
	b, err := t.base.ReadFile(t.journal)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading restore journal %s: %w", t.path(t.journal), err)
	}
	var j journal
	if err := json.Unmarshal(b, &j); err != nil || (j.Phase != phaseStash && j.Phase != phaseInstall) ||
		!strings.HasPrefix(j.Staging, t.staging) || strings.Contains(j.Staging, "/") {
		return nil, fmt.Errorf("restore journal %s is not valid (%q): check %s and %s by hand, then remove the journal",
			t.path(t.journal), b, t.dir, t.path(t.previous))
	}
	return &j, nil
}

// writeJournal replaces the journal atomically and durably.
func (t *target) writeJournal(j journal) error {
	b, _ := json.Marshal(j)
	tmp := t.journal + ".tmp"
	f, err := t.base.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if err == nil {
		_, err = f.Write(b)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = unix.Renameat(int(t.baseDir.Fd()), tmp, int(t.baseDir.Fd()), t.journal)
	}
	if err == nil {
		err = t.baseDir.Sync()
	}
	if err != nil {
		return fmt.Errorf("writing restore journal %s: %w", t.path(t.journal), err)
	}
	return nil
}

func (t *target) removeJournal() error {
	if err := t.base.Remove(t.journal); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing restore journal: %w", err)
	}
	return t.baseDir.Sync()
}

// markerName is the marker's name relative to base.
func (t *target) markerName() string {
	if t.layout == LayoutBeside {
		return t.world + "/" + MarkerName
	}
	return MarkerName
}

func (t *target) markerPath() string { return t.path(t.markerName()) }

// readMarker reads DIR's restore marker; ok is false when it has none or
// it is not valid, bound whether it is the file whose inode it records (see
// MarkerName).
func (t *target) readMarker() (m marker, bound, ok bool) {
	name := t.markerName()
	lfi, err := t.base.Lstat(name)
	if err != nil {
		return marker{}, false, false
	}
	if !lfi.Mode().IsRegular() {
		t.log.Warn("ignoring a restore marker that is not a regular file", "path", t.path(name))
		return marker{}, false, false
	}
	f, err := t.base.Open(name)
	if err != nil {
		return marker{}, false, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return marker{}, false, false
	}
	b, err := io.ReadAll(io.LimitReader(f, maxMarker+1))
	if err != nil || len(b) > maxMarker || json.Unmarshal(b, &m) != nil {
		t.log.Warn("ignoring a restore marker that is not valid JSON", "path", t.path(name), "max_bytes", maxMarker)
		return marker{}, false, false
	}
	ino := inodeOf(fi)
	bound = m.Inode != 0 && ino == m.Inode && inodeOf(lfi) == ino
	return m, bound, true
}

func (t *target) path(name string) string { return filepath.Join(t.base.Name(), name) }

// recover finishes or undoes a swap interrupted by a crash, and removes
// staging folders left by an interrupted extraction.
func (t *target) recover() error {
	j, err := t.readJournal()
	if err != nil {
		return err
	}
	if j == nil {
		prev, err := t.exists(t.previous)
		if err != nil {
			return fmt.Errorf("checking %s: %w", t.path(t.previous), err)
		}
		if prev {
			return fmt.Errorf("%s exists but there is no restore journal, so it is not a restore's leftover: "+
				"move it away (it may hold an older world), then rerun", t.path(t.previous))
		}
	} else {
		t.log.Warn("found the journal of an interrupted restore", "phase", j.Phase, "staging", j.Staging)
		switch j.Phase {
		case phaseStash:
			err = t.undoStash(j.Staging)
		case phaseInstall:
			err = t.install(j.Staging)
			if err == nil {
				_, err = t.cleanup()
			}
		}
		if err != nil {
			return &stateError{state: fmt.Sprintf("incomplete: a restore interrupted in phase %q could not be recovered; see the error (journal %s)", j.Phase, t.path(t.journal)),
				err: fmt.Errorf("recovering the restore interrupted in phase %q (journal %s): %w", j.Phase, t.path(t.journal), err)}
		}
		t.log.Warn("recovered the interrupted restore", "phase", j.Phase,
			"state", map[string]string{phaseStash: "old world put back", phaseInstall: "new world moved in"}[j.Phase])
	}
	// Leftovers of interrupted extractions and journal writes.
	names, err := t.listDir(".")
	if err != nil {
		return fmt.Errorf("listing %s: %w", t.base.Name(), err)
	}
	for _, n := range names {
		if strings.HasPrefix(n, t.staging) || n == t.journal+".tmp" {
			t.log.Warn("removing leftover of an interrupted restore", "path", t.path(n))
			if err := t.removeTree(n); err != nil {
				return fmt.Errorf("removing leftover %s: %w", t.path(n), err)
			}
		}
	}
	return nil
}

// swap moves the fully extracted staging folder into place; see the
// package comment for the phases. leftAt is where the old world was left
// when it could not be removed ("" when it was).
func (t *target) swap(st *staging, sha string) (leftAt string, err error) {
	defer st.root.Close()
	sf, err := st.root.OpenFile(".", os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return "", fmt.Errorf("opening staging folder: %w", err)
	}
	defer sf.Close()
	if t.layout == LayoutBeside && !st.rootMeta {
		// The archive did not say what the root looks like: keep DIR's mode
		// and owner, or use 0755 for a new DIR.
		mode, uid, gid := fs.FileMode(0o755), -1, -1
		if fi, err := t.base.Stat(t.world); err == nil {
			mode = fi.Mode().Perm()
			if s, ok := fi.Sys().(*syscall.Stat_t); ok && os.Geteuid() == 0 {
				uid, gid = int(s.Uid), int(s.Gid)
			}
		}
		if uid >= 0 {
			if err := sf.Chown(uid, gid); err != nil {
				return "", fmt.Errorf("setting owner of the staging folder: %w", err)
			}
		}
		if err := sf.Chmod(mode); err != nil {
			return "", fmt.Errorf("setting mode of the staging folder: %w", err)
		}
	}
	if err := syncFS(sf); err != nil {
		return "", fmt.Errorf("syncing the extracted world: %w", err)
	}
	if ok, err := t.exists(t.previous); err != nil || ok {
		return "", fmt.Errorf("%s appeared during the restore; nothing was swapped (err %v)", t.path(t.previous), err)
	}

	if err := t.writeJournal(journal{Phase: phaseStash, Staging: st.name, SHA256: sha}); err != nil {
		return "", err
	}
	if err := t.stash(st.name); err != nil {
		if uerr := t.undoStash(st.name); uerr != nil {
			return "", &stateError{state: fmt.Sprintf("incomplete: the old world is partly moved aside to %s; rerun to put it back (journal %s)", t.path(t.previous), t.path(t.journal)),
				err: fmt.Errorf("moving the old world aside: %w; undoing that also failed: %v", err, uerr)}
		}
		return "", fmt.Errorf("moving the old world aside: %w", err)
	}
	if err := t.writeJournal(journal{Phase: phaseInstall, Staging: st.name, SHA256: sha}); err != nil {
		return "", &stateError{state: fmt.Sprintf("incomplete: the old world is moved aside to %s; rerun to put it back (journal %s)", t.path(t.previous), t.path(t.journal)), err: err}
	}
	if err := t.install(st.name); err != nil {
		return "", &stateError{state: fmt.Sprintf("incomplete: the new world is partly moved in; rerun to finish (journal %s)", t.path(t.journal)),
			err: fmt.Errorf("moving the new world in: %w", err)}
	}
	leftAt, err = t.cleanup()
	if err != nil {
		return "", &stateError{state: fmt.Sprintf("replaced; the old world is still at %s (journal %s): rerun to remove it", t.path(t.previous), t.path(t.journal)),
			err: fmt.Errorf("removing the old world: %w", err)}
	}
	return leftAt, nil
}

// stash moves the old world to previous.
func (t *target) stash(stagingName string) error {
	fd := int(t.baseDir.Fd())
	if t.layout == LayoutBeside {
		ok, err := t.exists(t.world)
		if err != nil || !ok {
			return err
		}
		if err := renameNoReplace(fd, t.world, fd, t.previous); err != nil {
			return err
		}
		return t.baseDir.Sync()
	}
	names, err := t.listDir(".")
	if err != nil {
		return err
	}
	if err := t.base.Mkdir(t.previous, 0o700); err != nil {
		return err
	}
	pf, err := t.base.OpenFile(t.previous, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer pf.Close()
	for _, n := range names {
		if n == stagingName || n == t.previous || n == t.journal || n == lostFound {
			continue
		}
		if err := renameNoReplace(fd, n, int(pf.Fd()), n); err != nil {
			return err
		}
	}
	if err := pf.Sync(); err != nil {
		return err
	}
	return t.baseDir.Sync()
}

// undoStash puts the old world back and drops the staging folder.
func (t *target) undoStash(stagingName string) error {
	fd := int(t.baseDir.Fd())
	prev, err := t.exists(t.previous)
	if err != nil {
		return err
	}
	if prev {
		if t.layout == LayoutBeside {
			if err := renameNoReplace(fd, t.previous, fd, t.world); err != nil {
				return fmt.Errorf("putting %s back: %w", t.path(t.previous), err)
			}
		} else {
			pf, err := t.base.OpenFile(t.previous, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
			if err != nil {
				return err
			}
			names, err := pf.Readdirnames(-1)
			if err == nil {
				for _, n := range names {
					if err = renameNoReplace(int(pf.Fd()), n, fd, n); err != nil {
						err = fmt.Errorf("putting %s back: %w", n, err)
						break
					}
				}
			}
			pf.Close()
			if err != nil {
				return err
			}
			if err := t.base.Remove(t.previous); err != nil {
				return err
			}
		}
		if err := t.baseDir.Sync(); err != nil {
			return err
		}
	}
	if err := t.removeTree(stagingName); err != nil {
		return err
	}
	return t.removeJournal()
}

// install moves the staged world (what is left of it) into place. It is
// idempotent, so recovery reuses it.
func (t *target) install(stagingName string) error {
	fd := int(t.baseDir.Fd())
	ok, err := t.exists(stagingName)
	if err != nil || !ok {
		return err // already moved in
	}
	if t.layout == LayoutBeside {
		if err := renameNoReplace(fd, stagingName, fd, t.world); err != nil {
			return err
		}
		return t.baseDir.Sync()
	}
	sf, err := t.base.OpenFile(stagingName, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	names, err := sf.Readdirnames(-1)
	if err == nil {
		for _, n := range names {
			if n == lostFound {
				if ok, _ := t.exists(lostFound); ok {
					t.log.Info("keeping the volume's lost+found, dropping the archive's")
					continue
				}
			}
			if err = renameNoReplace(int(sf.Fd()), n, fd, n); err != nil {
				break
			}
		}
	}
	sf.Close()
	if err != nil {
		return err
	}
	if err := t.baseDir.Sync(); err != nil {
		return err
	}
	return t.removeTree(stagingName)
}

// cleanup removes the old world and the journal. An old world that cannot
// be removed (files of another owner, say) is renamed aside to a unique name
// and its path returned: the restore is done, and no later restore trips over
// it.
func (t *target) cleanup() (leftAt string, err error) {
	if err := t.removeTree(t.previous); err != nil {
		aside := t.previous + "-" + randomSuffix()
		fd := int(t.baseDir.Fd())
		if rerr := renameNoReplace(fd, t.previous, fd, aside); rerr != nil {
			return "", fmt.Errorf("%w; moving it aside also failed: %v", err, rerr)
		}
		leftAt = t.path(aside)
		t.log.Warn("could not remove the old world; left it aside: remove it by hand", "path", leftAt, "error", err)
	}
	return leftAt, t.removeJournal()
}

// removeTree removes name (a path relative to base) and everything below.
// When that fails, it gives every folder below that the process owns u+rwx
// (an archive may restore folders as 0555 or 0000, which their owner cannot
// empty) and tries again.
func (t *target) removeTree(name string) error {
	err := t.base.RemoveAll(name)
	if err == nil {
		return nil
	}
	if werr := makeRemovable(t.baseDir, name, os.Geteuid()); werr != nil {
		t.log.Debug("making a folder removable", "path", t.path(name), "error", werr)
	}
	return t.base.RemoveAll(name)
}

// makeRemovable gives the folder name of parent, and every folder below
// it, owned by uid u+rwx. Folders of other owners are left as they are; it
// returns the first error and goes on.
func makeRemovable(parent *os.File, name string, uid int) error {
	var st unix.Stat_t
	if err := unix.Fstatat(int(parent.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil
	}
	var first error
	if st.Uid == uint32(uid) && st.Mode&0o700 != 0o700 {
		// name is a folder (just checked; the restore's lock keeps others out).
		first = unix.Fchmodat(int(parent.Fd()), name, (st.Mode|0o700)&0o7777, 0)
	}
	fd, err := unix.Openat(int(parent.Fd()), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return errors.Join(first, err)
	}
	d := os.NewFile(uintptr(fd), name)
	defer d.Close()
	for {
		ents, err := d.ReadDir(256)
		for _, e := range ents {
			if e.IsDir() {
				if err := makeRemovable(d, e.Name(), uid); err != nil && first == nil {
					first = err
				}
			}
		}
		if err != nil {
			if err != io.EOF && first == nil {
				first = err
			}
			return first
		}
	}
}

// renameNoReplaceFallback renames without RENAME_NOREPLACE, checking first
// (for filesystems such as NFS that lack it; the flock keeps other restores
// out, so the check cannot race with one).
func renameNoReplaceFallback(fromDir int, from string, toDir int, to string) error {
	var st unix.Stat_t
	err := unix.Fstatat(toDir, to, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err == nil {
		return &fs.PathError{Op: "rename", Path: to, Err: fs.ErrExist}
	}
	if !errors.Is(err, unix.ENOENT) {
		return err
	}
	return unix.Renameat(fromDir, from, toDir, to)
}
