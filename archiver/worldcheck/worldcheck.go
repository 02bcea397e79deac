// Package worldcheck checks that a Minecraft world folder holds what the game
// can load: every level.dat parses as gzip NBT and carries a DataVersion;
// every region file's (r.X.Z.mca) location table is sane (offsets past the
// 8 KiB header and inside the file, no two chunks sharing a sector, sector
// counts matching the chunk lengths, timestamps not in the future beyond a
// tolerance); every chunk, or a seeded sample that always includes each
// region's newest, decompresses by its compression byte (1 gzip, 2 zlib,
// 3 none, 4 lz4; with the 128 flag from its external c.X.Z.mcc) and parses
// as NBT whose xPos/zPos match its slot; every playerdata/*.dat parses as
// gzip NBT.
//
// The input is hostile: each file is read in bounded pieces (the 8 KiB
// header, one chunk of at most 255 sectors at a time), every decompressed
// document is capped at MaxDocument bytes, NBT nesting at the game's 512,
// and the problem list at Options.MaxProblems. Memory does not grow with the
// world's size. A problem names the file, the chunk's coordinates and what
// is wrong.
package worldcheck

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/Tnze/go-mc/nbt"
	"github.com/Tnze/go-mc/save/region"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zlib"
)

// Bounds and defaults.
const (
	// MaxDocument caps the decompressed size of one chunk, level.dat or
	// player file. The game writes chunks above 1 MiB compressed to .mcc
	// files; decompressed, real chunks stay well below this.
	MaxDocument = 16 << 20
	// DefaultMaxProblems is the length of the problem list kept.
	DefaultMaxProblems = 100
	// DefaultFutureTolerance is how far in the future a chunk's timestamp
	// may lie (clock skew between the server and the checker).
	DefaultFutureTolerance = 24 * time.Hour

	sectorSize = 4096
	headerSize = 2 * sectorSize
	// maxSectors is the most sectors one table entry can name (one byte).
	maxSectors = 255
)

// Statuses of a Result.
const (
	StatusOK     = "ok"
	StatusFailed = "failed"
)

// Options of one check.
type Options struct {
	// Share is the share of each region's chunks to check, in (0, 1];
	// 0 means 1 (all). Each region's newest chunk is always checked.
	Share float64
	// Seed picks the sample.
	Seed uint64
	// Now is the time timestamps are compared with; zero means time.Now().
	Now time.Time
	// FutureTolerance; 0 means DefaultFutureTolerance.
	FutureTolerance time.Duration
	// MaxProblems is how many problems Result keeps; 0 means DefaultMaxProblems.
	MaxProblems int
}

