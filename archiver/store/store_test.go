package store

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/worldbackup/worldbackup/archiver/regfile"
)

// listAll returns every name below root, relative, sorted.
func listAll(t *testing.T, root string) []string {
	t.Helper()
	var names []string
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(root, p)
			names = append(names, rel)
		}
		return nil
	})
	sort.Strings(names)
	return names
}

// faultFS injects failures into the real file system.
type faultFS struct {
	osFS
	writeErr   error
	writeAfter int // bytes accepted before writeErr
	syncErr    error
	closeErr   error
	renameErr  error
	syncDirErr error
	// datasyncErr fails the background syncs of the file being written.
	datasyncErr error
	datasyncs   atomic.Int32 // background syncs made
	// synced are the folders synced (SyncDir), in order.
	synced []string
}

type faultFile struct {
	*os.File
	fs      *faultFS
	written int
}

func (f *faultFile) Write(p []byte) (int, error) {
	if f.fs.writeErr != nil && f.written+len(p) > f.fs.writeAfter {
		n := max(f.fs.writeAfter-f.written, 0)
		n, _ = f.File.Write(p[:n])
		f.written += n
		return n, f.fs.writeErr
	}
	n, err := f.File.Write(p)
	f.written += n
	return n, err
}

func (f *faultFile) Sync() error {
	if f.fs.syncErr != nil {
		return f.fs.syncErr
	}
	return f.File.Sync()
}

// Datasync is what Put's write-behind calls, on a goroutine of its own,
// while the file is written.
func (f *faultFile) Datasync() error {
	f.fs.datasyncs.Add(1)
	if f.fs.datasyncErr != nil {
		return f.fs.datasyncErr
	}
	return unix.Fdatasync(int(f.File.Fd()))
}

func (f *faultFile) Close() error {
	err := f.File.Close()
	if f.fs.closeErr != nil {
		return f.fs.closeErr
	}
	return err
}

func (fs *faultFS) CreateTemp(dir, prefix string) (file, error) {
	f, err := fs.osFS.CreateTemp(dir, prefix)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: f.(*os.File), fs: fs}, nil
}

func (fs *faultFS) Rename(o, n string) error {
	if fs.renameErr != nil {
		return fs.renameErr
	}
	return fs.osFS.Rename(o, n)
}

func (fs *faultFS) SyncDir(dir string) error {
	fs.synced = append(fs.synced, dir)
	if fs.syncDirErr != nil {
		return fs.syncDirErr
	}
	return fs.osFS.SyncDir(dir)
}

func TestLocalPutFailures(t *testing.T) {
	tests := []struct {
		name string
		fs   *faultFS
		want error
	}{
		{name: "write error", fs: &faultFS{writeErr: syscall.EIO}, want: syscall.EIO},
		{name: "disk full midway", fs: &faultFS{writeErr: syscall.ENOSPC, writeAfter: 1 << 20}, want: syscall.ENOSPC},
		{name: "sync error", fs: &faultFS{syncErr: syscall.EIO}, want: syscall.EIO},
		// A failed write-back is reported once: to the background sync.
		{name: "background sync error", fs: &faultFS{datasyncErr: syscall.EIO}, want: syscall.EIO},
		{name: "close error", fs: &faultFS{closeErr: syscall.EDQUOT}, want: syscall.EDQUOT},
		{name: "rename error", fs: &faultFS{renameErr: syscall.EXDEV}, want: syscall.EXDEV},
		{name: "folder sync error", fs: &faultFS{syncDirErr: syscall.EIO}, want: syscall.EIO},
	}
	for _, tt := range tests {
		for _, existing := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/existing=%v", tt.name, existing), func(t *testing.T) {
				root := t.TempDir()
				l, err := NewLocal(root)
				if err != nil {
					t.Fatal(err)
				}
				if existing {
					// A stale archive of an earlier attempt (no row): a
					// failed Put must not leave a half-written one instead.
					if _, err := l.Put(t.Context(), "srv/run.tar.zst", func(w io.Writer) error {
						_, err := w.Write([]byte("stale"))
						return err
					}); err != nil {
						t.Fatal(err)
					}
				}
				l.fs = tt.fs
				l.flushEvery = 1 << 20
				// Through the page cache, so the background syncs run.
				l.noDirect = tt.fs.datasyncErr != nil
				_, err = l.Put(t.Context(), "srv/run.tar.zst", func(w io.Writer) error {
					for range 4 {
						if _, err := w.Write(make([]byte, 1<<20)); err != nil {
							return fmt.Errorf("streaming: %w", err)
						}
					}
					return nil
				})
				if !errors.Is(err, tt.want) {
					t.Fatalf("Put: %v, want an error wrapping %v", err, tt.want)
				}
				got := listAll(t, root)
				var want []string
				if existing && tt.name != "folder sync error" {
					want = []string{"srv/run.tar.zst"}
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("files left: %v, want %v", got, want)
				}
				if len(want) > 0 {
					if b, _ := os.ReadFile(filepath.Join(root, "srv/run.tar.zst")); string(b) != "stale" {
						t.Fatalf("the earlier archive changed to %d bytes", len(b))
					}
				}
			})
		}
	}
}

