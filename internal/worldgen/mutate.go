package worldgen

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Default shares of a day of play (MutateOptions).
const (
	DefaultRegionShare = 0.08
	DefaultChunkShare  = 0.10
	DefaultNewChunks   = 3
	DefaultPlayerShare = 0.05
	DefaultNewPlayers  = 2
)

// MutateOptions describes a "day of play": what Mutate changes in a world
// that Generate wrote.
type MutateOptions struct {
	// Seed selects which files and chunks change and their new bytes; the
	// same world and options give the same result.
	Seed int64
	// RegionShare is the share of region files touched (0 means
	// DefaultRegionShare; at least one file when the world has any).
	RegionShare float64
	// ChunkShare is the share of a touched file's chunks rewritten (0 means
	// DefaultChunkShare; at least one chunk).
	ChunkShare float64
	// NewChunks is the number of chunks added to each touched file, in slots
	// that held none (0 means DefaultNewChunks; -1 adds none).
	NewChunks int
	// PlayerShare is the share of players whose files are saved again (0
	// means DefaultPlayerShare; at least one player when there are any).
	PlayerShare float64
	// NewPlayers is the number of players who join for the first time (0
	// means DefaultNewPlayers; -1 adds none).
	NewPlayers int
}

func (o MutateOptions) withDefaults() MutateOptions {
	if o.RegionShare == 0 {
		o.RegionShare = DefaultRegionShare
	}
	if o.ChunkShare == 0 {
		o.ChunkShare = DefaultChunkShare
	}
	if o.NewChunks == 0 {
		o.NewChunks = DefaultNewChunks
	}
	if o.PlayerShare == 0 {
		o.PlayerShare = DefaultPlayerShare
	}
	if o.NewPlayers == 0 {
		o.NewPlayers = DefaultNewPlayers
	}
	return o
}

// Validate reports what is wrong with the options, after defaults are applied.
func (o MutateOptions) Validate() error {
	o = o.withDefaults()
	for _, s := range []struct {
		name string
		v    float64
	}{{"region share", o.RegionShare}, {"chunk share", o.ChunkShare}, {"player share", o.PlayerShare}} {
		if math.IsNaN(s.v) || s.v < 0 || s.v > 1 {
			return fmt.Errorf("worldgen: mutate: %s %v: want a share in (0, 1], like 0.08 or 8%%", s.name, s.v)
		}
	}
	switch {
	case o.NewChunks < -1 || o.NewChunks > slots:
		return fmt.Errorf("worldgen: mutate: new chunks %d: want -1 (none) to %d per region file", o.NewChunks, slots)
	case o.NewPlayers < -1 || o.NewPlayers > MaxPlayers:
		return fmt.Errorf("worldgen: mutate: new players %d: want -1 (none) to %d", o.NewPlayers, MaxPlayers)
	}
	return nil
}

// ErrNotWorld is returned by Mutate when dir is not a server folder that
// Generate wrote: a retry cannot help.
var ErrNotWorld = errors.New("not a server folder written by worldgen")

// MutateReport says what Mutate changed. ChangedBytes is what really
// changed on disk: the sectors of region files written with new chunk
// payloads, the header sectors (locations, timestamps) whose bytes differ,
// and the whole of every player file written. A store that keeps only what
// changed has to store about that much again.
type MutateReport struct {
	RegionFiles     int   `json:"region_files"`      // region files touched
	ChunksRewritten int   `json:"chunks_rewritten"`  // existing chunks saved again
	ChunksInPlace   int   `json:"chunks_in_place"`   // of those, written over their old sectors
	ChunksMoved     int   `json:"chunks_moved"`      // of those, relocated to the end of the file
	ChunksAdded     int   `json:"chunks_added"`      // new chunks, appended
	ChunkBytes      int64 `json:"chunk_bytes"`       // sectors of new chunk payloads
	TableBytes      int64 `json:"table_bytes"`       // header sectors whose bytes changed
	PlayersSaved    int   `json:"players_saved"`     // existing players whose files were saved
	PlayersNew      int   `json:"players_new"`       // players who joined
	PlayerFiles     int   `json:"player_files"`      // player files written (new or changed)
	PlayerBytes     int64 `json:"player_bytes"`      // their sizes after the change
	ChangedBytes    int64 `json:"changed_bytes"`     // ChunkBytes + TableBytes + PlayerBytes
	WorldBytes      int64 `json:"world_bytes_after"` // all regular files after the change
}

