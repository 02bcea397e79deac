//go:build linux

package tarstream

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/worldbackup/worldbackup/internal/testenv"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"
)

// entry is what the archive must hold for one path.
type entry struct {
	typ  byte
	data []byte // regular files
	link string // links
	mode int64
}

// tree is a world folder with every odd kind of entry, and the archive
// expected from it.
type tree struct {
	root string
	want map[string]entry // by tar name
}

func randBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func makeTree(t *testing.T) *tree {
	t.Helper()
	tr := &tree{root: filepath.Join(t.TempDir(), "world-root"), want: map[string]entry{}}
	dir := func(rel string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(tr.root, rel), 0o755); err != nil {
			t.Fatal(err)
		}
		for p := rel; p != "."; p = filepath.Dir(p) {
			tr.want[filepath.ToSlash(p)+"/"] = entry{typ: tar.TypeDir, mode: 0o755}
		}
	}
	file := func(rel string, data []byte, mode os.FileMode) {
		t.Helper()
		dir(filepath.Dir(rel))
		p := filepath.Join(tr.root, rel)
		if err := os.WriteFile(p, data, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		tr.want[filepath.ToSlash(rel)] = entry{typ: tar.TypeReg, data: data, mode: int64(mode)}
	}
	symlink := func(rel, target string) {
		t.Helper()
		dir(filepath.Dir(rel))
		if err := os.Symlink(target, filepath.Join(tr.root, rel)); err != nil {
			t.Fatal(err)
		}
		tr.want[filepath.ToSlash(rel)] = entry{typ: tar.TypeSymlink, link: target, mode: 0o777}
	}
	excluded := func(rel string) {
		t.Helper()
		os.MkdirAll(filepath.Join(tr.root, filepath.Dir(rel)), 0o755)
		if err := os.WriteFile(filepath.Join(tr.root, rel), []byte("excluded"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	file("world/region/r.0.0.mca", randBytes(t, 300<<10), 0o644)
	file("world/region/r.0.1.mca", bytes.Repeat([]byte("minecraft"), 50_000), 0o644)
	file("world/level.dat", randBytes(t, 2000), 0o600)
	file("world/empty-file", nil, 0o644)
	file("wörld_nether/日本語.json", []byte(`{"ok":true}`), 0o644)
	file("world/bad-\xff\xfe-utf8.dat", []byte("not utf-8 name"), 0o644)
	long := strings.Repeat("long-folder-name/", 8) + strings.Repeat("x", 150) + ".dat"
	file("world/"+long, []byte("long name"), 0o644)
	file("world/grow.dat", bytes.Repeat([]byte("g"), 1000), 0o644)
	file("world/shrink.dat", bytes.Repeat([]byte("s"), 1000), 0o644)
	dir("world/empty/nested")
	dir("world_the_end/DIM1")
	symlink("world/passwd", "/etc/passwd")
	symlink("world/level-link", "level.dat")
	symlink("world/dangling", "no/such/file")
	symlink("world/dir-link", "/etc")

	// A hard link: stored once as a file, then as a link to the first name.
	file("world/stats/a.json", []byte(`{"stat":1}`), 0o644)
	if err := os.Link(filepath.Join(tr.root, "world/stats/a.json"), filepath.Join(tr.root, "world/stats/b.json")); err != nil {
		t.Fatal(err)
	}
	tr.want["world/stats/b.json"] = entry{typ: tar.TypeLink, link: "world/stats/a.json", mode: 0o644}

	// Special files: skipped, never opened (opening the fifo would block).
	if err := unix.Mkfifo(filepath.Join(tr.root, "world/fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(tr.root, "world/sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })

	// Default excludes.
	excluded("paper.jar")
	excluded("plugins/x.jar")
	excluded("cache/mojang_1.21.jar")
	excluded("logs/latest.log")
	excluded("world/region/r.0.0.mca.tmp")
	excluded("world/cache/deep")
	// "logs" as a file is not a directory: kept.
	file("world/logs", []byte("a file named logs"), 0o644)
	dir("plugins")
	return tr
}

// readArchive decompresses and parses an archive into entries by name.
func readArchive(t *testing.T, archive []byte, c Compression) map[string]entry {
	t.Helper()
	dr, err := Decompress(bytes.NewReader(archive), c, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer dr.Close()
	got := map[string]entry{}
	tr := tar.NewReader(dr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("reading archive: %v", err)
		}
		if _, dup := got[h.Name]; dup {
			t.Errorf("entry %q twice", h.Name)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("reading %q: %v", h.Name, err)
		}
		e := entry{typ: h.Typeflag, link: h.Linkname, mode: h.Mode}
		if h.Typeflag == tar.TypeReg {
			e.data = data
		}
		if h.Typeflag == tar.TypeSymlink {
			e.mode = 0o777
		}
		got[h.Name] = e
	}
	return got
}

func compareEntries(t *testing.T, got, want map[string]entry) {
	t.Helper()
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("archive lacks %q", name)
			continue
		}
		if g.typ != w.typ || g.link != w.link || g.mode != w.mode || !bytes.Equal(g.data, w.data) {
			t.Errorf("entry %q: got type %c link %q mode %o %d bytes; want type %c link %q mode %o %d bytes",
				name, g.typ, g.link, g.mode, len(g.data), w.typ, w.link, w.mode, len(w.data))
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("archive has unexpected entry %q", name)
		}
	}
}

func TestWriteRoundTrip(t *testing.T) {
	for _, c := range Compressions {
		t.Run(string(c), func(t *testing.T) {
			tr := makeTree(t)
			// The file mutated while read: one grows, one shrinks after its
			// header is written.
			shrink := tr.want["world/shrink.dat"]
			shrink.data = append(bytes.Repeat([]byte("s"), 10), make([]byte, 990)...)
			tr.want["world/shrink.dat"] = shrink
			hook := func(rel string) {
				switch rel {
				case "world/grow.dat":
					f, err := os.OpenFile(filepath.Join(tr.root, rel), os.O_APPEND|os.O_WRONLY, 0)
					if err != nil {
						t.Error(err)
						return
					}
					f.Write([]byte("more data appended while reading"))
					f.Close()
				case "world/shrink.dat":
					if err := os.Truncate(filepath.Join(tr.root, rel), 10); err != nil {
						t.Error(err)
					}
				}
			}

			var out bytes.Buffer
			var logs bytes.Buffer
			var prog Progress
			res, err := Write(t.Context(), &out, tr.root, Options{
				Compression: c,
				Excludes:    DefaultExcludes,
				Log:         hclog.New(&hclog.LoggerOptions{Output: &logs, JSONFormat: true}),
				Progress:    &prog,
				afterHeader: hook,
			})
			if err != nil {
				t.Fatalf("Write: %v", err)
			}
			sum := sha256.Sum256(out.Bytes())
			if res.SHA256 != hex.EncodeToString(sum[:]) || res.Size != int64(out.Len()) {
				t.Errorf("result says %d bytes sha256 %s; output has %d bytes sha256 %x", res.Size, res.SHA256, out.Len(), sum)
			}
			if prog.OutputBytes.Load() != res.Size || prog.Files.Load() != res.Files || prog.InputBytes.Load() != res.InputBytes {
				t.Errorf("progress %d/%d/%d disagrees with result %+v", prog.Files.Load(), prog.InputBytes.Load(), prog.OutputBytes.Load(), res)
			}
			if res.Skipped != 2 {
				t.Errorf("skipped %d special files, want 2 (fifo and socket)", res.Skipped)
			}
			if res.Warnings != 4 {
				t.Errorf("%d warnings, want 4 (grown and shrunk file, links to /etc/passwd and /etc); logs:\n%s", res.Warnings, logs.String())
			}
			for _, msg := range []string{"file grew while read", "file shrank while read", "special file skipped", `"world/fifo"`, `"world/sock"`,
				"archiver restore` refuses archives with such links", `"world/passwd"`, `"world/dir-link"`} {
				if !strings.Contains(logs.String(), msg) {
					t.Errorf("logs lack %q:\n%s", msg, logs.String())
				}
			}
			var files int64
			for _, e := range tr.want {
				if e.typ != tar.TypeDir {
					files++
				}
			}
			if res.Files != files {
				t.Errorf("result counts %d files, want %d", res.Files, files)
			}
			compareEntries(t, readArchive(t, out.Bytes(), c), tr.want)
		})
	}
}

// TestWriteFileGrowsAtBufferEdges: a file that grows while read is stored
// with its size at open and one warning, and one that does not grow gives
// none, whatever its size against the read buffer.
func TestWriteFileGrowsAtBufferEdges(t *testing.T) {
	for _, size := range []int{0, 1, readBuffer - 1, readBuffer, readBuffer + 1, 2 * readBuffer} {
		for _, grows := range []bool{false, true} {
			t.Run(fmt.Sprintf("size=%d/grows=%v", size, grows), func(t *testing.T) {
				root := t.TempDir()
				name := filepath.Join(root, "r.0.0.mca")
				data := randBytes(t, size)
				if err := os.WriteFile(name, data, 0o644); err != nil {
					t.Fatal(err)
				}
				hook := func(string) {
					if !grows {
						return
					}
					f, err := os.OpenFile(name, os.O_APPEND|os.O_WRONLY, 0)
					if err != nil {
						t.Error(err)
						return
					}
					f.Write([]byte("appended while read"))
					f.Close()
				}
				var out bytes.Buffer
				res, err := Write(t.Context(), &out, root, Options{Compression: None, afterHeader: hook})
				if err != nil {
					t.Fatal(err)
				}
				want := 0
				if grows {
					want = 1
				}
				if res.Warnings != int64(want) {
					t.Errorf("%d warnings, want %d", res.Warnings, want)
				}
				got := readArchive(t, out.Bytes(), None)["r.0.0.mca"]
				if !bytes.Equal(got.data, data) {
					t.Errorf("archived %d bytes that differ from the %d at open", len(got.data), len(data))
				}
			})
		}
	}
}

// TestWriteHeaders checks header details GNU tar relies on.
func TestWriteHeaders(t *testing.T) {
	tr := makeTree(t)
	var out bytes.Buffer
	if _, err := Write(t.Context(), &out, tr.root, Options{Compression: None, Excludes: DefaultExcludes}); err != nil {
		t.Fatal(err)
	}
	r := tar.NewReader(&out)
	for {
		h, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(h.Name, "/") || strings.HasPrefix(h.Name, "./") || strings.Contains(h.Name, "..") {
			t.Errorf("entry name %q is not relative to the world root", h.Name)
		}
		if strings.Contains(h.Name, "\xff") || len(h.Name) > 255 {
			if h.Format != tar.FormatPAX {
				t.Errorf("entry %q: format %v, want PAX", h.Name, h.Format)
			}
		}
	}
}

func TestWriteExcludes(t *testing.T) {
	tests := []struct {
		name     string
		excludes []string
		want     []string // entries that must be present
		absent   []string // entries that must be absent
	}{
		{
			name:     "none",
			excludes: nil,
			want:     []string{"paper.jar", "cache/", "cache/a", "logs/latest.log", "x.tmp", "world/session.lock"},
		},
		{
			name:     "defaults",
			excludes: DefaultExcludes,
			want:     []string{"world/session.lock", "world/logs"},
			absent:   []string{"paper.jar", "cache/", "cache/a", "logs/", "logs/latest.log", "x.tmp", "plugins/p.jar"},
		},
		{
			name:     "path pattern",
			excludes: []string{"world/session.lock"},
			want:     []string{"paper.jar", "session.lock"},
			absent:   []string{"world/session.lock"},
		},
		{
			name:     "base name pattern",
			excludes: []string{"session.lock"},
			absent:   []string{"world/session.lock", "session.lock"},
		},
		{
			name:     "directory pattern with path",
			excludes: []string{"world/logs/"},
			want:     []string{"world/logs", "logs/latest.log"},
		},
		{
			name:     "leading slash and dot",
			excludes: []string{"/paper.jar", "./cache/"},
			want:     []string{"plugins/p.jar"},
			absent:   []string{"paper.jar", "cache/"},
		},
	}
	root := t.TempDir()
	for _, f := range []string{"paper.jar", "plugins/p.jar", "cache/a", "logs/latest.log", "x.tmp", "world/session.lock", "world/logs", "session.lock"} {
		p := filepath.Join(root, f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			if _, err := Write(t.Context(), &out, root, Options{Compression: None, Excludes: tt.excludes}); err != nil {
				t.Fatal(err)
			}
			got := readArchive(t, out.Bytes(), None)
			for _, n := range tt.want {
				if _, ok := got[n]; !ok {
					t.Errorf("%q missing", n)
				}
			}
			for _, n := range tt.absent {
				if _, ok := got[n]; ok {
					t.Errorf("%q present, want excluded", n)
				}
			}
		})
	}
}

