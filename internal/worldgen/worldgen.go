// Package worldgen writes a synthetic, deterministic Minecraft (Paper) server
// folder for tests, benchmarks and demos.
//
// Generate(dir, Options{Size, Seed, Players}) lays out what a real Paper
// server's folder holds, at about Size bytes in total:
//
//   - world/, world_nether/DIM-1/, world_the_end/DIM1/: Anvil region files
//     (region/r.X.Z.mca: an 8 KiB header of chunk locations and timestamps,
//     then chunks of a 4-byte length, compression type 2 and zlib-compressed
//     chunk NBT, each padded to 4 KiB sectors; 1–10 MiB each), level.dat and
//     level.dat_old (gzip NBT, mode 0600), uid.dat, session.lock, data/;
//   - per player: world/playerdata/<uuid>.dat and .dat_old (gzip NBT),
//     world/stats/<uuid>.json, world/advancements/<uuid>.json; several
//     thousand small files for a 512 MiB world;
//   - server.properties and the other root configuration files,
//     plugins/<Name>/config.yml;
//   - what backups exclude by default: paper.jar, plugins/*.jar, cache/,
//     logs/ (about 2% of Size).
//
// Region chunks hold zlib-compressed NBT shaped like real chunk sections
// (palettes, packed block-state longs, light arrays), so the files compress
// as little as real ones do: only headers and sector padding shrink.
//
// Every chunk is distinct, as in a real world (a world of repeated chunks
// would flatter any deduplicating store). Mutate then applies a "day of
// play" (chunks rewritten in place or moved, chunks added, player files
// saved, new players) and reports the bytes it really changed.
//
// The same Options give the same bytes, modes and modification times: every
// file draws from its own PRNG stream seeded from (Seed, path), so files are
// generated in parallel (GOMAXPROCS workers) without losing determinism.
// Writing streams through fixed buffers: memory does not grow with Size.
package worldgen

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
)

// Size limits and defaults.
const (
	// DefaultSize is the Size used when Options.Size is 0.
	DefaultSize = 64 << 20
	// MinSize is the smallest world Generate writes.
	MinSize = 1 << 20
	// MaxSize guards against a mistyped size filling the disk.
	MaxSize = 1 << 40
	// MaxPlayers is the largest Options.Players accepted.
	MaxPlayers = 1_000_000

	// bytesPerPlayer is the world size per player when Players is derived.
	bytesPerPlayer = 512 << 10
	// playerCost is a generous estimate of one player's small files, used to
	// reject a Players count that cannot fit into Size.
	playerCost = 40 << 10
)

// Options controls what Generate writes.
type Options struct {
	// Size is the approximate total of all file sizes in bytes (0 means
	// DefaultSize). The result lands within a few percent of it.
	Size int64
	// Seed selects the world; the same Options give the same bytes.
	Seed int64
	// Players is the number of players with files under world/playerdata,
	// stats and advancements (0 means one per 512 KiB of Size, at least 1).
	Players int
}

// Stats describes what Generate wrote: regular files and their total size.
type Stats struct {
	Files int
	Bytes int64
}

func (o Options) withDefaults() Options {
	if o.Size == 0 {
		o.Size = DefaultSize
	}
	if o.Players == 0 && o.Size > 0 {
		o.Players = int(max(1, min(o.Size/bytesPerPlayer, MaxPlayers)))
	}
	return o
}

// Validate reports what is wrong with the options, after defaults are applied.
func (o Options) Validate() error {
	o = o.withDefaults()
	switch {
	case o.Size < MinSize:
		return fmt.Errorf("worldgen: size %d bytes is below the minimum of %d (1 MiB); ask for a larger world", o.Size, MinSize)
	case o.Size > MaxSize:
		return fmt.Errorf("worldgen: size %d bytes is above the maximum of %d (1 TiB); check the unit", o.Size, int64(MaxSize))
	case o.Players < 0:
		return fmt.Errorf("worldgen: players %d is negative; use 0 to derive it from the size", o.Players)
	case o.Players > MaxPlayers:
		return fmt.Errorf("worldgen: players %d is above the maximum of %d", o.Players, MaxPlayers)
	case int64(o.Players)*playerCost > o.Size/2:
		return fmt.Errorf("worldgen: %d players need about %d bytes of small files, more than half of size %d; raise the size or lower the players",
			o.Players, int64(o.Players)*playerCost, o.Size)
	}
	return nil
}

// Generate writes a synthetic server folder of about o.Size bytes into dir,
// which must be missing or empty (Generate never overwrites anything). It
// returns the number and total size of the regular files written. On error,
// dir holds a partial world that the caller should remove.
func Generate(dir string, o Options) (Stats, error) {
	o = o.withDefaults()
	if err := o.Validate(); err != nil {
		return Stats{}, err
	}
	if err := prepareDir(dir); err != nil {
		return Stats{}, err
	}
	p := newPlan(o)

	var st Stats
	small := p.smallFiles()
	if err := run(dir, o.Seed, small, &st); err != nil {
		return st, err
	}
	// Region files take what the small files left, so the total lands near Size.
	regions := p.regionFiles(o.Size - st.Bytes)
	if err := run(dir, o.Seed, regions, &st); err != nil {
		return st, err
	}
	if err := p.setDirTimes(dir, slices.Concat(small, regions)); err != nil {
		return st, err
	}
	return st, nil
}

func prepareDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("worldgen: creating %q: %w", dir, err)
	}
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("worldgen: opening %q: %w", dir, err)
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("worldgen: reading %q: %w", dir, err)
	}
	if len(names) > 0 {
		return fmt.Errorf("worldgen: %q is not empty (it holds %q); give a new or empty folder, worldgen never overwrites files", dir, names[0])
	}
	return nil
}

// file is one file to write: its slash-separated path under the world
// folder, mode, modification time and content writer. write gets the open
// file and a worker whose PRNG is already seeded for this file.
type file struct {
	rel   string
	mode  fs.FileMode
	mtime time.Time
	write func(w *worker, f *os.File) error
}

// epoch is the base of every generated timestamp: files and chunks are
// stamped within the 30 days after it.
var epoch = time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)

// plan decides, from the seed alone, which files exist and how big they are.
type plan struct {
	o   Options
	rng *rand.Rand
}

func newPlan(o Options) *plan {
	return &plan{o: o, rng: rand.New(rand.NewPCG(uint64(o.Seed), 0x776f726c6467656e))}
}

// mtime returns a deterministic modification time within 30 days of epoch.
func (p *plan) mtime() time.Time {
	return epoch.Add(time.Duration(p.rng.Int64N(int64(30 * 24 * time.Hour))).Truncate(time.Second))
}

// setDirTimes stamps every directory (deepest first, so a parent's time is not
// changed afterwards) with a deterministic time.
func (p *plan) setDirTimes(dir string, files []file) error {
	seen := map[string]bool{}
	var dirs []string
	for _, f := range files {
		for d := path.Dir(f.rel); d != "." && !seen[d]; d = path.Dir(d) {
			seen[d] = true
			dirs = append(dirs, d)
		}
	}
	slices.SortFunc(dirs, func(a, b string) int {
		if c := strings.Count(b, "/") - strings.Count(a, "/"); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	dirs = append(dirs, ".")
	for _, d := range dirs {
		t := p.mtime()
		if err := os.Chtimes(filepath.Join(dir, filepath.FromSlash(d)), t, t); err != nil {
			return fmt.Errorf("worldgen: setting times of %q: %w", d, err)
		}
	}
	return nil
}

// worker holds one goroutine's reusable state: a PRNG reseeded per file and
// fixed-size buffers, so memory stays flat however large the world is.
type worker struct {
	pcg   *rand.PCG
	rng   *rand.Rand
	seed  int64
	bw    *bufio.Writer
	n     nbt          // raw NBT being built
	text  []byte       // small text/JSON files being built
	raw   []byte       // scratch (light arrays, random fill)
	spans [][2]int     // incompressible ranges of n.b
	zbuf  bytes.Buffer // compressed chunk
	fw    *flate.Writer
	gz    *gzip.Writer
}

func newWorker(seed int64) *worker {
	pcg := rand.NewPCG(0, 0)
	fw, _ := flate.NewWriter(io.Discard, flate.BestSpeed) // level is valid
	gz, _ := gzip.NewWriterLevel(io.Discard, gzip.BestSpeed)
	return &worker{
		pcg:  pcg,
		rng:  rand.New(pcg),
		seed: seed,
		bw:   bufio.NewWriterSize(nil, 256<<10),
		raw:  make([]byte, 64<<10),
		fw:   fw,
		gz:   gz,
	}
}

// reseed points the worker's PRNG at the stream of one file.
func (w *worker) reseed(rel string) {
	h := fnv.New64a()
	h.Write([]byte(rel))
	w.pcg.Seed(uint64(w.seed), h.Sum64())
}

// run writes files with GOMAXPROCS workers, each file from its own PRNG
// stream of seed, and adds them to st. Directories
// are created first, in order; the first error stops the remaining work.
func run(dir string, seed int64, files []file, st *Stats) error {
	made := map[string]bool{}
	for _, f := range files {
		d := path.Dir(f.rel)
		if made[d] {
			continue
		}
		made[d] = true
		if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(d)), 0o755); err != nil {
			return fmt.Errorf("worldgen: creating folder %q: %w", d, err)
		}
	}

	sizes := make([]int64, len(files))
	next := make(chan int)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	failed := func() bool { mu.Lock(); defer mu.Unlock(); return firstErr != nil }
	for range max(1, min(runtime.GOMAXPROCS(0), len(files))) {
		wg.Go(func() {
			w := newWorker(seed)
			for i := range next {
				if failed() {
					continue
				}
				n, err := w.writeFile(dir, files[i])
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					continue
				}
				sizes[i] = n
			}
		})
	}
	for i := range files {
		next <- i
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	for _, n := range sizes {
		st.Files++
		st.Bytes += n
	}
	return nil
}

func (w *worker) writeFile(dir string, fl file) (int64, error) {
	name := filepath.Join(dir, filepath.FromSlash(fl.rel))
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fl.mode)
	if err != nil {
		return 0, fmt.Errorf("worldgen: creating %q: %w", fl.rel, err)
	}
	w.reseed(fl.rel)
	err = fl.write(w, f)
	if err == nil {
		err = f.Chmod(fl.mode) // independent of the umask
	}
	var size int64
	if err == nil {
		var fi os.FileInfo
		if fi, err = f.Stat(); err == nil {
			size = fi.Size()
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chtimes(name, fl.mtime, fl.mtime)
	}
	if err != nil {
		return 0, fmt.Errorf("worldgen: writing %q: %w", fl.rel, err)
	}
	return size, nil
}

// stream returns the worker's buffered writer pointed at f; the file's write
// function calls flush when done.
func (w *worker) stream(f *os.File) *bufio.Writer {
	w.bw.Reset(f)
	return w.bw
}
