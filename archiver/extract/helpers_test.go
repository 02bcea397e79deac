package extract

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// ent is one member of a test archive.
type ent struct {
	name string
	typ  byte // tar.TypeReg when 0
	body string
	link string
	mode int64
	size int64 // declared size of a zero-filled body when body is ""
	uid  int
}

func reg(name, body string) ent    { return ent{name: name, body: body} }
func dir(name string) ent          { return ent{name: name, typ: tar.TypeDir, mode: 0o755} }
func sym(name, target string) ent  { return ent{name: name, typ: tar.TypeSymlink, link: target} }
func hard(name, target string) ent { return ent{name: name, typ: tar.TypeLink, link: target} }

var testTime = time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC)

// buildTar writes ents as a PAX tar stream without validating anything.
func buildTar(tb testing.TB, ents ...ent) []byte {
	tb.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range ents {
		h := &tar.Header{
			Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: e.mode,
			ModTime: testTime, Uid: e.uid, Gid: e.uid, Format: tar.FormatPAX,
		}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		body := []byte(e.body)
		if h.Typeflag == tar.TypeReg {
			if e.body == "" && e.size > 0 {
				body = make([]byte, e.size)
			}
			h.Size = int64(len(body))
		}
		if err := tw.WriteHeader(h); err != nil {
			tb.Fatalf("writing header %q: %v", e.name, err)
		}
		if _, err := tw.Write(body); err != nil {
			tb.Fatalf("writing %q: %v", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

func zstdBytes(tb testing.TB, data []byte, opts ...zstd.EOption) []byte {
	tb.Helper()
	var b bytes.Buffer
	w, err := zstd.NewWriter(&b, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

func gzipBytes(tb testing.TB, data []byte) []byte {
	tb.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if _, err := w.Write(data); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

func sha(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// writeArchive stores data in a folder of its own and returns its path and SHA-256.
func writeArchive(tb testing.TB, data []byte) (string, string) {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), "world.tar")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		tb.Fatal(err)
	}
	return p, sha(data)
}

// snapshot describes every path under root (symlinks not followed): type,
// permissions, content hash or link target. Folder mtimes are left out (a
// staging folder created and removed beside DIR changes its parent's).
func snapshot(tb testing.TB, root string) map[string]string {
	tb.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		desc := fmt.Sprintf("%v", fi.Mode())
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += " " + sha(b) + " " + fi.ModTime().UTC().Format(time.RFC3339Nano)
		case fi.Mode()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc += " -> " + l
		}
		m[rel] = desc
		return nil
	})
	if err != nil {
		tb.Fatalf("snapshot of %s: %v", root, err)
	}
	return m
}

func diffSnapshots(before, after map[string]string) string {
	var d []string
	for k, v := range before {
		if w, ok := after[k]; !ok {
			d = append(d, "removed "+k)
		} else if w != v {
			d = append(d, fmt.Sprintf("changed %s: %s -> %s", k, v, w))
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			d = append(d, "added "+k)
		}
	}
	sort.Strings(d)
	return strings.Join(d, "\n")
}

// scene is a playground: tmp/world (DIR, with an old world in it),
// tmp/sentinel/secret (a sibling that must never change).
type scene struct {
	tmp, world, sentinel string
}

func newScene(tb testing.TB, withOldWorld bool) scene {
	tb.Helper()
	tmp := tb.TempDir()
	s := scene{tmp: tmp, world: filepath.Join(tmp, "world"), sentinel: filepath.Join(tmp, "sentinel")}
	must(tb, os.MkdirAll(filepath.Join(s.sentinel, "sub"), 0o755))
	must(tb, os.WriteFile(filepath.Join(s.sentinel, "secret"), []byte("do not touch"), 0o600))
	must(tb, os.MkdirAll(s.world, 0o755))
	if withOldWorld {
		must(tb, os.MkdirAll(filepath.Join(s.world, "region"), 0o755))
		must(tb, os.WriteFile(filepath.Join(s.world, "level.dat"), []byte("old level"), 0o600))
		must(tb, os.WriteFile(filepath.Join(s.world, "region", "r.0.0.mca"), []byte("old region"), 0o644))
	}
	return s
}

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

// treeEntry is what a round trip must preserve of one path.
type treeEntry struct {
	typ   fs.FileMode
	perm  fs.FileMode
	data  string // content hash or link target
	mtime time.Time
	uid   uint32
	gid   uint32
	ino   uint64
}

func readTree(tb testing.TB, root string) map[string]treeEntry {
	tb.Helper()
	m := map[string]treeEntry{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		e := treeEntry{typ: fi.Mode().Type(), perm: fi.Mode().Perm(), mtime: fi.ModTime(), uid: st.Uid, gid: st.Gid, ino: st.Ino}
		switch {
		case fi.Mode().IsRegular():
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			h := sha256.New()
			_, err = io.Copy(h, f)
			f.Close()
			if err != nil {
				return err
			}
			e.data = hex.EncodeToString(h.Sum(nil))
		case fi.Mode()&fs.ModeSymlink != 0:
			e.data, _ = os.Readlink(p)
		}
		m[rel] = e
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// sameTree compares two trees: types, permissions, contents, link targets,
// mtimes (to mtimeGrain), owners when asked, and which paths share an
// inode (hardlinks).
func sameTree(tb testing.TB, src, dst string, owners, checkRoot bool, mtimeGrain time.Duration) {
	tb.Helper()
	a, b := readTree(tb, src), readTree(tb, dst)
	if !checkRoot {
		delete(a, ".")
		delete(b, ".")
	}
	groupsA, groupsB := map[uint64][]string{}, map[uint64][]string{}
	for p, ea := range a {
		eb, ok := b[p]
		if !ok {
			tb.Errorf("%s missing from the restored tree", p)
			continue
		}
		if ea.typ != eb.typ || ea.perm != eb.perm || ea.data != eb.data {
			tb.Errorf("%s differs: source %v %v %q, restored %v %v %q", p, ea.typ, ea.perm, ea.data, eb.typ, eb.perm, eb.data)
		}
		if !ea.mtime.Truncate(mtimeGrain).Equal(eb.mtime.Truncate(mtimeGrain)) {
			tb.Errorf("%s mtime: source %v, restored %v", p, ea.mtime, eb.mtime)
		}
		if owners && (ea.uid != eb.uid || ea.gid != eb.gid) {
			tb.Errorf("%s owner: source %d:%d, restored %d:%d", p, ea.uid, ea.gid, eb.uid, eb.gid)
		}
		if ea.typ == 0 {
			groupsA[ea.ino] = append(groupsA[ea.ino], p)
			groupsB[eb.ino] = append(groupsB[eb.ino], p)
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			tb.Errorf("%s restored but not in the source", p)
		}
	}
	norm := func(g map[uint64][]string) []string {
		var out []string
		for _, ps := range g {
			if len(ps) > 1 {
				sort.Strings(ps)
				out = append(out, strings.Join(ps, "="))
			}
		}
		sort.Strings(out)
		return out
	}
	if fmt.Sprint(norm(groupsA)) != fmt.Sprint(norm(groupsB)) {
		tb.Errorf("hardlink groups differ: source %v, restored %v", norm(groupsA), norm(groupsB))
	}
}
