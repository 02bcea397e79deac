package extract

import (
	"bytes"
	"fmt"
	"github.com/worldbackup/worldbackup/internal/testenv"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/worldbackup/worldbackup/archiver/tarstream"
	"golang.org/x/sys/unix"
)

// makeWorld writes a small world with every kind of entry a restore must
// preserve: modes (0600 level.dat, read-only folder, executable), nanosecond
// mtimes on files, folders and symlinks, hardlinks, symlinks (inside,
// dangling, climbing), an empty folder, long and non-UTF-8 names, and, as
// root, files owned by other users.
func makeWorld(tb testing.TB, root string) {
	tb.Helper()
	r := rand.New(rand.NewPCG(7, 8))
	noise := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	files := map[string]struct {
		data []byte
		mode os.FileMode
	}{
		"level.dat":          {[]byte("level data"), 0o600},
		"region/r.0.0.mca":   {noise(3 << 20), 0o644},
		"region/r.0.1.mca":   {noise(100 << 10), 0o644},
		"stats/steve.json":   {[]byte(`{"stat":1}`), 0o644},
		"scripts/run.sh":     {[]byte("#!/bin/sh\necho hi\n"), 0o755},
		"ro/file":            {[]byte("read only"), 0o444},
		"deep/a/b/c/d/e.txt": {[]byte("deep"), 0o640},
		"deep/" + strings.Repeat("long-name-", 20) + ".dat": {[]byte("long"), 0o644},
		"odd/bad\xffname":    {[]byte("not utf-8"), 0o644},
		"odd/with space.txt": {[]byte("space"), 0o644},
		"empty-file":         {nil, 0o644},
	}
	for i := range 20 {
		files[fmt.Sprintf("playerdata/%08x-0000-0000-0000-000000000000.dat", i)] = struct {
			data []byte
			mode os.FileMode
		}{noise(200 + i), 0o644}
	}
	for name, f := range files {
		p := filepath.Join(root, name)
		must(tb, os.MkdirAll(filepath.Dir(p), 0o755))
		must(tb, os.WriteFile(p, f.data, 0o600))
		must(tb, os.Chmod(p, f.mode))
	}
	must(tb, os.Mkdir(filepath.Join(root, "empty"), 0o750))
	must(tb, os.Link(filepath.Join(root, "level.dat"), filepath.Join(root, "level.dat_old")))
	must(tb, os.Link(filepath.Join(root, "region/r.0.1.mca"), filepath.Join(root, "deep/a/hardlinked.mca")))
	must(tb, os.Symlink("region/r.0.0.mca", filepath.Join(root, "latest")))
	must(tb, os.Symlink("nothere", filepath.Join(root, "dangling")))
	must(tb, os.Symlink("../stats", filepath.Join(root, "region/stats-link")))
	if os.Geteuid() == 0 {
		must(tb, os.Lchown(filepath.Join(root, "level.dat"), 1000, 1000))
		must(tb, os.Lchown(filepath.Join(root, "region"), 1000, 1000))
		must(tb, os.Lchown(filepath.Join(root, "latest"), 1000, 1001))
		must(tb, os.Lchown(filepath.Join(root, "ro/file"), 1001, 1002))
	}
	must(tb, os.Chmod(filepath.Join(root, "ro"), 0o555))

	// Times last, deepest first, so creating entries does not change them.
	var paths []string
	must(tb, filepath.WalkDir(root, func(p string, _ os.DirEntry, err error) error {
		paths = append(paths, p)
		return err
	}))
	slices.SortFunc(paths, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	for i, p := range paths {
		mt := testTime.Add(time.Duration(i) * 1_234_567_891)
		ts := []unix.Timespec{unix.NsecToTimespec(mt.UnixNano()), unix.NsecToTimespec(mt.UnixNano())}
		must(tb, unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW))
	}
}

// backup builds an archive of src with the archiver's own tar stream.
func backup(tb testing.TB, src string, c tarstream.Compression) (string, string) {
	tb.Helper()
	var b bytes.Buffer
	res, err := tarstream.Write(tb.Context(), &b, src, tarstream.Options{Compression: c})
	if err != nil {
		tb.Fatalf("tarstream.Write: %v", err)
	}
	path, sum := writeArchive(tb, b.Bytes())
	if sum != res.SHA256 {
		tb.Fatalf("tarstream reported SHA-256 %s, file has %s", res.SHA256, sum)
	}
	return path, sum
}

// gnuTar builds an archive of src with GNU tar and the zstd program.
func gnuTar(tb testing.TB, src string) (string, string) {
	tb.Helper()
	testenv.RequireCommands(tb, "tar zstd", "tar", "zstd")
	path := filepath.Join(tb.TempDir(), "world.tar.zst")
	out, err := exec.Command("tar", "--zstd", "--format=posix", "-cf", path, "-C", src, ".").CombinedOutput()
	if err != nil {
		tb.Fatalf("tar: %v\n%s", err, out)
	}
	data, err := os.ReadFile(path)
	must(tb, err)
	return path, sha(data)
}