func TestValidateExcludes(t *testing.T) {
	tests := []struct {
		name    string
		globs   []string
		wantErr string
	}{
		{name: "defaults", globs: DefaultExcludes},
		{name: "empty list", globs: []string{}},
		{name: "bad bracket", globs: []string{"*.jar", "[a-"}, wantErr: `"[a-"`},
		{name: "empty pattern", globs: []string{""}, wantErr: "matches nothing"},
		{name: "only slash", globs: []string{"/"}, wantErr: "matches nothing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateExcludes(tt.globs)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestWriteRootErrors(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	os.Mkdir(real, 0o755)
	os.Symlink(real, filepath.Join(dir, "link"))
	os.WriteFile(filepath.Join(dir, "file"), nil, 0o644)
	tests := []struct {
		name, root, want string
	}{
		{name: "symlink root", root: filepath.Join(dir, "link"), want: "symbolic link"},
		{name: "symlink root with slash", root: filepath.Join(dir, "link") + "/", want: "symbolic link"},
		{name: "file root", root: filepath.Join(dir, "file"), want: "not a folder"},
		{name: "missing root", root: filepath.Join(dir, "missing"), want: "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Write(t.Context(), io.Discard, tt.root, Options{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestWriteCanceled(t *testing.T) {
	tr := makeTree(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := Write(ctx, io.Discard, tr.root, Options{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
}

// failingWriter accepts after bytes, then fails with err; with a nil err it
// reports a short write instead.
type failingWriter struct {
	after, n int
	err      error
}

func (f *failingWriter) Write(p []byte) (int, error) {
	if f.n+len(p) <= f.after {
		f.n += len(p)
		return len(p), nil
	}
	n := max(f.after-f.n, 0)
	f.n += n
	return n, f.err
}

// TestWriteDestinationFails: an error of the destination, which the stream
// writes to on a goroutine of its own, fails Write, at the start of the
// stream or in the middle.
func TestWriteDestinationFails(t *testing.T) {
	root := t.TempDir()
	// Incompressible, so every compression writes several MiB.
	if err := os.WriteFile(filepath.Join(root, "r.0.0.mca"), randBytes(t, 8<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		after int
		err   error
		want  error
	}{
		{name: "first write", after: 0, err: syscall.ENOSPC, want: syscall.ENOSPC},
		{name: "midway", after: 3 << 20, err: syscall.EIO, want: syscall.EIO},
		{name: "short write", after: 1<<20 + 17, want: io.ErrShortWrite},
	}
	for _, c := range Compressions {
		for _, tt := range tests {
			t.Run(string(c)+"/"+tt.name, func(t *testing.T) {
				dst := &failingWriter{after: tt.after, err: tt.err}
				_, err := Write(t.Context(), dst, root, Options{Compression: c})
				if !errors.Is(err, tt.want) {
					t.Fatalf("error %v, want one wrapping %v", err, tt.want)
				}
			})
		}
	}
}

// TestWriteUnreadable drops the capabilities that let root read any file,
// on one locked OS thread, so a 0000 file is really unreadable.
func TestWriteUnreadable(t *testing.T) {
	root := t.TempDir()
	secret := filepath.Join(root, "world", "secret.dat")
	os.MkdirAll(filepath.Dir(secret), 0o755)
	if err := os.WriteFile(secret, []byte("x"), 0o000); err != nil {
		t.Fatal(err)
	}
	os.Chmod(secret, 0)
	tests := []struct {
		name     string
		excludes []string
		wantErr  bool
	}{
		{name: "fails with the path", wantErr: true},
		{name: "excluded", excludes: []string{"secret.dat"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := withoutDACOverride(t, func() error {
				_, err := Write(t.Context(), io.Discard, root, Options{Excludes: tt.excludes})
				return err
			})
			if !tt.wantErr {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), secret) || !errors.Is(err, syscall.EACCES) {
				t.Fatalf("error %v, want EACCES naming %s", err, secret)
			}
		})
	}
}

// TestWriteReadsOwnerOnlyAsRoot: a 0600 file of another user (Paper's
// level.dat) is read when running as root.
func TestWriteReadsOwnerOnlyAsRoot(t *testing.T) {
	testenv.RequireRoot(t, "reading another user's 0600 file")
	root := t.TempDir()
	p := filepath.Join(root, "level.dat")
	os.WriteFile(p, []byte("level"), 0o600)
	if err := os.Chown(p, 12345, 12345); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := Write(t.Context(), &out, root, Options{Compression: None}); err != nil {
		t.Fatal(err)
	}
	if got := readArchive(t, out.Bytes(), None)["level.dat"]; string(got.data) != "level" {
		t.Fatalf("level.dat holds %q", got.data)
	}
}

// withoutDACOverride runs f on a fresh OS thread whose effective
// capabilities lack CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH; the thread
// exits afterwards. Not root: f runs as is.
func withoutDACOverride(t *testing.T, f func() error) error {
	t.Helper()
	if os.Geteuid() != 0 {
		return f()
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			done <- err
			return
		}
		data[0].Effective &^= 1<<unix.CAP_DAC_OVERRIDE | 1<<unix.CAP_DAC_READ_SEARCH
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			done <- err
			return
		}
		done <- f()
	}()
	return <-done
}
