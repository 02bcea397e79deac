package worldgen

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// treeHash hashes every entry under dir: path, type, mode, modification
// time, and the content of regular files.
func treeHash(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fmt.Fprintf(h, "%s\x00%v\x00%d\x00%d\n", filepath.ToSlash(rel), fi.Mode(), fi.ModTime().UnixNano(), fi.Size())
		if fi.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			if _, err := io.Copy(h, f); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// walkStats counts the regular files under dir and their bytes.
func walkStats(t *testing.T, dir string) Stats {
	t.Helper()
	var st Stats
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st.Files++
		st.Bytes += fi.Size()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func generate(t *testing.T, o Options) (string, Stats) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "server")
	st, err := Generate(dir, o)
	if err != nil {
		t.Fatalf("Generate(%+v): %v", o, err)
	}
	return dir, st
}

func TestDeterministic(t *testing.T) {
	// Not parallel: it changes GOMAXPROCS to show that the number of
	// workers does not change the output.
	o := Options{Size: 6 << 20, Seed: 7}
	prev := runtime.GOMAXPROCS(1)
	a, _ := generate(t, o)
	runtime.GOMAXPROCS(4)
	b, _ := generate(t, o)
	runtime.GOMAXPROCS(prev)
	c, _ := generate(t, Options{Size: 6 << 20, Seed: 8})

	ha, hb, hc := treeHash(t, a), treeHash(t, b), treeHash(t, c)
	if ha != hb {
		t.Errorf("seed 7 twice (1 and 4 workers): tree hashes differ: %s vs %s", ha, hb)
	}
	if ha == hc {
		t.Errorf("seeds 7 and 8 give the same tree hash %s", ha)
	}
}

func TestMemoryDoesNotGrowWithSize(t *testing.T) {
	// Not parallel, so the allocation counters see only this Generate.
	const size = 64 << 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, st := generate(t, Options{Size: size, Seed: 3})
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d files, %d bytes: %d bytes allocated in total, heap from the OS grew by %d",
		st.Files, st.Bytes, alloc, int64(after.HeapSys)-int64(before.HeapSys))
	// Buffering files (or the world) would allocate at least its size.
	if alloc > size/4 {
		t.Errorf("generating %d bytes allocated %d bytes; writing must stream through fixed buffers", st.Bytes, alloc)
	}
}

func TestSize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"minimum", Options{Size: MinSize, Seed: 1}},
		{"3MiB", Options{Size: 3 << 20, Seed: 2}},
		{"20MiB", Options{Size: 20 << 20, Seed: 3}},
		{"40MiB", Options{Size: 40 << 20, Seed: 4}},
		{"explicit players", Options{Size: 20 << 20, Seed: 5, Players: 200}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir, st := generate(t, tc.o)
			if got := walkStats(t, dir); got != st {
				t.Errorf("Stats = %+v, but the folder holds %+v", st, got)
			}
			if dev := math.Abs(float64(st.Bytes-tc.o.Size)) / float64(tc.o.Size); dev > 0.10 {
				t.Errorf("wrote %d bytes for size %d: off by %.1f%%, want within 10%%", st.Bytes, tc.o.Size, 100*dev)
			}
			players := tc.o.withDefaults().Players
			names, err := filepath.Glob(filepath.Join(dir, "world", "playerdata", "*.dat"))
			if err != nil {
				t.Fatal(err)
			}
			if len(names) != players {
				t.Errorf("%d playerdata files, want %d", len(names), players)
			}
		})
	}
}

