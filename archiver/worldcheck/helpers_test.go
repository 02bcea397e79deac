package worldcheck

import (
	"bytes"
	"encoding/binary"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/Tnze/go-mc/nbt"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
	"github.com/pierrec/lz4/v4"

	"github.com/worldbackup/worldbackup/internal/worldgen"
)

// generated is a synthetic server folder written once per test binary;
// tests corrupt copies of it.
var generated struct {
	once sync.Once
	dir  string
	err  error
}

func world(t testing.TB) string {
	t.Helper()
	generated.once.Do(func() {
		generated.dir, generated.err = os.MkdirTemp("", "worldcheck-")
		if generated.err == nil {
			_, generated.err = worldgen.Generate(generated.dir, worldgen.Options{Size: 3 << 20, Seed: 26, Players: 3})
		}
	})
	if generated.err != nil {
		t.Fatalf("generating the world: %v", generated.err)
	}
	dst := t.TempDir()
	err := filepath.WalkDir(generated.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(generated.dir, path)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestMain(m *testing.M) {
	code := m.Run()
	if generated.dir != "" {
		os.RemoveAll(generated.dir)
	}
	os.Exit(code)
}

// slotEntry is a used slot of a region file's table, as the test sees it.
type slotEntry struct {
	slot          int
	sector, count int64
	length        int64 // the chunk's length field
}

func table(t testing.TB, path string) []slotEntry {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []slotEntry
	for slot := range 1024 {
		loc := binary.BigEndian.Uint32(b[4*slot:])
		if loc == 0 {
			continue
		}
		e := slotEntry{slot: slot, sector: int64(loc >> 8), count: int64(loc & 0xff)}
		e.length = int64(binary.BigEndian.Uint32(b[e.sector*sectorSize:]))
		out = append(out, e)
	}
	return out
}

// regions lists the world's r.X.Z.mca files under region/ folders.
func regions(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && regionName.MatchString(d.Name()) && filepath.Base(filepath.Dir(path)) == "region" {
			out = append(out, path)
		}
		return nil
	})
	if len(out) == 0 {
		t.Fatal("the world has no region files")
	}
	return out
}

func players(t testing.TB, dir string) []string {
	t.Helper()
	out, _ := filepath.Glob(filepath.Join(dir, "world", "playerdata", "*.dat"))
	if len(out) == 0 {
		t.Fatal("the world has no player files")
	}
	return out
}

// chunkXZ is the absolute coordinates of slot in the region file path.
func chunkXZ(path string, slot int) [2]int {
	var rx, rz int
	m := regionName.FindStringSubmatch(filepath.Base(path))
	rx, rz = atoi(m[1]), atoi(m[2])
	return [2]int{rx*32 + slot%32, rz*32 + slot/32}
}

func atoi(s string) int {
	n, neg := 0, strings.HasPrefix(s, "-")
	for _, c := range strings.TrimPrefix(s, "-") {
		n = 10*n + int(c-'0')
	}
	if neg {
		return -n
	}
	return n
}

func rel(t testing.TB, dir, path string) string {
	t.Helper()
	r, err := filepath.Rel(dir, path)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.ToSlash(r)
}

func pick[T any](r *rand.Rand, s []T) T { return s[r.IntN(len(s))] }

// chunkNBT is a minimal chunk document at (x, z).
func chunkNBT(t testing.TB, x, z int32) []byte {
	t.Helper()
	var b bytes.Buffer
	v := struct {
		DataVersion int32   `nbt:"DataVersion"`
		XPos        int32   `nbt:"xPos"`
		ZPos        int32   `nbt:"zPos"`
		Status      string  `nbt:"Status"`
		Heights     []int64 `nbt:"heights"`
	}{4189, x, z, "minecraft:full", []int64{1, 2, 3}}
	if err := nbt.NewEncoder(&b).Encode(v, ""); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// compress returns doc compressed by the chunk compression type comp.
func compress(t testing.TB, comp byte, doc []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	switch comp {
	case 1:
		w := gzip.NewWriter(&b)
		w.Write(doc)
		w.Close()
	case 2:
		w := zlib.NewWriter(&b)
		w.Write(doc)
		w.Close()
	case 3:
		b.Write(doc)
	case 4: // lz4-java's LZ4BlockOutputStream: one block, then the end mark
		out := make([]byte, lz4.CompressBlockBound(len(doc)))
		n, err := lz4.CompressBlock(doc, out, nil)
		if err != nil || n == 0 {
			t.Fatalf("lz4: %v (%d)", err, n)
		}
		b.WriteString(lz4Magic)
		b.WriteByte(lz4Block | 6) // 64 KiB blocks
		b.Write(binary.LittleEndian.AppendUint32(nil, uint32(n)))
		b.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(doc))))
		b.Write(make([]byte, 4))
		b.Write(out[:n])
		b.WriteString(lz4Magic)
		b.WriteByte(lz4Raw | 6)
		b.Write(make([]byte, 12))
	}
	return b.Bytes()
}

// regionFile builds a region file of one chunk per given slot, each
// payload stored with the given compression byte.
func regionFile(chunks map[int][]byte, comp map[int]byte, stamp uint32) []byte {
	out := make([]byte, headerSize)
	sector := int64(2)
	for slot := range 1024 {
		data, ok := chunks[slot]
		if !ok {
			continue
		}
		n := (4 + 1 + int64(len(data)) + sectorSize - 1) / sectorSize
		binary.BigEndian.PutUint32(out[4*slot:], uint32(sector<<8|n))
		binary.BigEndian.PutUint32(out[sectorSize+4*slot:], stamp)
		chunk := binary.BigEndian.AppendUint32(nil, uint32(len(data)+1))
		chunk = append(chunk, comp[slot])
		chunk = append(chunk, data...)
		chunk = append(chunk, make([]byte, n*sectorSize-int64(len(chunk)))...)
		out = append(out, chunk...)
		sector += n
	}
	return out
}

// gzipNBT returns v as gzip NBT.
func gzipNBT(t testing.TB, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	if err := nbt.NewEncoder(w).Encode(v, ""); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return b.Bytes()
}

func writeFile(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func patch(t testing.TB, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func readAt(t testing.TB, path string, off int64, n int) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := io.ReadFull(io.NewSectionReader(f, off, int64(n)), b); err != nil {
		t.Fatal(err)
	}
	return b
}

func nbtEncode(w io.Writer, v any) error { return nbt.NewEncoder(w).Encode(v, "") }

func gzipBytes(t testing.TB, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	w := gzip.NewWriter(&out)
	w.Write(b)
	w.Close()
	return out.Bytes()
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
