package extract

import (
	"archive/tar"
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// badCase is one archive that must be refused.
type badCase struct {
	name    string
	archive func(tb testing.TB) []byte
	opts    func(o *Options) // caps for bombs
	sha     string           // expected checksum; "" means the archive's own
	want    string           // substring of the error
	is      error            // errors.Is target; ErrRefused when nil
}

// absEvil is an absolute path an archive tries to write.
var absEvil = filepath.Join(os.TempDir(), "worldbackup-extract-evil-"+strings.Repeat("x", 8))

func tarOf(ents ...ent) func(testing.TB) []byte {
	return func(tb testing.TB) []byte { return buildTar(tb, ents...) }
}

func zstdOf(ents ...ent) func(testing.TB) []byte {
	return func(tb testing.TB) []byte { return zstdBytes(tb, buildTar(tb, ents...)) }
}

// badCases lists every refusal of issue 7 and a few more.
func badCases() []badCase {
	return []badCase{
		// names
		{name: "dotdot", archive: zstdOf(reg("ok", "x"), reg("../evil", "x")), want: `entry 2 "../evil": name contains a ".." component`},
		{name: "dotdot inside", archive: zstdOf(reg("a/../../evil", "x")), want: `".." component`},
		{name: "dotdot dir", archive: tarOf(dir("../evil/")), want: `".." component`},
		{name: "absolute", archive: zstdOf(reg(absEvil, "x")), want: "absolute name"},
		{name: "nul in pax path", archive: func(tb testing.TB) []byte {
			b := buildTar(tb, reg("dir/ünïcode-NULHERE.txt", "x"))
			i := bytes.Index(b, []byte("NULHERE")) // the PAX record comes first; its block checksum does not cover it
			b[i] = 0
			return zstdBytes(tb, b)
		}, want: "invalid tar header"},
		{name: "reserved name", archive: zstdOf(reg(".worldbackup-previous/x", "x")), want: "reserved"},
		{name: "empty name", archive: tarOf(reg("", "x")), want: "empty name"},
		{name: "name too long", archive: zstdOf(reg(strings.Repeat("abcdefgh/", 500)+"f", "x")), want: "name longer than 4095 bytes"},
		{name: "component too long", archive: zstdOf(reg(strings.Repeat("n", 256), "x")), want: "longer than 255 bytes"},
		{name: "symlink target too long", archive: zstdOf(sym("s", strings.Repeat("t/", 2048))), want: "symlink target longer"},
		// symlinks
		{name: "symlink absolute", archive: zstdOf(sym("etc", "/etc")), want: `symlink target "/etc" is absolute`},
		{name: "symlink leaves root", archive: zstdOf(sym("s", "../sentinel/secret")), want: "leaves the root"},
		{name: "nested symlink leaves root", archive: zstdOf(sym("a/b/s", "../../../sentinel")), want: "leaves the root"},
		{name: "symlink climbs through symlink", archive: zstdOf(sym("up", "."), sym("x", "up/..")), want: `".." after a name`},
		{name: "symlink empty target", archive: tarOf(sym("s", "")), want: "empty target"},
		// hardlinks
		{name: "hardlink outside", archive: zstdOf(hard("h", "../sentinel/secret")), want: `hardlink target "../sentinel/secret"`},
		{name: "hardlink absolute", archive: zstdOf(hard("h", "/etc/passwd")), want: "absolute name"},
		{name: "hardlink to nothing", archive: zstdOf(hard("h", "nothere")), want: "not an earlier entry"},
		{name: "hardlink to later entry", archive: zstdOf(hard("h", "later"), reg("later", "x")), want: "not an earlier entry"},
		{name: "hardlink to directory", archive: zstdOf(dir("d/"), hard("h", "d")), want: "not a regular file"},
		{name: "hardlink to symlink", archive: zstdOf(reg("f", "x"), sym("s", "f"), hard("h", "s")), want: "not a regular file"},
		{name: "hardlink through symlink", archive: zstdOf(reg("real/f", "x"), sym("s", "real"), hard("h", "s/f")), want: "not an earlier entry"},
		// writing through symlinks
		{name: "file through inside symlink", archive: zstdOf(dir("real/"), sym("s", "real"), reg("s/evil", "x")), want: `parent "s" is a symlink`},
		{name: "dir through inside symlink", archive: zstdOf(dir("real/"), sym("s", "real"), dir("s/sub/")), want: `parent "s" is a symlink`},
		{name: "symlink through symlink", archive: zstdOf(dir("real/"), sym("s", "real"), sym("s/l", "x")), want: `parent "s" is a symlink`},
		{name: "file under a file", archive: zstdOf(reg("f", "x"), reg("f/g", "y")), want: `parent "f" is not a directory`},
		// duplicates
		{name: "duplicate file", archive: zstdOf(reg("a", "1"), reg("a", "2")), want: "duplicate entry"},
		{name: "duplicate dir", archive: zstdOf(dir("d/"), dir("d/")), want: "duplicate entry"},
		{name: "file then dir", archive: zstdOf(reg("a", "1"), dir("a/")), want: "duplicate entry"},
		{name: "dir then file", archive: zstdOf(dir("a/"), reg("a", "1")), want: "duplicate entry"},
		{name: "symlink then file", archive: zstdOf(sym("a", "b"), reg("a", "1")), want: "duplicate entry"},
		{name: "file then symlink", archive: zstdOf(reg("a", "1"), sym("a", "b")), want: "duplicate entry"},
		{name: "file then hardlink", archive: zstdOf(reg("a", "1"), reg("b", "2"), hard("a", "b")), want: "duplicate entry"},
		{name: "dot slash duplicate", archive: zstdOf(reg("a", "1"), reg("./a", "2")), want: "duplicate entry"},
		{name: "duplicate root entry", archive: zstdOf(dir("./"), dir(".")), want: "root folder"},
		// special files
		{name: "char device", archive: zstdOf(ent{name: "null", typ: tar.TypeChar}), want: "device files are not allowed"},
		{name: "block device", archive: zstdOf(ent{name: "sda", typ: tar.TypeBlock}), want: "device files are not allowed"},
		{name: "fifo", archive: zstdOf(ent{name: "pipe", typ: tar.TypeFifo}), want: "fifos are not allowed"},
		{name: "file naming root", archive: tarOf(reg(".", "x")), want: "names the target folder itself"},
		// bombs and caps
		{name: "bytes cap", archive: zstdOf(reg("a", "x"), ent{name: "bomb", size: 2 << 20}),
			opts: func(o *Options) { o.MaxBytes = 1 << 20 }, want: "past the 1048576-byte cap"},
		{name: "entries cap", archive: zstdOf(reg("1", ""), reg("2", ""), reg("3", ""), reg("4", "")),
			opts: func(o *Options) { o.MaxEntries = 3 }, want: `entry 4 "4": the archive has more than 3 entries`},
		{name: "zstd window bomb", archive: func(tb testing.TB) []byte {
			noise := make([]byte, 3<<20)
			r := rand.New(rand.NewPCG(1, 2))
			for i := range noise {
				noise[i] = byte(r.Uint32())
			}
			return zstdBytes(tb, buildTar(tb, ent{name: "big", body: string(noise)}), zstd.WithWindowSize(8<<20))
		}, opts: func(o *Options) { o.MaxDecoderMemory = 1 << 20 }, want: "decoder memory"},
		// broken streams
		{name: "truncated zstd", archive: func(tb testing.TB) []byte {
			b := zstdBytes(tb, buildTar(tb, reg("a", strings.Repeat("abc", 100000)), reg("b", "x")))
			return b[:len(b)/2]
		}, want: "truncated"},
		{name: "truncated gzip", archive: func(tb testing.TB) []byte {
			b := gzipBytes(tb, buildTar(tb, reg("a", strings.Repeat("abc", 100000)), reg("b", "x")))
			return b[:len(b)/2]
		}, want: "truncated"},
		{name: "truncated tar mid-file", archive: func(tb testing.TB) []byte {
			b := buildTar(tb, reg("a", strings.Repeat("abc", 1000)))
			return b[:2500] // PAX header (1024) + header (512) + part of the data
		}, want: `in the data of entry 1 "a": the archive is truncated`},
		{name: "tar cut at entry boundary", archive: func(tb testing.TB) []byte {
			b := buildTar(tb, reg("a", "x"), reg("b", "y"))
			return b[:len(b)-1024] // drop the end-of-archive marker
		}, want: "end-of-archive marker"},
		{name: "tar cut at entry boundary after zeros", archive: func(tb testing.TB) []byte {
			b := buildTar(tb, reg("a", "x"), reg("b", strings.Repeat("\x00", 4096)), reg("c", "y"))
			i := bytes.LastIndex(b, bytes.Repeat([]byte{0}, 4096))
			return b[:i+4096] // entries c and the marker gone; the tail is all zeros
		}, want: `ends after entry 2 "b" without its end-of-archive marker`},
		{name: "tar with a lone zero block", archive: func(tb testing.TB) []byte {
			b := buildTar(tb, reg("a", "x"))
			return b[:len(b)-512]
		}, want: "end-of-archive marker"},
		// bytes after the end, the checksum taken over them: verify refuses
		// such archives, so restore does too
		{name: "garbage after zstd", archive: func(tb testing.TB) []byte {
			return append(zstdBytes(tb, buildTar(tb, reg("a", "x"))), "trailing garbage"...)
		}, want: "does not end cleanly after its tar stream"},
		{name: "zeros after zstd", archive: func(tb testing.TB) []byte {
			return append(zstdBytes(tb, buildTar(tb, reg("a", "x"))), make([]byte, 64)...)
		}, want: "does not end cleanly after its tar stream"},
		{name: "garbage after gzip", archive: func(tb testing.TB) []byte {
			return append(gzipBytes(tb, buildTar(tb, reg("a", "x"))), "trailing garbage"...)
		}, want: "does not end cleanly after its tar stream"},
		{name: "garbage after tar", archive: func(tb testing.TB) []byte {
			return append(buildTar(tb, reg("a", "x")), "trailing garbage"...)
		}, want: "non-zero data"},
		{name: "garbage", archive: func(tb testing.TB) []byte { return bytes.Repeat([]byte("garbage!"), 200) }, want: "not a tar archive"},
		{name: "xz", archive: func(tb testing.TB) []byte { return append([]byte{0xfd, '7', 'z', 'X', 'Z', 0}, make([]byte, 600)...) }, want: "(xz)"},
		{name: "empty file", archive: func(tb testing.TB) []byte { return nil }, want: "archive is empty"},
		// checksum
		{name: "bad checksum", archive: zstdOf(reg("a", "x")), sha: strings.Repeat("0", 64), want: "nothing was extracted", is: ErrChecksum},
	}
}

func TestRefusals(t *testing.T) {
	for _, layout := range []Layout{LayoutBeside, LayoutInside} {
		t.Run(string(layout), func(t *testing.T) {
			for _, tc := range badCases() {
				t.Run(tc.name, func(t *testing.T) {
					s := newScene(t, true)
					path, sum := writeArchive(t, tc.archive(t))
					if tc.sha != "" {
						sum = tc.sha
					}
					o := Options{Archive: path, SHA256: sum, Into: s.world, Replace: true, Layout: layout}
					if tc.opts != nil {
						tc.opts(&o)
					}
					before := snapshot(t, s.tmp)
					_, err := Restore(t.Context(), nil, o)
					if err == nil {
						t.Fatal("archive was not refused")
					}
					is := tc.is
					if is == nil {
						is = ErrRefused
					}
					if !errors.Is(err, is) {
						t.Errorf("error %q is not %v", err, is)
					}
					if testing.Verbose() {
						t.Logf("refused: %v", err)
					}
					if !strings.Contains(err.Error(), tc.want) {
						t.Errorf("error %q does not say %q", err, tc.want)
					}
					if d := diffSnapshots(before, snapshot(t, s.tmp)); d != "" {
						t.Errorf("refused archive changed the target or its siblings:\n%s", d)
					}
					if _, err := os.Lstat(absEvil); err == nil {
						t.Errorf("%s was created", absEvil)
					}
				})
			}
		})
	}
}

func TestNotEmptyNeedsReplace(t *testing.T) {
	s := newScene(t, true)
	path, sum := writeArchive(t, zstdBytes(t, buildTar(t, reg("level.dat", "new"))))
	before := snapshot(t, s.tmp)
	_, err := Restore(t.Context(), nil, Options{Archive: path, SHA256: sum, Into: s.world})
	if err == nil || !strings.Contains(err.Error(), "--replace") {
		t.Fatalf("Restore into a non-empty folder without Replace: %v; want an error asking for --replace", err)
	}
	if d := diffSnapshots(before, snapshot(t, s.tmp)); d != "" {
		t.Errorf("target changed:\n%s", d)
	}
}

func TestArchiveInsideTarget(t *testing.T) {
	s := newScene(t, true)
	data := zstdBytes(t, buildTar(t, reg("level.dat", "new")))
	path := filepath.Join(s.world, "backup.tar.zst")
	must(t, os.WriteFile(path, data, 0o644))
	_, err := Restore(t.Context(), nil, Options{Archive: path, SHA256: sha(data), Into: s.world, Replace: true})
	if err == nil || !strings.Contains(err.Error(), "lies inside the target folder") {
		t.Fatalf("got %v, want a refusal of an archive inside DIR", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("archive gone: %v", err)
	}
}

func TestOptionsValidate(t *testing.T) {
	raw := Options{Archive: "a.tar.zst", SHA256: strings.Repeat("AB", 32), Into: "/world"}
	if err := raw.Validate(); err != nil {
		t.Fatalf("valid options (before defaults) refused: %v", err)
	}
	good := raw.withDefaults()
	if err := good.Validate(); err != nil {
		t.Fatalf("valid options refused: %v", err)
	}
	if good.SHA256 != strings.Repeat("ab", 32) {
		t.Errorf("checksum not lower-cased: %s", good.SHA256)
	}
	if good.MaxBytes != 64<<30 || good.MaxEntries != 1_000_000 || good.MaxDecoderMemory != 128<<20 {
		t.Errorf("defaults = %d bytes, %d entries, %d decoder memory", good.MaxBytes, good.MaxEntries, good.MaxDecoderMemory)
	}
	for _, tc := range []struct {
		name string
		mod  func(*Options)
		want string
	}{
		{"no archive", func(o *Options) { o.Archive = "" }, "--archive"},
		{"no sha", func(o *Options) { o.SHA256 = "" }, "--sha256"},
		{"short sha", func(o *Options) { o.SHA256 = "abc" }, "64 hex digits"},
		{"no into", func(o *Options) { o.Into = "" }, "--into"},
		{"root", func(o *Options) { o.Into = "//" }, "whole filesystem"},
		{"negative bytes", func(o *Options) { o.MaxBytes = -1 }, "--max-bytes"},
		{"negative entries", func(o *Options) { o.MaxEntries = -1 }, "--max-entries"},
		{"tiny decoder", func(o *Options) { o.MaxDecoderMemory = 1000 }, "1 MiB"},
		{"layout", func(o *Options) { o.Layout = "sideways" }, "layout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := good
			tc.mod(&o)
			err := o.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate = %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
}

func TestCleanName(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{"a/b", "a/b", ""},
		{"./a//b/", "a/b", ""},
		{"./", "", ""},
		{".", "", ""},
		{"a/./b", "a/b", ""},
		{"a\\..\\b", `a\..\b`, ""}, // backslash is an ordinary character on Linux
		{"..", "", `".."`},
		{"a/..", "", `".."`},
		{"/a", "", "absolute"},
		{"a\x00b", "", "NUL"},
		{"", "", "empty"},
		{".worldbackup-staging-x/y", "", "reserved"},
		{"a/.worldbackup-previous", "a/.worldbackup-previous", ""},
	} {
		got, err := cleanName(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("cleanName(%q) = %q, %v; want error %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("cleanName(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}