func TestRoundTrip(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	must(t, os.Mkdir(src, 0o750))
	makeWorld(t, src)
	owners := os.Geteuid() == 0

	type archiveCase struct {
		name      string
		make      func(testing.TB) (string, string)
		comp      string
		checkRoot bool          // the archive has a ./ entry, so the root's mode and mtime are restored too
		grain     time.Duration // mtime precision of the archive
	}
	cases := []archiveCase{
		// tarstream stores whole seconds (its choice); GNU tar's posix format keeps nanoseconds.
		{"tarstream zstd", func(tb testing.TB) (string, string) { return backup(tb, src, tarstream.Zstd) }, "zstd", false, time.Second},
		{"tarstream gzip", func(tb testing.TB) (string, string) { return backup(tb, src, tarstream.Gzip) }, "gzip", false, time.Second},
		{"tarstream none", func(tb testing.TB) (string, string) { return backup(tb, src, tarstream.None) }, "none", false, time.Second},
		{"gnu tar zstd", func(tb testing.TB) (string, string) { return gnuTar(tb, src) }, "zstd", true, time.Nanosecond},
	}
	for _, ac := range cases {
		t.Run(ac.name, func(t *testing.T) {
			archive, sum := ac.make(t)
			for _, tc := range []struct {
				layout Layout
				old    bool // DIR holds an old world (Replace)
				fresh  bool // DIR does not exist
			}{
				{LayoutBeside, true, false},
				{LayoutBeside, false, true},
				{LayoutInside, true, false},
				{LayoutInside, false, false},
			} {
				t.Run(fmt.Sprintf("%s old=%v fresh=%v", tc.layout, tc.old, tc.fresh), func(t *testing.T) {
					s := newScene(t, tc.old)
					if tc.fresh {
						must(t, os.Remove(s.world))
					}
					sentinel := snapshot(t, s.sentinel)
					res, err := Restore(t.Context(), nil, Options{Archive: archive, SHA256: sum, Into: s.world, Replace: tc.old, Layout: tc.layout})
					if err != nil {
						t.Fatalf("Restore: %v", err)
					}
					sameTree(t, src, s.world, owners, ac.checkRoot && tc.layout == LayoutBeside, ac.grain)
					if d := diffSnapshots(sentinel, snapshot(t, s.sentinel)); d != "" {
						t.Errorf("sentinel changed:\n%s", d)
					}
					entries, err := os.ReadDir(s.tmp)
					must(t, err)
					var names []string
					for _, e := range entries {
						names = append(names, e.Name())
					}
					if fmt.Sprint(names) != "[sentinel world]" {
						t.Errorf("folder beside DIR holds %v, want only sentinel and world (no staging, previous or journal)", names)
					}
					if res.Compression != ac.comp || res.Layout != tc.layout || res.Replaced != tc.old ||
						res.Files != 31 || res.Hardlinks != 2 || res.Symlinks != 3 || res.Bytes == 0 || res.ArchiveBytes == 0 {
						t.Errorf("Result = %+v", res)
					}
				})
			}
		})
	}
}

func TestRestoreKeepsLostFound(t *testing.T) {
	s := newScene(t, true)
	lf := filepath.Join(s.world, lostFound)
	must(t, os.Mkdir(lf, 0o700))
	must(t, os.WriteFile(filepath.Join(lf, "#123"), []byte("fsck found this"), 0o600))
	data := zstdBytes(t, buildTar(t, dir("lost+found/"), reg("lost+found/from-archive", "x"), reg("level.dat", "new")))
	path, sum := writeArchive(t, data)
	if _, err := Restore(t.Context(), nil, Options{Archive: path, SHA256: sum, Into: s.world, Replace: true, Layout: LayoutInside}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(lf, "#123")); err != nil || string(b) != "fsck found this" {
		t.Errorf("the volume's lost+found was not kept: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(lf, "from-archive")); err == nil {
		t.Error("the archive's lost+found was merged into the volume's")
	}
	if b, _ := os.ReadFile(filepath.Join(s.world, "level.dat")); string(b) != "new" {
		t.Errorf("level.dat = %q, want new", b)
	}
	if _, err := os.Stat(filepath.Join(s.world, "region")); err == nil {
		t.Error("old world's region/ still there")
	}

	// A DIR holding only lost+found counts as empty.
	path, sum = writeArchive(t, zstdBytes(t, buildTar(t, reg("level.dat", "newer"))))
	must(t, os.Remove(filepath.Join(s.world, "level.dat")))
	if _, err := Restore(t.Context(), nil, Options{Archive: path, SHA256: sum, Into: s.world, Layout: LayoutInside}); err != nil {
		t.Fatalf("restore into a folder holding only lost+found, without Replace: %v", err)
	}
}

func TestDeepAndRootEntry(t *testing.T) {
	deep := strings.Repeat("d/", 2000) + "f" // 2000 folders, just under PATH_MAX
	data := zstdBytes(t, buildTar(t, ent{name: "./", typ: '5', mode: 0o700}, reg(deep, "deep"), reg(deep+"2", "deeper")))
	path, sum := writeArchive(t, data)
	for _, layout := range []Layout{LayoutBeside, LayoutInside} {
		t.Run(string(layout), func(t *testing.T) {
			s := newScene(t, false)
			must(t, os.Chmod(s.world, 0o751))
			res, err := Restore(t.Context(), nil, Options{Archive: path, SHA256: sum, Into: s.world, Layout: layout})
			if err != nil {
				t.Fatal(err)
			}
			if res.Files != 2 || res.Dirs != 1 {
				t.Errorf("Result = %+v", res)
			}
			root, err := os.OpenRoot(s.world)
			must(t, err)
			defer root.Close()
			if b, err := root.ReadFile(deep + "2"); err != nil || string(b) != "deeper" {
				t.Errorf("deep file: %q %v", b, err)
			}
			fi, err := os.Stat(s.world)
			must(t, err)
			want := os.FileMode(0o700) // beside: the archive's ./ entry
			if layout == LayoutInside {
				want = 0o751 // inside: DIR is a volume root and keeps its own mode
			}
			if fi.Mode().Perm() != want {
				t.Errorf("DIR mode %v, want %v", fi.Mode().Perm(), want)
			}
		})
	}
}
