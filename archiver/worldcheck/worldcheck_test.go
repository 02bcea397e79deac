package worldcheck

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// now is after every timestamp worldgen writes.
var testNow = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func check(t *testing.T, dir string, o Options) Result {
	t.Helper()
	if o.Now.IsZero() {
		o.Now = testNow
	}
	res, err := Check(t.Context(), dir, o)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	return res
}

func TestGeneratedWorldPasses(t *testing.T) {
	dir := world(t)
	res := check(t, dir, Options{})
	if res.Status != StatusOK || res.ProblemsTotal != 0 {
		t.Fatalf("a generated world fails: %+v", res.Problems)
	}
	if res.ChunksChecked == 0 || res.ChunksChecked != res.Chunks {
		t.Fatalf("checked %d of %d chunks, want all", res.ChunksChecked, res.Chunks)
	}
	if res.LevelFiles != 3 || res.PlayerFiles != 3 || res.Regions < 3 {
		t.Fatalf("found %d level.dat, %d player files, %d regions; want 3, 3, >= 3", res.LevelFiles, res.PlayerFiles, res.Regions)
	}

	t.Run("sample", func(t *testing.T) {
		s := check(t, dir, Options{Share: 0.1, Seed: 1})
		if s.Status != StatusOK {
			t.Fatalf("sample fails: %+v", s.Problems)
		}
		if s.ChunksChecked >= res.Chunks || s.ChunksChecked < int64(s.Regions) {
			t.Fatalf("a 10%% sample checked %d of %d chunks in %d regions", s.ChunksChecked, res.Chunks, s.Regions)
		}
	})
}

// corruption damages a copy of the generated world at a place drawn from r
// and says which file (relative) and chunk must be named, and a word the
// problem must contain.
type corruption func(t *testing.T, r *rand.Rand, dir string) (file string, chunk *[2]int, word string)

func corruptions() map[string]corruption {
	return map[string]corruption{
		"flipped byte in a chunk's payload": func(t *testing.T, r *rand.Rand, dir string) (string, *[2]int, string) {
			path := pick(r, regions(t, dir))
			e := pick(r, table(t, path))
			off := e.sector*sectorSize + 5 + r.Int64N(e.length-1)
			b := readAt(t, path, off, 1)
			b[0] ^= byte(1 + r.IntN(255))
			patch(t, path, off, b)
			xz := chunkXZ(path, e.slot)
			return rel(t, dir, path), &xz, "decompress"
		},
		"truncated region file": func(t *testing.T, r *rand.Rand, dir string) (string, *[2]int, string) {
			path := pick(r, regions(t, dir))
			fi, _ := os.Stat(path)
			if err := os.Truncate(path, headerSize+r.Int64N(fi.Size()-headerSize)); err != nil {
				t.Fatal(err)
			}
			return rel(t, dir, path), nil, "truncated"
		},
		"overlapping table entry": func(t *testing.T, r *rand.Rand, dir string) (string, *[2]int, string) {
			path := pick(r, regions(t, dir))
			es := table(t, path)
			a, b := r.IntN(len(es)), r.IntN(len(es)-1)
			if b >= a {
				b++
			}
			loc := readAt(t, path, int64(4*es[a].slot), 4)
			// b starts inside a's sectors
			start := es[a].sector + r.Int64N(es[a].count)
			binary.BigEndian.PutUint32(loc, uint32(start<<8|es[b].count))
			patch(t, path, int64(4*es[b].slot), loc)
			return rel(t, dir, path), nil, "overlap"
		},
		"chunk at the wrong coordinates": func(t *testing.T, r *rand.Rand, dir string) (string, *[2]int, string) {
			path := pick(r, regions(t, dir))
			es := table(t, path)
			a, b := r.IntN(len(es)), r.IntN(len(es)-1)
			if b >= a {
				b++
			}
			la, lb := readAt(t, path, int64(4*es[a].slot), 4), readAt(t, path, int64(4*es[b].slot), 4)
			patch(t, path, int64(4*es[a].slot), lb)
			patch(t, path, int64(4*es[b].slot), la)
			xz := chunkXZ(path, es[a].slot)
			return rel(t, dir, path), &xz, "wrong slot"
		},
		"broken level.dat": func(t *testing.T, r *rand.Rand, dir string) (string, *[2]int, string) {
			path := filepath.Join(dir, pick(r, []string{"world", "world_nether", "world_the_end"}), "level.dat")
			fi, _ := os.Stat(path)
			off := 10 + r.Int64N(fi.Size()-10) // past the gzip header's unchecked fields
			b := readAt(t, path, off, 1)
			b[0] ^= byte(1 + r.IntN(255))
			patch(t, path, off, b)
			return rel(t, dir, path), nil, ""
		},
		"truncated player file": func(t *testing.T, r *rand.Rand, dir string) (string, *[2]int, string) {
			path := pick(r, players(t, dir))
			fi, _ := os.Stat(path)
			if err := os.Truncate(path, r.Int64N(fi.Size())); err != nil {
				t.Fatal(err)
			}
			return rel(t, dir, path), nil, ""
		},
	}
}