// TestLocalPutSyncsNewFolders: a Put that creates folders (<server>/, a
// pack's _chunked/packs/ab/) fsyncs the parent of each one it created, then
// the archive's folder after the rename; folders that exist are not synced
// again; a failed sync of a new folder's parent fails the Put.
func TestLocalPutSyncsNewFolders(t *testing.T) {
	pack := "_chunked/packs/ab/ab" + strings.Repeat("0", 62)
	for _, tt := range []struct {
		name    string
		exist   []string // folders made before the Put
		key     string
		want    []string // the folders synced, relative to the root ("." is the root)
		syncErr error
	}{
		{name: "a new server folder", key: "srv/run.tar.zst", want: []string{".", "srv"}},
		{name: "a new pack folder below new folders", key: pack,
			want: []string{".", "_chunked", "_chunked/packs", "_chunked/packs/ab"}},
		{name: "a new pack folder below existing ones", exist: []string{"_chunked/packs"}, key: pack,
			want: []string{"_chunked/packs", "_chunked/packs/ab"}},
		{name: "an existing folder", exist: []string{"srv"}, key: "srv/run.tar.zst", want: []string{"srv"}},
		{name: "the new folder's parent cannot be synced", key: "srv/run.tar.zst", want: []string{"."}, syncErr: syscall.EIO},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for _, d := range tt.exist {
				if err := os.MkdirAll(filepath.Join(root, d), 0o750); err != nil {
					t.Fatal(err)
				}
			}
			l, err := NewLocal(root)
			if err != nil {
				t.Fatal(err)
			}
			fs := &faultFS{syncDirErr: tt.syncErr}
			l.fs = fs
			_, err = l.Put(t.Context(), tt.key, func(w io.Writer) error { _, err := io.WriteString(w, "archive"); return err })
			if !errors.Is(err, tt.syncErr) || (err == nil) != (tt.syncErr == nil) {
				t.Fatalf("Put: %v, want %v", err, tt.syncErr)
			}
			var synced []string
			for _, d := range fs.synced {
				rel, _ := filepath.Rel(root, d)
				synced = append(synced, filepath.ToSlash(rel))
			}
			if fmt.Sprint(synced) != fmt.Sprint(tt.want) {
				t.Errorf("synced %v, want %v", synced, tt.want)
			}
			if got := listAll(t, root); tt.syncErr != nil && len(got) != 0 {
				t.Errorf("a failed Put left %v", got)
			}
		})
	}
}