// dayOfPlay is the time stamp of everything Mutate writes: after every time
// Generate stamps (within 30 days of epoch), so each rewritten chunk's
// timestamp and each file's modification time differ from before.
var dayOfPlay = epoch.Add(31 * 24 * time.Hour)

// Mutate applies one day of play to the server folder dir written by
// Generate: in a share of the region files, a share of the chunks is saved
// again, in place when the new compressed chunk fits its sectors, else
// appended to the end of the file with the location table updated (as the
// game does; the old sectors are left as they were), and a few chunks are
// added; a share of the players' files are saved again (playerdata/<uuid>.dat
// moved to .dat_old, a new .dat, stats and advancements), and a few new
// players join. Memory does not grow with the world: region files are read
// one chunk at a time.
func Mutate(dir string, o MutateOptions) (MutateReport, error) {
	o = o.withDefaults()
	if err := o.Validate(); err != nil {
		return MutateReport{}, err
	}
	var rep MutateReport
	rng := rand.New(rand.NewPCG(uint64(o.Seed), 0x6461796f66706c61))
	w := newWorker(o.Seed)

	type region struct {
		rel string
		d   *dimension
	}
	var regions []region
	for di := range dimensions {
		d := &dimensions[di]
		names, err := filepath.Glob(filepath.Join(dir, filepath.FromSlash(d.dir), "r.*.mca"))
		if err != nil {
			return rep, fmt.Errorf("worldgen: mutate: listing %s: %w", d.dir, err)
		}
		slices.Sort(names)
		for _, n := range names {
			regions = append(regions, region{rel: d.dir + "/" + filepath.Base(n), d: d})
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "world")); err != nil || !fi.IsDir() {
		return rep, fmt.Errorf("worldgen: mutate: %q: %w (no world/ folder); give the folder worldgen wrote", dir, ErrNotWorld)
	}
	for _, i := range pick(rng, len(regions), o.RegionShare) {
		r := regions[i]
		if err := w.mutateRegion(dir, r.rel, r.d, rng, o, &rep); err != nil {
			return rep, err
		}
		rep.RegionFiles++
	}
	if err := w.mutatePlayers(dir, rng, o, &rep); err != nil {
		return rep, err
	}
	rep.ChangedBytes = rep.ChunkBytes + rep.TableBytes + rep.PlayerBytes
	err := filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		fi, err := e.Info()
		if err == nil {
			rep.WorldBytes += fi.Size()
		}
		return err
	})
	if err != nil {
		return rep, fmt.Errorf("worldgen: mutate: sizing %q: %w", dir, err)
	}
	return rep, nil
}

// pick returns the sorted indexes of a random share of n items: round(share
// × n), at least one when n > 0.
func pick(rng *rand.Rand, n int, share float64) []int {
	if n == 0 {
		return nil
	}
	k := min(n, max(1, int(math.Round(share*float64(n)))))
	idx := rng.Perm(n)[:k]
	slices.Sort(idx)
	return idx
}