// TestCorruptionFound damages copies of a generated world at seeded random
// places and checks the full check names each one.
func TestCorruptionFound(t *testing.T) {
	const places = 8
	for name, damage := range corruptions() {
		t.Run(name, func(t *testing.T) {
			for seed := range uint64(places) {
				dir := world(t)
				r := rand.New(rand.NewPCG(seed, 26))
				file, chunk, word := damage(t, r, dir)
				res := check(t, dir, Options{})
				if res.Status != StatusFailed {
					t.Fatalf("seed %d: %s in %s not found", seed, name, file)
				}
				if !named(res.Problems, file, chunk, word) {
					t.Fatalf("seed %d: no problem names %s chunk %v with %q: %v", seed, file, chunk, word, res.Problems)
				}
			}
		})
	}
}

func named(ps []Problem, file string, chunk *[2]int, word string) bool {
	for _, p := range ps {
		if p.File == file && (chunk == nil || (p.Chunk != nil && *p.Chunk == *chunk)) && strings.Contains(p.What, word) {
			return true
		}
	}
	return false
}

func TestChunkFormats(t *testing.T) {
	tests := []struct {
		name  string
		comp  byte
		doc   func(t *testing.T) []byte
		mcc   bool
		want  string // "" passes
		stamp uint32
	}{
		{name: "gzip", comp: 1},
		{name: "zlib", comp: 2},
		{name: "none", comp: 3},
		{name: "lz4", comp: 4},
		{name: "external zlib", comp: 2, mcc: true},
		{name: "external lz4", comp: 4, mcc: true},
		{name: "unknown compression", comp: 9, want: "unknown compression type 9"},
		{name: "wrong coordinates", comp: 2, doc: func(t *testing.T) []byte { return chunkNBT(t, 7, 7) }, want: "wrong slot"},
		{name: "no coordinates", comp: 3, doc: func(t *testing.T) []byte { return gzipFree(t, map[string]any{"DataVersion": int32(1)}) }, want: "no xPos/zPos"},
		{name: "coordinates only nested", comp: 3, doc: func(t *testing.T) []byte {
			return gzipFree(t, map[string]any{"structures": map[string]any{"xPos": int32(-31), "zPos": int32(65)},
				"block_entities": []map[string]any{{"xPos": int32(-31), "zPos": int32(65)}}})
		}, want: "no xPos/zPos"},
		{name: "old format", comp: 2, doc: func(t *testing.T) []byte {
			return gzipFree(t, map[string]any{"Level": map[string]any{"xPos": int32(-31), "zPos": int32(65)}})
		}},
		{name: "future timestamp", comp: 2, stamp: uint32(testNow.Add(48 * time.Hour).Unix()), want: "in the future"},
		{name: "deep nesting", comp: 3, doc: func(t *testing.T) []byte { return nested(600) }, want: "deeper than 512"},
		{name: "huge array", comp: 3, doc: func(t *testing.T) []byte {
			return []byte{tagCompound, 0, 0, tagByteArray, 0, 1, 'a', 0x7f, 0xff, 0xff, 0xff, 1, 2, tagEnd}
		}, want: "runs past the end"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "level.dat"), gzipNBT(t, map[string]any{"Data": map[string]any{"DataVersion": int32(4189)}}))
			const slot = 33 // (1, 1) of region (-1, 2): chunk (-31, 65)
			doc := chunkNBT(t, -31, 65)
			if tc.doc != nil {
				doc = tc.doc(t)
			}
			payload, comp := compress(t, tc.comp, doc), tc.comp
			if tc.comp > 4 {
				payload = doc
			}
			if tc.mcc {
				writeFile(t, filepath.Join(dir, "region", "c.-31.65.mcc"), payload)
				payload, comp = nil, comp|128
			}
			stamp := tc.stamp
			if stamp == 0 {
				stamp = uint32(testNow.Add(-time.Hour).Unix())
			}
			writeFile(t, filepath.Join(dir, "region", "r.-1.2.mca"), regionFile(map[int][]byte{slot: payload}, map[int]byte{slot: comp}, stamp))
			res := check(t, dir, Options{})
			if res.ChunksChecked != 1 {
				t.Fatalf("checked %d chunks, want 1", res.ChunksChecked)
			}
			if tc.want == "" {
				if res.Status != StatusOK {
					t.Fatalf("problems: %v", res.Problems)
				}
				return
			}
			if !named(res.Problems, "region/r.-1.2.mca", &[2]int{-31, 65}, tc.want) {
				t.Fatalf("want a problem of chunk (-31, 65) saying %q, got %v", tc.want, res.Problems)
			}
		})
	}
}