// TestLocalPutWritesBehind: while the archive is written, Put has it synced
// in the background, and the archive is whole.
func TestLocalPutWritesBehind(t *testing.T) {
	root := t.TempDir()
	l, err := NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	fs := &faultFS{}
	l.fs = fs
	l.flushEvery = 1 << 20
	l.noDirect = true
	want := make([]byte, 0, 5<<20)
	size, err := l.Put(t.Context(), "srv/run.tar.zst", func(w io.Writer) error {
		// Large writes (passed straight through) and small ones (buffered).
		for i, n := range []int{2 << 20, 1, 3 << 19, 4096, 1 << 20, 7} {
			b := bytes.Repeat([]byte{byte(i + 1)}, n)
			if _, err := w.Write(b); err != nil {
				return err
			}
			want = append(want, b...)
		}
		return nil
	})
	checkPut(t, root, "srv/run.tar.zst", size, err, want)
	if n := fs.datasyncs.Load(); n < 1 {
		t.Errorf("%d background syncs while writing %d bytes, flushing every %d", n, len(want), l.flushEvery)
	}
}

func TestLocalCleansKilledAttempt(t *testing.T) {
	root := t.TempDir()
	l, err := NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "srv")
	os.MkdirAll(dir, 0o750)
	// What a killed process leaves: its temp file and its lock file.
	leftover := filepath.Join(dir, ".run.tar.zst.tmp-0123456789abcdef")
	notOurs := []string{
		".run.tar.zst.tmp-0123456789abcdef.tar.zst", // another key's archive name shape
		".run.tar.zst.tmp-notahexsuffix!!",
		"run.tar.zst.tmp-0123456789abcdef",
	}
	for _, n := range append(notOurs, filepath.Base(leftover), ".run.tar.zst.lock") {
		os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o640)
	}
	unlock, err := l.Lock(t.Context(), "srv/run.tar.zst")
	if err != nil {
		t.Fatal(err)
	}
	removed, err := l.CleanTemps(t.Context(), "srv/run.tar.zst")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(removed) != fmt.Sprint([]string{leftover}) {
		t.Fatalf("removed %v, want %v", removed, []string{leftover})
	}
	if _, err := l.Put(t.Context(), "srv/run.tar.zst", func(w io.Writer) error { return nil }); err != nil {
		t.Fatal(err)
	}
	unlock()
	want := append([]string{"run.tar.zst"}, notOurs...)
	sort.Strings(want)
	got := listAll(t, dir)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("folder holds %v, want %v", got, want)
	}
	st, err := os.Stat(filepath.Join(dir, "run.tar.zst"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm()&0o007 != 0 {
		t.Fatalf("archive mode %v is readable by others", st.Mode())
	}
}

func TestNewLocalRelative(t *testing.T) {
	if _, err := NewLocal("backups"); err == nil {
		t.Fatal("NewLocal accepted a relative root")
	}
}

// TestLocalPutDirect: an archive written with O_DIRECT (on ext4 and XFS)
// holds exactly what was written, whatever the alignment of the writes:
// aligned large buffers go straight to the disk, the rest through a buffer,
// and an unaligned tail through the page cache.
func TestLocalPutDirect(t *testing.T) {
	aligned := func(n int, fill byte) []byte {
		b := AlignedBuffer(n)[:n]
		for i := range b {
			b[i] = fill + byte(i%251)
		}
		return b
	}
	plain := func(n int, fill byte) []byte { return bytes.Repeat([]byte{fill}, n) }
	tests := []struct {
		name   string
		writes [][]byte
	}{
		{name: "aligned buffers and a tail", writes: [][]byte{aligned(2<<20, 1), aligned(2<<20, 2), aligned(12345, 3)}},
		{name: "aligned buffers only", writes: [][]byte{aligned(2<<20, 1), aligned(1<<20, 2)}},
		{name: "small writes first", writes: [][]byte{plain(512, 1), plain(3, 2), aligned(2<<20, 3), plain(1<<20+5, 4), aligned(2<<20, 5)}},
		{name: "unaligned large", writes: [][]byte{aligned(2<<20, 1)[1:], plain(3<<20, 2), aligned(4096, 3)}},
		{name: "one small write", writes: [][]byte{plain(10, 7)}},
		{name: "nothing", writes: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			l, err := NewLocal(root)
			if err != nil {
				t.Fatal(err)
			}
			var st unix.Statfs_t
			if err := unix.Statfs(root, &st); err != nil {
				t.Fatal(err)
			}
			directFSType := directFS(int64(st.Type))
			var want []byte
			size, err := l.Put(t.Context(), "srv/run.tar.zst", func(w io.Writer) error {
				aw := w.(*archiveWriter)
				if aw.direct != directFSType {
					t.Errorf("O_DIRECT on: %v, want %v (file system type %#x)", aw.direct, directFSType, st.Type)
				}
				for _, b := range tt.writes {
					if n, err := w.Write(b); err != nil || n != len(b) {
						return fmt.Errorf("wrote %d of %d bytes: %v", n, len(b), err)
					}
					want = append(want, b...)
				}
				return nil
			})
			checkPut(t, root, "srv/run.tar.zst", size, err, want)
		})
	}
}