func (o Options) withDefaults() Options {
	if o.Share == 0 {
		o.Share = 1
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	if o.FutureTolerance == 0 {
		o.FutureTolerance = DefaultFutureTolerance
	}
	if o.MaxProblems == 0 {
		o.MaxProblems = DefaultMaxProblems
	}
	return o
}

// Validate reports the first problem with o.
func (o Options) Validate() error {
	switch {
	case o.Share < 0 || o.Share > 1 || o.Share != o.Share:
		return fmt.Errorf("chunk share %v: want a value in (0, 1]", o.Share)
	case o.FutureTolerance < 0:
		return fmt.Errorf("future tolerance %s is negative", o.FutureTolerance)
	case o.MaxProblems < 0:
		return fmt.Errorf("problem list length %d is negative", o.MaxProblems)
	}
	return nil
}

// Problem is one thing wrong with the world.
type Problem struct {
	File string `json:"file"` // slash-separated, relative to the checked folder
	// Chunk is the chunk's absolute coordinates, for a chunk's problem.
	Chunk *[2]int `json:"chunk,omitempty"`
	What  string  `json:"what"`
}

func (p Problem) String() string {
	if p.Chunk != nil {
		return fmt.Sprintf("%s: chunk (%d, %d): %s", p.File, p.Chunk[0], p.Chunk[1], p.What)
	}
	return fmt.Sprintf("%s: %s", p.File, p.What)
}

// Result of a check.
type Result struct {
	Status        string    `json:"status"` // StatusOK or StatusFailed
	ChunksChecked int64     `json:"chunks_checked"`
	Chunks        int64     `json:"chunks"` // chunks in the location tables
	Regions       int       `json:"regions"`
	LevelFiles    int       `json:"level_files"`
	PlayerFiles   int       `json:"player_files"`
	Problems      []Problem `json:"problems"`       // the first MaxProblems
	ProblemsTotal int       `json:"problems_total"` // all problems found
}

// Check checks the world folder dir. Problems with the world's content go
// into the Result; an error means the check could not run (dir unreadable,
// ctx done, a file that cannot be opened).
func Check(ctx context.Context, dir string, o Options) (Result, error) {
	o = o.withDefaults()
	if err := o.Validate(); err != nil {
		return Result{}, err
	}
	c := &checker{o: o, root: dir, rng: rand.New(rand.NewPCG(o.Seed, 0x776f726c64))}
	c.res.Problems = []Problem{}
	if fi, err := os.Stat(dir); err != nil {
		return Result{}, err
	} else if !fi.IsDir() {
		return Result{}, fmt.Errorf("%s is not a folder", dir)
	}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil // folders are walked; symlinks and devices are not the game's
		}
		name, parent := d.Name(), filepath.Base(filepath.Dir(path))
		switch {
		case name == "level.dat":
			c.res.LevelFiles++
			return c.level(path)
		case parent == "playerdata" && filepath.Ext(name) == ".dat":
			c.res.PlayerFiles++
			return c.player(path)
		case regionName.MatchString(name):
			c.res.Regions++
			return c.region(ctx, path, parent == "region")
		}
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	if c.res.LevelFiles == 0 {
		c.problem(dir, nil, "no level.dat: not a world folder")
	}
	c.res.Status = StatusOK
	if c.res.ProblemsTotal > 0 {
		c.res.Status = StatusFailed
	}
	return c.res, nil
}

// regionName matches a region file's name: r.X.Z.mca.
var regionName = regexp.MustCompile(`^r\.(-?[0-9]{1,7})\.(-?[0-9]{1,7})\.mca$`)

type checker struct {
	o    Options
	root string
	rng  *rand.Rand
	res  Result
	buf  bytes.Buffer  // the decompressed document, reused
	raw  bytes.Buffer  // an lz4 chunk's compressed bytes, reused
	gz   gzip.Reader   // reused across gzip chunks
	zl   io.ReadCloser // reused across zlib chunks (a zlib.Resetter)
}

func (c *checker) problem(path string, chunk *[2]int, format string, args ...any) {
	c.res.ProblemsTotal++
	if len(c.res.Problems) >= c.o.MaxProblems {
		return
	}
	rel, err := filepath.Rel(c.root, path)
	if err != nil || rel == "." {
		rel = filepath.Base(path)
	}
	c.res.Problems = append(c.res.Problems, Problem{File: filepath.ToSlash(rel), Chunk: chunk, What: fmt.Sprintf(format, args...)})
}

// gzipDoc reads path as a gzip NBT document into c.buf.
func (c *checker) gzipDoc(path string) (ok bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		c.problem(path, nil, "not gzip: %s", err)
		return false, nil
	}
	z.Multistream(false)
	if err := c.inflate(z); err != nil {
		c.problem(path, nil, "%s", err)
		return false, nil
	}
	if _, _, err := checkShape(c.buf.Bytes()); err != nil {
		c.problem(path, nil, "not NBT: %s", err)
		return false, nil
	}
	return true, nil
}