// gzipFree encodes v as plain (uncompressed) NBT.
func gzipFree(t *testing.T, v any) []byte {
	var b strings.Builder
	if err := nbtEncode(&b, v); err != nil {
		t.Fatal(err)
	}
	return []byte(b.String())
}

// nested is a compound holding depth nested lists of lists.
func nested(depth int) []byte {
	b := []byte{tagCompound, 0, 0, tagList, 0, 1, 'l'}
	for range depth {
		b = append(b, tagList, 0, 0, 0, 1)
	}
	b = append(b, tagEnd, 0, 0, 0, 0, tagEnd)
	return b
}

func TestFiles(t *testing.T) {
	level := func(v any) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "level.dat"), gzipNBT(t, v)) }
	}
	good := level(map[string]any{"Data": map[string]any{"DataVersion": int32(4189)}})
	tests := []struct {
		name       string
		setup      func(t *testing.T, dir string)
		file, want string
	}{
		{"no level.dat", func(t *testing.T, dir string) {}, ".", "no level.dat"},
		{"level.dat without DataVersion", level(map[string]any{"Data": map[string]any{"LevelName": "w"}}), "level.dat", "no Data.DataVersion"},
		{"level.dat not gzip", func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "level.dat"), []byte("hello")) }, "level.dat", "not gzip"},
		{"level.dat gzip bomb", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "level.dat"), gzipBytes(t, make([]byte, MaxDocument+10)))
		}, "level.dat", "more than"},
		{"player file not NBT", func(t *testing.T, dir string) {
			good(t, dir)
			writeFile(t, filepath.Join(dir, "playerdata", "p.dat"), gzipBytes(t, []byte{tagCompound, 0, 0, 99}))
		}, "playerdata/p.dat", "not NBT"},
		{"region shorter than its header", func(t *testing.T, dir string) {
			good(t, dir)
			writeFile(t, filepath.Join(dir, "region", "r.0.0.mca"), make([]byte, 100))
		}, "region/r.0.0.mca", "shorter than"},
		{"entry inside the header", func(t *testing.T, dir string) {
			good(t, dir)
			b := make([]byte, 3*sectorSize)
			binary.BigEndian.PutUint32(b, 1<<8|1)
			writeFile(t, filepath.Join(dir, "region", "r.0.0.mca"), b)
		}, "region/r.0.0.mca", "into the location table"},
		{"sector count does not match the length", func(t *testing.T, dir string) {
			good(t, dir)
			b := regionFile(map[int][]byte{0: compress(t, 2, chunkNBT(t, 0, 0))}, map[int]byte{0: 2}, 1)
			b = append(b, make([]byte, sectorSize)...)
			binary.BigEndian.PutUint32(b, 2<<8|uint32(len(b)/sectorSize-2))
			writeFile(t, filepath.Join(dir, "region", "r.0.0.mca"), b)
		}, "region/r.0.0.mca", "needs 1"},
		{"missing external chunk", func(t *testing.T, dir string) {
			good(t, dir)
			writeFile(t, filepath.Join(dir, "region", "r.0.0.mca"), regionFile(map[int][]byte{0: nil}, map[int]byte{0: 130}, 1))
		}, "region/r.0.0.mca", "c.0.0.mcc is missing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.setup(t, dir)
			res := check(t, dir, Options{})
			if tc.file == "." {
				tc.file = filepath.Base(dir)
			}
			if !named(res.Problems, tc.file, nil, tc.want) {
				t.Fatalf("want a problem of %s saying %q, got %v", tc.file, tc.want, res.Problems)
			}
		})
	}
}

