package extract

import (
	"bytes"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/worldbackup/worldbackup/archiver/tarstream"
)

// FuzzRestore feeds arbitrary archives (seeded with every refused archive
// of TestRefusals, compressed and not, and a valid world) to Restore and
// checks that nothing is ever written outside DIR, that a refused archive
// leaves DIR as it was, that no symlink of a restored world resolves outside
// it, and that nothing panics. Run it with
//
//	go test ./archiver/extract -run '^$' -fuzz FuzzRestore -fuzztime 30s
func FuzzRestore(f *testing.F) {
	for _, tc := range badCases() {
		data := tc.archive(f)
		f.Add(data, false)
		if c, _ := tarstream.Detect(data); c == tarstream.Zstd {
			if d, err := zstd.NewReader(bytes.NewReader(data)); err == nil {
				if plain, err := io.ReadAll(d); err == nil {
					f.Add(plain, true)
				}
				d.Close()
			}
		}
	}
	good := buildTar(f, dir("./"), reg("level.dat", "level"), dir("region/"), reg("region/r.0.0.mca", "region"),
		sym("latest", "region/r.0.0.mca"), sym("region/up", "../level.dat"), hard("level.dat_old", "level.dat"))
	f.Add(good, false)
	f.Add(good, true)
	f.Add(zstdBytes(f, good), true)
	f.Add(gzipBytes(f, good), false)

	numbered := regexp.MustCompile(`^\d+$`)
	f.Fuzz(func(t *testing.T, data []byte, inside bool) {
		s := newScene(t, true)
		archive, sum := writeArchive(t, data)
		layout := LayoutBeside
		if inside {
			layout = LayoutInside
		}
		oldWorld := snapshot(t, s.world)
		sentinel := snapshot(t, s.sentinel)
		_, err := Restore(t.Context(), nil, Options{
			Archive: archive, SHA256: sum, Into: s.world, Replace: true, Layout: layout,
			MaxBytes: 8 << 20, MaxEntries: 500, MaxDecoderMemory: 8 << 20,
		})

		if d := diffSnapshots(sentinel, snapshot(t, s.sentinel)); d != "" {
			t.Fatalf("sentinel changed (err %v):\n%s", err, d)
		}
		for _, d := range []string{s.tmp, filepath.Dir(s.tmp)} {
			entries, rerr := os.ReadDir(d)
			if rerr != nil {
				t.Fatal(rerr)
			}
			for _, e := range entries {
				if ok := (d == s.tmp && (e.Name() == "world" || e.Name() == "sentinel")) ||
					(d != s.tmp && numbered.MatchString(e.Name())); !ok {
					t.Fatalf("%s appeared outside DIR (err %v)", filepath.Join(d, e.Name()), err)
				}
			}
		}
		if _, serr := os.Lstat(absEvil); serr == nil {
			t.Fatalf("%s was created", absEvil)
		}
		if err != nil {
			if d := diffSnapshots(oldWorld, snapshot(t, s.world)); d != "" {
				t.Fatalf("refused archive (%v) changed DIR:\n%s", err, d)
			}
			return
		}
		// A restored world: no special files, no symlink resolving outside.
		world, _ := filepath.EvalSymlinks(s.world)
		werr := filepath.WalkDir(s.world, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			switch {
			case d.Type()&fs.ModeSymlink != 0:
				if real, err := filepath.EvalSymlinks(p); err == nil && !within(world, real) {
					t.Errorf("symlink %s resolves outside DIR, to %s", p, real)
				}
			case d.Type()&(fs.ModeDevice|fs.ModeNamedPipe|fs.ModeSocket|fs.ModeCharDevice) != 0:
				t.Errorf("special file %s restored", p)
			}
			return nil
		})
		if werr != nil {
			t.Fatal(werr)
		}
	})
}