// mutateRegion saves some chunks of one region file again and adds a few.
func (w *worker) mutateRegion(dir, rel string, d *dimension, rng *rand.Rand, o MutateOptions, rep *MutateReport) error {
	name := filepath.Join(dir, filepath.FromSlash(rel))
	m := regionName.FindStringSubmatch(path.Base(rel))
	if m == nil {
		return fmt.Errorf("worldgen: mutate: %s: not a region file name r.X.Z.mca", rel)
	}
	rx, _ := strconv.Atoi(m[1])
	rz, _ := strconv.Atoi(m[2])
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("worldgen: mutate: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("worldgen: mutate: %w", err)
	}
	var header, before [headerSize]byte
	if _, err := io.ReadFull(f, header[:]); err != nil {
		return fmt.Errorf("worldgen: mutate: %s: reading the header: %w", rel, err)
	}
	before = header
	fileSectors := int((fi.Size() + sectorSize - 1) / sectorSize)
	var present, empty []int
	for slot := range slots {
		loc := binary.BigEndian.Uint32(header[4*slot:])
		if loc == 0 {
			empty = append(empty, slot)
			continue
		}
		off, n := int(loc>>8), int(loc&0xff)
		if off < headerSize/sectorSize || n == 0 || off+n > fileSectors {
			return fmt.Errorf("worldgen: mutate: %s: slot %d: location %d+%d outside the file's %d sectors; not a region file worldgen wrote", rel, slot, off, n, fileSectors)
		}
		present = append(present, slot)
	}
	w.pcg.Seed(uint64(rng.Uint64()), uint64(rng.Uint64()))
	end := fileSectors // next free sector at the end of the file

	// write stores chunk data in slot: at off when given (in place), else at
	// the end; it returns the sectors used and updates the header.
	write := func(slot, off int, data []byte) (int, error) {
		length := len(data) + 1
		n := (4 + length + sectorSize - 1) / sectorSize
		if n > 0xff {
			return 0, fmt.Errorf("worldgen: mutate: %s: a chunk of %d sectors does not fit the location table", rel, n)
		}
		if off < 0 {
			off, end = end, end+n
		}
		buf := make([]byte, n*sectorSize)
		binary.BigEndian.PutUint32(buf, uint32(length))
		buf[4] = compressionZlib
		copy(buf[5:], data)
		if _, err := f.WriteAt(buf, int64(off)*sectorSize); err != nil {
			return 0, fmt.Errorf("worldgen: mutate: %s: %w", rel, err)
		}
		binary.BigEndian.PutUint32(header[4*slot:], uint32(off)<<8|uint32(n))
		binary.BigEndian.PutUint32(header[sectorSize+4*slot:], uint32(dayOfPlay.Unix()+w.rng.Int64N(24*3600)))
		rep.ChunkBytes += int64(n) * sectorSize
		return n, nil
	}
	chunkAt := func(slot int) (cx, cz int) {
		return rx*chunksPerDim + slot%chunksPerDim, rz*chunksPerDim + slot/chunksPerDim
	}

	for _, i := range pick(rng, len(present), o.ChunkShare) {
		slot := present[i]
		loc := binary.BigEndian.Uint32(header[4*slot:])
		off, have := int(loc>>8), int(loc&0xff)
		// The new chunk is about the old one's size, from 10% smaller to
		// 15% larger (a day of play adds entities, light, blocks): some
		// outgrow their sectors. One trial chunk calibrates the richness.
		var lb [4]byte
		if _, err := f.ReadAt(lb[:], int64(off)*sectorSize); err != nil {
			return fmt.Errorf("worldgen: mutate: %s: slot %d: %w", rel, slot, err)
		}
		oldLen := int(binary.BigEndian.Uint32(lb[:]))
		if oldLen < 2 || 4+oldLen > have*sectorSize {
			return fmt.Errorf("worldgen: mutate: %s: slot %d: chunk length %d does not fit its %d sectors; not a region file worldgen wrote", rel, slot, oldLen, have)
		}
		want := float64(oldLen) * (0.9 + 0.25*w.rng.Float64())
		cx, cz := chunkAt(slot)
		pcg := *w.pcg // the trial and the chunk draw the same stream
		rich := min(4, max(0.15, want/d.typical))
		rich = min(4, max(0.15, rich*want/float64(len(w.chunk(d, cx, cz, rich)))))
		*w.pcg = pcg
		data := w.chunk(d, cx, cz, rich)
		if need := (4 + len(data) + 1 + sectorSize - 1) / sectorSize; need <= have {
			rep.ChunksInPlace++
		} else {
			off = -1
			rep.ChunksMoved++
		}
		if _, err := write(slot, off, data); err != nil {
			return err
		}
		rep.ChunksRewritten++
	}
	if o.NewChunks > 0 {
		w.rng.Shuffle(len(empty), func(i, j int) { empty[i], empty[j] = empty[j], empty[i] })
		for _, slot := range empty[:min(len(empty), o.NewChunks)] {
			cx, cz := chunkAt(slot)
			if _, err := write(slot, -1, w.chunk(d, cx, cz, 0.5+w.rng.Float64())); err != nil {
				return err
			}
			rep.ChunksAdded++
		}
	}
	for s := range headerSize / sectorSize {
		if !bytes.Equal(header[s*sectorSize:(s+1)*sectorSize], before[s*sectorSize:(s+1)*sectorSize]) {
			if _, err := f.WriteAt(header[s*sectorSize:(s+1)*sectorSize], int64(s)*sectorSize); err != nil {
				return fmt.Errorf("worldgen: mutate: %s: %w", rel, err)
			}
			rep.TableBytes += sectorSize
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("worldgen: mutate: %s: %w", rel, err)
	}
	t := dayOfPlay.Add(time.Duration(rng.Int64N(int64(24 * time.Hour)))).Truncate(time.Second)
	if err := os.Chtimes(name, t, t); err != nil {
		return fmt.Errorf("worldgen: mutate: %w", err)
	}
	return nil
}

// mutatePlayers saves a share of the players again, as the game does when
// they log out (playerdata/<uuid>.dat becomes .dat_old, then a new .dat,
// stats and advancements), and lets new players join.
func (w *worker) mutatePlayers(dir string, rng *rand.Rand, o MutateOptions, rep *MutateReport) error {
	pd := filepath.Join(dir, "world", "playerdata")
	names, err := filepath.Glob(filepath.Join(pd, "*.dat"))
	if err != nil {
		return fmt.Errorf("worldgen: mutate: listing players: %w", err)
	}
	slices.Sort(names)
	var saved []player
	for _, i := range pick(rng, len(names), o.PlayerShare) {
		u := strings.TrimSuffix(filepath.Base(names[i]), ".dat")
		saved = append(saved, player{uuid: u, name: playerName(rng, i), activity: rng.Float64() * rng.Float64()})
	}
	var joined []player
	for i := range max(0, o.NewPlayers) {
		joined = append(joined, player{uuid: uuid(rng), name: playerName(rng, len(names)+i), activity: rng.Float64() * 0.05})
	}
	written := func(rel string) error {
		name := filepath.Join(dir, filepath.FromSlash(rel))
		t := dayOfPlay.Add(time.Duration(rng.Int64N(int64(24 * time.Hour)))).Truncate(time.Second)
		if err := os.Chtimes(name, t, t); err != nil {
			return fmt.Errorf("worldgen: mutate: %w", err)
		}
		fi, err := os.Stat(name)
		if err != nil {
			return fmt.Errorf("worldgen: mutate: %w", err)
		}
		rep.PlayerFiles++
		rep.PlayerBytes += fi.Size()
		return nil
	}
	save := func(pl player, isNew bool) error {
		dat := "world/playerdata/" + pl.uuid + ".dat"
		if !isNew {
			if err := os.Rename(filepath.Join(dir, filepath.FromSlash(dat)), filepath.Join(dir, filepath.FromSlash(dat+"_old"))); err != nil {
				return fmt.Errorf("worldgen: mutate: %w", err)
			}
			if err := written(dat + "_old"); err != nil {
				return err
			}
		}
		for _, fl := range []struct {
			rel   string
			write func(f *os.File) error
		}{
			{dat, func(f *os.File) error { return w.playerData(f, pl) }},
			{"world/stats/" + pl.uuid + ".json", func(f *os.File) error { return w.stats(f, pl) }},
			{"world/advancements/" + pl.uuid + ".json", func(f *os.File) error { return w.advancements(f, pl) }},
		} {
			w.pcg.Seed(uint64(rng.Uint64()), uint64(rng.Uint64()))
			if err := replaceFile(filepath.Join(dir, filepath.FromSlash(fl.rel)), fl.write); err != nil {
				return fmt.Errorf("worldgen: mutate: %s: %w", fl.rel, err)
			}
			if err := written(fl.rel); err != nil {
				return err
			}
		}
		return nil
	}
	for _, pl := range saved {
		if err := save(pl, false); err != nil {
			return err
		}
		rep.PlayersSaved++
	}
	for _, pl := range joined {
		if err := save(pl, true); err != nil {
			return err
		}
		rep.PlayersNew++
	}
	return nil
}

// replaceFile writes name anew through write (mode 0644), via a temp file
// renamed over it, as the game saves player files.
func replaceFile(name string, write func(f *os.File) error) error {
	tmp := name + ".worldgen-tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err != nil {
		return errors.Join(err, os.Remove(tmp))
	}
	return nil
}