// inflate reads r to its end into c.buf, at most MaxDocument bytes.
func (c *checker) inflate(r io.Reader) error {
	c.buf.Reset()
	n, err := c.buf.ReadFrom(io.LimitReader(r, MaxDocument+1))
	switch {
	case err != nil:
		return fmt.Errorf("does not decompress: %s", err)
	case n > MaxDocument:
		return fmt.Errorf("decompresses to more than %d bytes", MaxDocument)
	}
	return nil
}

func (c *checker) level(path string) error {
	ok, err := c.gzipDoc(path)
	if !ok || err != nil {
		return err
	}
	var v struct {
		Data *struct {
			DataVersion *int32 `nbt:"DataVersion"`
		} `nbt:"Data"`
	}
	if err := nbt.Unmarshal(c.buf.Bytes(), &v); err != nil {
		c.problem(path, nil, "not a level.dat: %s", err)
	} else if v.Data == nil || v.Data.DataVersion == nil {
		c.problem(path, nil, "no Data.DataVersion")
	} else if *v.Data.DataVersion <= 0 {
		c.problem(path, nil, "Data.DataVersion %d is not positive", *v.Data.DataVersion)
	}
	return nil
}

func (c *checker) player(path string) error {
	_, err := c.gzipDoc(path)
	return err
}

// entry is one used slot of a region's location table.
type entry struct {
	slot          int
	sector, count int64
	stamp         int64
}

// region checks one region file; coords says the chunks carry xPos/zPos
// (region/, not entities/ or poi/).
func (c *checker) region(ctx context.Context, path string, coords bool) error {
	m := regionName.FindStringSubmatch(filepath.Base(path))
	rx, _ := strconv.Atoi(m[1])
	rz, _ := strconv.Atoi(m[2])
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	if size == 0 {
		return nil // the game leaves empty region files and loads them as empty
	}
	if size < headerSize {
		c.problem(path, nil, "%d bytes: shorter than the %d-byte location table (truncated)", size, headerSize)
		return nil
	}
	// go-mc's Load reads the 8 KiB header; its ReadSector reads one chunk,
	// bounded by the sector count (at most 255 sectors).
	r, err := region.Load(readOnly{f})
	if err != nil {
		c.problem(path, nil, "cannot read the location table: %s", err)
		return nil
	}
	var header [sectorSize]byte // the locations; go-mc keeps them private
	if _, err := f.ReadAt(header[:], 0); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	chunkAt := func(slot int) *[2]int { return &[2]int{rx*32 + slot%32, rz*32 + slot/32} }
	sectors := size / sectorSize // only whole sectors: the game pads the last one
	future := c.o.Now.Add(c.o.FutureTolerance).Unix()
	var used []entry
	for slot := range 1024 {
		loc := binary.BigEndian.Uint32(header[4*slot:])
		if loc == 0 {
			continue
		}
		e := entry{slot: slot, sector: int64(loc >> 8), count: int64(loc & 0xff), stamp: int64(uint32(r.Timestamps[slot/32][slot%32]))}
		switch {
		case e.count == 0:
			c.problem(path, chunkAt(slot), "table entry at sector %d has no sectors", e.sector)
		case e.sector < headerSize/sectorSize:
			c.problem(path, chunkAt(slot), "table entry points into the location table (sector %d)", e.sector)
		case e.sector+e.count > sectors:
			c.problem(path, chunkAt(slot), "sectors %d-%d lie past the end of the file (%d sectors): truncated", e.sector, e.sector+e.count-1, sectors)
		default:
			if e.stamp > future {
				c.problem(path, chunkAt(slot), "timestamp %s is in the future", time.Unix(e.stamp, 0).UTC().Format(time.RFC3339))
			}
			used = append(used, e)
		}
	}
	c.res.Chunks += int64(len(used))
	// No two chunks may share a sector.
	slices.SortFunc(used, func(a, b entry) int { return int(a.sector - b.sector) })
	bad := make(map[int]bool)
	for i := 1; i < len(used); i++ {
		if prev := used[i-1]; used[i].sector < prev.sector+prev.count {
			a, b := chunkAt(prev.slot), chunkAt(used[i].slot)
			c.problem(path, b, "sectors %d-%d overlap chunk (%d, %d)'s sectors %d-%d", used[i].sector, used[i].sector+used[i].count-1,
				a[0], a[1], prev.sector, prev.sector+prev.count-1)
			bad[prev.slot], bad[used[i].slot] = true, true
		}
	}
	newest := -1
	for i, e := range used {
		if newest < 0 || e.stamp > used[newest].stamp {
			newest = i
		}
	}
	for i, e := range used {
		if bad[e.slot] || (i != newest && c.o.Share < 1 && c.rng.Float64() >= c.o.Share) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		c.res.ChunksChecked++
		if err := c.chunk(r, path, e, chunkAt(e.slot), coords); err != nil {
			return err
		}
	}
	return nil
}