func TestStructure(t *testing.T) {
	t.Parallel()
	o := Options{Size: 24 << 20, Seed: 11}
	dir, st := generate(t, o)
	players := o.withDefaults().Players

	t.Run("layout", func(t *testing.T) {
		for _, rel := range []string{
			"server.properties", "eula.txt", "usercache.json", "paper.jar", "cache/mojang_1.21.4.jar",
			"plugins/LuckPerms.jar", "plugins/LuckPerms/config.yml", "logs/latest.log",
			"world/level.dat", "world/session.lock", "world_nether/level.dat", "world_the_end/level.dat",
		} {
			if _, err := os.Stat(filepath.Join(dir, rel)); err != nil {
				t.Errorf("missing %s: %v", rel, err)
			}
		}
		// Several files per player, as the contract asks ("thousands" at 512 MiB).
		if min := 4 * players; st.Files < min {
			t.Errorf("%d files, want at least %d for %d players", st.Files, min, players)
		}
	})

	t.Run("level.dat", func(t *testing.T) {
		for _, rel := range []string{"world/level.dat", "world/level.dat_old", "world_nether/level.dat", "world_the_end/level.dat"} {
			p := filepath.Join(dir, rel)
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("%s mode %v, want 0600", rel, fi.Mode().Perm())
			}
			root := readGzipNBT(t, p)
			data, _ := root["Data"].(map[string]any)
			if data["LevelName"] == nil || data["DataVersion"] != int32(dataVersion) {
				t.Errorf("%s: Data = %v, want LevelName and DataVersion %d", rel, data, dataVersion)
			}
		}
	})

	t.Run("players", func(t *testing.T) {
		for _, sub := range []string{"stats", "advancements"} {
			names, _ := filepath.Glob(filepath.Join(dir, "world", sub, "*.json"))
			if len(names) != players {
				t.Errorf("%d files in world/%s, want %d", len(names), sub, players)
			}
			for _, n := range names {
				b, err := os.ReadFile(n)
				if err != nil {
					t.Fatal(err)
				}
				if !json.Valid(b) {
					t.Fatalf("%s is not valid JSON", n)
				}
			}
		}
		dats, _ := filepath.Glob(filepath.Join(dir, "world", "playerdata", "*.dat"))
		uuidRE := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\.dat$`)
		for _, p := range dats {
			if !uuidRE.MatchString(filepath.Base(p)) {
				t.Errorf("playerdata name %q is not a v4 UUID", filepath.Base(p))
			}
			if root := readGzipNBT(t, p); root["Inventory"] == nil {
				t.Errorf("%s has no Inventory", p)
			}
		}
	})

	t.Run("regions", func(t *testing.T) {
		var regions int
		sums := map[string]map[int][32]byte{}
		sh := shingles{seen: map[uint64]bool{}}
		for _, d := range dimensions {
			names, _ := filepath.Glob(filepath.Join(dir, filepath.FromSlash(d.dir), "r.*.mca"))
			if len(names) == 0 {
				t.Errorf("no region files in %s", d.dir)
			}
			for _, n := range names {
				sums[n] = checkRegion(t, n, maxRegion, &sh)
				regions++
			}
		}
		chunks := checkDistinct(t, sums)
		t.Logf("%d region files checked, %d chunks, all distinct; %d of %d sampled 64-byte runs repeat", regions, chunks, sh.dup, sh.total)
		// Chunks share their first bytes (zlib and NBT headers), nothing else.
		if sh.dup*100 > sh.total {
			t.Errorf("%d of %d sampled 64-byte runs of chunk payloads repeat: chunks share content a deduplicating store would find", sh.dup, sh.total)
		}
	})
}

// checkRegion validates one Anvil file: size (a multiple of sectors, within
// [1 MiB, maxSize]), header locations (in range, not overlapping), chunk
// framing, and every chunk's zlib NBT, whose coordinates must match its
// slot. It returns the SHA-256 of each chunk's compressed payload by slot.
// Each payload is also added to sh, when given.
func checkRegion(t *testing.T, name string, maxSize int, sh *shingles) map[int][32]byte {
	t.Helper()
	sums := map[int][32]byte{}
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	m := regionName.FindStringSubmatch(filepath.Base(name))
	if m == nil {
		t.Fatalf("region file name %q", name)
	}
	rx, _ := strconv.Atoi(m[1])
	rz, _ := strconv.Atoi(m[2])
	if len(b) < minRegion || len(b) > maxSize || len(b)%sectorSize != 0 {
		t.Errorf("%s: %d bytes, want a multiple of %d within [1 MiB, %d]", name, len(b), sectorSize, maxSize)
	}
	used := make([]bool, len(b)/sectorSize)
	var chunks int
	var payload bytes.Buffer
	var rawBytes int
	for slot := range slots {
		loc := binary.BigEndian.Uint32(b[4*slot:])
		if loc == 0 {
			continue
		}
		chunks++
		off, n := int(loc>>8), int(loc&0xff)
		if off < 2 || n == 0 || off+n > len(used) {
			t.Fatalf("%s slot %d: location %d+%d outside the file's %d sectors", name, slot, off, n, len(used))
		}
		for s := off; s < off+n; s++ {
			if used[s] {
				t.Fatalf("%s slot %d: sector %d used twice", name, slot, s)
			}
			used[s] = true
		}
		if ts := binary.BigEndian.Uint32(b[sectorSize+4*slot:]); ts == 0 {
			t.Errorf("%s slot %d: no timestamp", name, slot)
		}
		c := b[off*sectorSize:]
		length := int(binary.BigEndian.Uint32(c))
		if length < 2 || 4+length > n*sectorSize || c[4] != compressionZlib {
			t.Fatalf("%s slot %d: length %d, type %d in %d sectors", name, slot, length, c[4], n)
		}
		data := c[5 : 4+length]
		sums[slot] = sha256.Sum256(data)
		if sh != nil {
			sh.add(data)
		}
		payload.Write(data)
		zr, err := zlib.NewReader(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s slot %d: %v", name, slot, err)
		}
		raw, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("%s slot %d: zlib: %v", name, slot, err)
		}
		rawBytes += len(raw)
		root := parseNBT(t, raw)
		wantX, wantZ := int32(rx*32+slot%32), int32(rz*32+slot/32)
		if root["xPos"] != wantX || root["zPos"] != wantZ || root["DataVersion"] != int32(dataVersion) {
			t.Fatalf("%s slot %d: xPos %v zPos %v DataVersion %v, want %d %d %d",
				name, slot, root["xPos"], root["zPos"], root["DataVersion"], wantX, wantZ, dataVersion)
		}
		if secs, _ := root["sections"].([]any); len(secs) == 0 {
			t.Fatalf("%s slot %d: no sections", name, slot)
		}
	}
	if chunks == 0 {
		t.Fatalf("%s: no chunks", name)
	}
	// Chunk data compresses like real chunk NBT, and the compressed
	// payload (what an archiver sees) barely compresses further.
	if ratio := float64(rawBytes) / float64(payload.Len()); ratio < 2 {
		t.Errorf("%s: chunk NBT compressed only %.2fx; real chunks shrink more", name, ratio)
	}
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
	defer enc.Close()
	if z := len(enc.EncodeAll(payload.Bytes(), nil)); float64(z) < 0.97*float64(payload.Len()) {
		t.Errorf("%s: zlib chunk payload recompresses to %.1f%% with zstd; want ≥ 97%%", name, 100*float64(z)/float64(payload.Len()))
	}
	return sums
}

// shingles samples runs of 64 bytes at content-defined positions (where a
// rolling hash of the 16 bytes before hits 1 in 64), so two payloads that
// share a long run of bytes, wherever it lies, share samples.
type shingles struct {
	seen       map[uint64]bool
	dup, total int
}

func (s *shingles) add(b []byte) {
	const window, run = 16, 64
	var h uint32
	for i := range b {
		h = h*31 + uint32(b[i])
		if i >= window {
			h -= uint32(b[i-window]) * pow31(window)
		}
		if i+1 >= window && h&63 == 0 && i+1+run <= len(b) {
			k := fnv64(b[i+1 : i+1+run])
			s.total++
			if s.seen[k] {
				s.dup++
			}
			s.seen[k] = true
		}
	}
}

func pow31(n int) uint32 {
	p := uint32(1)
	for range n {
		p *= 31
	}
	return p
}

func fnv64(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

// checkDistinct fails if two chunks of the world share a payload: a world
// built from repeated chunks would flatter any deduplicating store.
func checkDistinct(t *testing.T, sums map[string]map[int][32]byte) int {
	t.Helper()
	seen := map[[32]byte]string{}
	for name, bySlot := range sums {
		for slot, sum := range bySlot {
			here := fmt.Sprintf("%s slot %d", filepath.Base(name), slot)
			if prev, dup := seen[sum]; dup {
				t.Errorf("chunks %s and %s have the same payload", prev, here)
			}
			seen[sum] = here
		}
	}
	return len(seen)
}

func readGzipNBT(t *testing.T, name string) map[string]any {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return parseNBT(t, raw)
}

// parseNBT decodes a root compound, failing unless it spans all of b.
// Arrays are kept as their raw bytes.
func parseNBT(t *testing.T, b []byte) map[string]any {
	t.Helper()
	d := nbtDecoder{b: b}
	if typ := d.u8(); typ != tagCompound {
		t.Fatalf("root tag type %d, want compound", typ)
	}
	d.str()
	v := d.payload(tagCompound)
	if d.err != nil {
		t.Fatalf("NBT: %v", d.err)
	}
	if d.p != len(b) {
		t.Fatalf("NBT: %d trailing bytes", len(b)-d.p)
	}
	return v.(map[string]any)
}

type nbtDecoder struct {
	b   []byte
	p   int
	err error
}

func (d *nbtDecoder) take(n int) []byte {
	if d.err != nil || n < 0 || d.p+n > len(d.b) {
		if d.err == nil {
			d.err = errors.New("truncated")
		}
		return make([]byte, max(n, 8))
	}
	d.p += n
	return d.b[d.p-n : d.p]
}

func (d *nbtDecoder) u8() byte      { return d.take(1)[0] }
func (d *nbtDecoder) u16() uint16   { return binary.BigEndian.Uint16(d.take(2)) }
func (d *nbtDecoder) u32() uint32   { return binary.BigEndian.Uint32(d.take(4)) }
func (d *nbtDecoder) str() string   { return string(d.take(int(d.u16()))) }
func (d *nbtDecoder) count() int    { return int(int32(d.u32())) }
func (d *nbtDecoder) arr(w int) any { return d.take(w * d.count()) }

func (d *nbtDecoder) payload(typ byte) any {
	switch typ {
	case tagByte:
		return int8(d.u8())
	case tagShort:
		return int16(d.u16())
	case tagInt:
		return int32(d.u32())
	case tagLong:
		return int64(binary.BigEndian.Uint64(d.take(8)))
	case tagFloat:
		return math.Float32frombits(d.u32())
	case tagDouble:
		return math.Float64frombits(binary.BigEndian.Uint64(d.take(8)))
	case tagByteArray:
		return d.arr(1)
	case tagIntArray:
		return d.arr(4)
	case tagLongArray:
		return d.arr(8)
	case tagString:
		return d.str()
	case tagList:
		elem, n := d.u8(), d.count()
		if n > 0 && elem == tagEnd || n < 0 {
			d.err = fmt.Errorf("list of %d elements of type %d", n, elem)
			return nil
		}
		out := make([]any, 0, min(n, 1024))
		for range n {
			if d.err != nil {
				return nil
			}
			out = append(out, d.payload(elem))
		}
		return out
	case tagCompound:
		m := map[string]any{}
		for d.err == nil {
			typ := d.u8()
			if typ == tagEnd {
				return m
			}
			name := d.str()
			m[name] = d.payload(typ)
		}
		return m
	}
	if d.err == nil {
		d.err = fmt.Errorf("unknown tag type %d at %d", typ, d.p)
	}
	return nil
}

func TestRefusesNonEmptyDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keep := filepath.Join(dir, "level.dat")
	if err := os.WriteFile(keep, []byte("a real world"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Generate(dir, Options{Size: MinSize})
	if err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("Generate into a non-empty folder: err = %v, want one saying it is not empty", err)
	}
	if b, _ := os.ReadFile(keep); string(b) != "a real world" {
		t.Errorf("existing file changed to %q", b)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("folder holds %d entries, want only the original file", len(entries))
	}
}

func TestOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		o       Options
		wantErr string // substring; "" for valid
		players int
	}{
		{"defaults", Options{}, "", DefaultSize / bytesPerPlayer},
		{"derived players", Options{Size: 512 << 20}, "", 1024},
		{"one player per 512 KiB", Options{Size: MinSize}, "", 2},
		{"explicit players", Options{Size: 64 << 20, Players: 3}, "", 3},
		{"negative size", Options{Size: -1}, "below the minimum", 0},
		{"too small", Options{Size: MinSize - 1}, "below the minimum", 0},
		{"too large", Options{Size: MaxSize + 1}, "above the maximum", 0},
		{"negative players", Options{Size: 64 << 20, Players: -1}, "negative", 0},
		{"too many players", Options{Size: 64 << 20, Players: 10000}, "raise the size or lower the players", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o.withDefaults()
			err := o.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				if o.Players != tc.players {
					t.Errorf("Players = %d, want %d", o.Players, tc.players)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tc.wantErr)
			}
			if _, gerr := Generate(filepath.Join(t.TempDir(), "w"), tc.o); gerr == nil {
				t.Errorf("Generate accepted %+v", tc.o)
			}
		})
	}
}

func TestParseSize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"512MiB", 512 << 20, true},
		{"2GiB", 2 << 30, true},
		{"128M", 128 << 20, true},
		{"1.5G", 3 << 29, true},
		{"64kb", 64 << 10, true},
		{"1048576", 1 << 20, true},
		{" 8 MiB ", 8 << 20, true},
		{"", 0, false},
		{"MiB", 0, false},
		{"-1MiB", 0, false},
		{"12XB", 0, false},
		{"1e30", 0, false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseSize(tc.in)
			if tc.ok != (err == nil) || got != tc.want {
				t.Errorf("ParseSize(%q) = %d, %v; want %d (ok=%v)", tc.in, got, err, tc.want, tc.ok)
			}
		})
	}
}

func TestSpiral(t *testing.T) {
	t.Parallel()
	seen := map[[2]int]bool{}
	for i := range 200 {
		x, z := spiral(i)
		if seen[[2]int{x, z}] {
			t.Fatalf("spiral(%d) = %d,%d repeats an earlier region", i, x, z)
		}
		seen[[2]int{x, z}] = true
	}
	if x, z := spiral(0); x != 0 || z != 0 {
		t.Errorf("spiral(0) = %d,%d, want spawn 0,0", x, z)
	}
}

// BenchmarkGenerate reports generation speed (bytes written per second).
func BenchmarkGenerate(b *testing.B) {
	const size = 64 << 20
	b.SetBytes(size)
	for i := 0; b.Loop(); i++ {
		if _, err := Generate(filepath.Join(b.TempDir(), "w"), Options{Size: size, Seed: int64(i)}); err != nil {
			b.Fatal(err)
		}
	}
}