func TestProblemListBounded(t *testing.T) {
	dir := t.TempDir()
	for i := range 20 {
		writeFile(t, filepath.Join(dir, fmt.Sprintf("w%d", i), "level.dat"), []byte("x"))
	}
	res := check(t, dir, Options{MaxProblems: 5})
	if len(res.Problems) != 5 || res.ProblemsTotal != 20 {
		t.Fatalf("kept %d of %d problems, want 5 of 20", len(res.Problems), res.ProblemsTotal)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []Options{{Share: 1.5}, {Share: -0.1}, {FutureTolerance: -1}, {MaxProblems: -1}} {
		if _, err := Check(t.Context(), t.TempDir(), o); err == nil {
			t.Errorf("Check accepted %+v", o)
		}
	}
}

// TestSampleChecksNewest damages each region's newest chunk (by timestamp)
// in turn: a 1% sample must still find it. It logs the sample's detection
// rate of damage to random chunks.
func TestSampleChecksNewest(t *testing.T) {
	for seed := range uint64(6) {
		dir := world(t)
		r := rand.New(rand.NewPCG(seed, 7))
		path := pick(r, regions(t, dir))
		head := readAt(t, path, sectorSize, sectorSize)
		es := table(t, path)
		newest := es[0]
		for _, e := range es {
			if binary.BigEndian.Uint32(head[4*e.slot:]) > binary.BigEndian.Uint32(head[4*newest.slot:]) {
				newest = e
			}
		}
		off := newest.sector*sectorSize + 5 + r.Int64N(newest.length-1)
		b := readAt(t, path, off, 1)
		b[0] ^= 0xff
		patch(t, path, off, b)
		xz := chunkXZ(path, newest.slot)
		res := check(t, dir, Options{Share: 0.01, Seed: seed})
		if !named(res.Problems, rel(t, dir, path), &xz, "decompress") {
			t.Fatalf("seed %d: a 1%% sample missed the newest chunk %v of %s: %v", seed, xz, rel(t, dir, path), res.Problems)
		}
	}

	found, tries := 0, 40
	flip := corruptions()["flipped byte in a chunk's payload"]
	for seed := range uint64(tries) {
		dir := world(t)
		file, chunk, _ := flip(t, rand.New(rand.NewPCG(seed, 8)), dir)
		if named(check(t, dir, Options{Share: 0.1, Seed: seed}).Problems, file, chunk, "") {
			found++
		}
	}
	t.Logf("a 10%% sample found %d of %d flipped chunks", found, tries)
}