// A missing root is an unmounted volume: Put and Lock refuse it rather than
// create it; the folders below an existing root are created.
func TestLocalMissingRoot(t *testing.T) {
	root := filepath.Join(t.TempDir(), "backups")
	l, err := NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Put(t.Context(), "srv/run.tar", func(w io.Writer) error { return nil }); !errors.Is(err, ErrNoRoot) {
		t.Errorf("Put: %v, want ErrNoRoot", err)
	}
	if _, err := l.Lock(t.Context(), "srv/run"); !errors.Is(err, ErrNoRoot) {
		t.Errorf("Lock: %v, want ErrNoRoot", err)
	}
	if _, err := os.Lstat(root); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the root was created: %v", err)
	}
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Put(t.Context(), "srv/run.tar", func(w io.Writer) error { return nil }); err != nil {
		t.Fatalf("Put below an existing root: %v", err)
	}
}

// checkPut checks that a Put of key under root succeeded, returned the size
// of want and left exactly want in the archive.
func checkPut(t *testing.T, root, key string, size int64, err error, want []byte) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if size != int64(len(want)) {
		t.Errorf("Put returned size %d, want %d", size, len(want))
	}
	got, err := os.ReadFile(filepath.Join(root, key))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the archive holds %d bytes that differ from the %d written", len(got), len(want))
	}
}

// TestLocalOpenRefusesNonRegular: what others could plant in a folder
// store at an archive's, manifest's or key object's name is refused at once
// (a FIFO without a writer blocked the open, and the run with it, with the
// game's autosave off; /dev/zero gave endless bytes); a symbolic link to a
// regular file is read.
func TestLocalOpenRefusesNonRegular(t *testing.T) {
	root := t.TempDir()
	l, err := NewLocal(root)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "survival")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "elsewhere"), []byte("archive"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		plant   func(path string) error
		wantErr error // nil: opens and reads "archive"
	}{
		{"fifo", func(p string) error { return unix.Mkfifo(p, 0o644) }, regfile.ErrNotRegular},
		{"symlink to /dev/zero", func(p string) error { return os.Symlink("/dev/zero", p) }, regfile.ErrNotRegular},
		{"folder", func(p string) error { return os.Mkdir(p, 0o755) }, regfile.ErrNotRegular},
		{"symlink to a regular file", func(p string) error { return os.Symlink(filepath.Join(root, "elsewhere"), p) }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := "survival/" + strings.NewReplacer(" ", "-", "/", "-").Replace(tt.name) + ".tar.zst"
			if err := tt.plant(l.Ref(key)); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				rc, err := l.Open(t.Context(), key)
				if err == nil {
					var b []byte
					b, err = io.ReadAll(io.LimitReader(rc, 100))
					rc.Close()
					if err == nil && string(b) != "archive" {
						err = fmt.Errorf("read %q", b)
					}
				}
				done <- err
			}()
			select {
			case err := <-done:
				if (tt.wantErr == nil) != (err == nil) || (tt.wantErr != nil && !errors.Is(err, tt.wantErr)) {
					t.Fatalf("Open: %v, want %v", err, tt.wantErr)
				}
			case <-time.After(time.Minute): // a hang guard, not a timing assert
				t.Fatal("Open blocked")
			}
		})
	}
}