// chunk checks one chunk: its length against its sectors, then its payload.
func (c *checker) chunk(r *region.Region, path string, e entry, at *[2]int, hasCoords bool) error {
	data, err := r.ReadSector(e.slot%32, e.slot/32)
	if err != nil {
		c.problem(path, at, "cannot read the chunk: %s", err)
		return nil
	}
	if len(data) == 0 {
		c.problem(path, at, "no compression byte")
		return nil
	}
	if need := (4 + int64(len(data)) + sectorSize - 1) / sectorSize; need != e.count {
		c.problem(path, at, "table says %d sectors, the chunk's length %d needs %d", e.count, len(data), need)
		return nil
	}
	comp, payload := data[0], io.Reader(bytes.NewReader(data[1:]))
	if comp&128 != 0 {
		comp &^= 128
		ext := filepath.Join(filepath.Dir(path), fmt.Sprintf("c.%d.%d.mcc", at[0], at[1]))
		f, err := os.Open(ext)
		if errors.Is(err, fs.ErrNotExist) {
			c.problem(path, at, "external chunk file %s is missing", filepath.Base(ext))
			return nil
		} else if err != nil {
			return err
		}
		defer f.Close()
		payload = f
	}
	if err := c.decompress(comp, payload); err != nil {
		c.problem(path, at, "%s", err)
		return nil
	}
	top, level, err := checkShape(c.buf.Bytes())
	if err != nil {
		c.problem(path, at, "not NBT: %s", err)
		return nil
	}
	if !hasCoords {
		return nil
	}
	p := top
	if !p.hasX && !p.hasZ {
		p = level // before 1.18 (DataVersion 2844)
	}
	switch {
	case !p.hasX || !p.hasZ:
		c.problem(path, at, "no xPos/zPos")
	case int(p.x) != at[0] || int(p.z) != at[1]:
		c.problem(path, at, "chunk says it is at (%d, %d): wrong slot", p.x, p.z)
	}
	return nil
}

// decompress inflates one chunk's payload by its compression byte into c.buf.
func (c *checker) decompress(comp byte, src io.Reader) error {
	switch comp {
	case 1:
		if err := c.gz.Reset(src); err != nil {
			return fmt.Errorf("gzip chunk does not decompress: %s", err)
		}
		c.gz.Multistream(false)
		return c.inflate(&c.gz)
	case 2:
		var err error
		if c.zl == nil {
			c.zl, err = zlib.NewReader(src)
		} else {
			err = c.zl.(zlib.Resetter).Reset(src, nil)
		}
		if err != nil {
			return fmt.Errorf("zlib chunk does not decompress: %s", err)
		}
		return c.inflate(c.zl)
	case 3:
		return c.inflate(src)
	case 4:
		return c.lz4(src)
	}
	return fmt.Errorf("unknown compression type %d", comp)
}

// readOnly lets go-mc's region reader, which asks for an io.ReadWriteSeeker,
// read a file opened read-only; a write fails.
type readOnly struct{ *os.File }

func (readOnly) Write([]byte) (int, error) { return 0, errors.New("worldcheck: read only") }
