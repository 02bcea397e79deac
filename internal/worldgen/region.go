package worldgen

import (
	"encoding/binary"
	"fmt"
	"hash/adler32"
	"math"
	"os"
	"regexp"
	"slices"
)

// Anvil region layout.
const (
	sectorSize   = 4096
	headerSize   = 2 * sectorSize // 1024 locations, then 1024 timestamps
	chunksPerDim = 32             // a region is 32×32 chunks
	slots        = chunksPerDim * chunksPerDim

	// Region file sizes, as the contract asks (a dimension whose whole
	// budget is below minRegion gets one smaller file).
	minRegion = 1 << 20
	maxRegion = 10 << 20

	compressionZlib = 2
	dataVersion     = 4189 // Minecraft 1.21.4
)

// regionName matches a region file's name, r.X.Z.mca, capturing X and Z.
var regionName = regexp.MustCompile(`^r\.(-?\d+)\.(-?\d+)\.mca$`)

// dimension describes one of the three worlds of a Paper server.
type dimension struct {
	dir       string   // region folder, relative to the server folder
	share     float64  // share of the region budget
	maxRegion int64    // largest region file drawn for this dimension
	minY      int      // lowest section index
	sections  int      // sections per chunk
	solid     int      // typical number of non-air sections
	typical   float64  // typical on-disk chunk size in bytes (sectors included)
	blocks    []string // palette candidates; blocks[0] is the filler
	air       string
	biomes    []string
	sky       bool // has sky light
}

var dimensions = []dimension{
	{
		dir: "world/region", share: 0.75, maxRegion: maxRegion,
		minY: -4, sections: 24, solid: 9, typical: 10 << 10,
		blocks: []string{
			"minecraft:stone", "minecraft:deepslate", "minecraft:dirt", "minecraft:grass_block",
			"minecraft:andesite", "minecraft:diorite", "minecraft:granite", "minecraft:tuff",
			"minecraft:gravel", "minecraft:water", "minecraft:lava", "minecraft:coal_ore",
			"minecraft:iron_ore", "minecraft:copper_ore", "minecraft:deepslate_iron_ore",
			"minecraft:deepslate_diamond_ore", "minecraft:redstone_ore", "minecraft:cave_air",
			"minecraft:oak_log", "minecraft:oak_leaves", "minecraft:short_grass", "minecraft:sand",
			"minecraft:bedrock", "minecraft:glow_lichen",
		},
		air:    "minecraft:air",
		biomes: []string{"minecraft:plains", "minecraft:forest", "minecraft:river", "minecraft:dripstone_caves", "minecraft:lush_caves", "minecraft:deep_dark"},
		sky:    true,
	},
	{
		dir: "world_nether/DIM-1/region", share: 0.17, maxRegion: maxRegion,
		minY: 0, sections: 16, solid: 8, typical: 8 << 10,
		blocks: []string{
			"minecraft:netherrack", "minecraft:lava", "minecraft:soul_sand", "minecraft:magma_block",
			"minecraft:basalt", "minecraft:blackstone", "minecraft:nether_quartz_ore", "minecraft:nether_gold_ore",
			"minecraft:glowstone", "minecraft:gravel", "minecraft:crimson_nylium", "minecraft:bedrock",
			"minecraft:warped_nylium", "minecraft:soul_soil", "minecraft:ancient_debris", "minecraft:nether_wart_block",
			"minecraft:crimson_stem", "minecraft:shroomlight",
		},
		air:    "minecraft:air",
		biomes: []string{"minecraft:nether_wastes", "minecraft:crimson_forest", "minecraft:soul_sand_valley", "minecraft:basalt_deltas"},
	},
	{
		dir: "world_the_end/DIM1/region", share: 0.08, maxRegion: 4 << 20,
		minY: 0, sections: 16, solid: 3, typical: 5 << 10,
		blocks: []string{
			"minecraft:end_stone", "minecraft:obsidian", "minecraft:chorus_plant", "minecraft:chorus_flower",
			"minecraft:purpur_block", "minecraft:purpur_pillar", "minecraft:purpur_stairs", "minecraft:purpur_slab",
			"minecraft:end_rod", "minecraft:end_stone_bricks", "minecraft:magenta_stained_glass", "minecraft:ender_chest",
			"minecraft:purple_shulker_box", "minecraft:iron_bars", "minecraft:bedrock", "minecraft:end_gateway",
			"minecraft:dragon_head",
		},
		air:    "minecraft:air",
		biomes: []string{"minecraft:the_end", "minecraft:end_highlands", "minecraft:end_midlands", "minecraft:small_end_islands"},
	},
}

// regionFiles splits budget bytes over the dimensions' region files.
func (p *plan) regionFiles(budget int64) []file {
	var files []file
	for di := range dimensions {
		d := &dimensions[di]
		targets := splitBudget(p, int64(float64(budget)*d.share), d.maxRegion)
		for i, t := range targets {
			x, z := spiral(i)
			files = append(files, file{
				rel:   fmt.Sprintf("%s/r.%d.%d.mca", d.dir, x, z),
				mode:  0o644,
				mtime: p.mtime(),
				write: func(w *worker, f *os.File) error { return w.region(f, d, x, z, t) },
			})
		}
	}
	return files
}

// splitBudget draws region sizes in [minRegion, maxSize) until budget is
// used up; a budget below minRegion becomes one smaller region.
func splitBudget(p *plan, budget, maxSize int64) []int64 {
	hi := maxSize - 64<<10 // room for the last chunk's overshoot
	var out []int64
	for budget > 0 {
		// Skewed towards large files: regions around spawn are fully explored.
		t := minRegion + int64(float64(hi-minRegion)*math.Pow(p.rng.Float64(), 0.6))
		if rest := budget - t; rest < minRegion {
			if budget <= hi {
				t = budget
			} else {
				t = budget - minRegion
			}
		}
		out = append(out, t)
		budget -= t
	}
	return out
}

// spiral returns the i-th region coordinates of a square spiral around spawn
// (0,0), (1,0), (1,1), (0,1), (-1,1), (-1,0), ...
func spiral(i int) (x, z int) {
	dx, dz := 1, 0
	for leg, n := 1, 0; ; leg++ {
		for range 2 {
			for range leg {
				if n == i {
					return x, z
				}
				x, z, n = x+dx, z+dz, n+1
			}
			dx, dz = -dz, dx
		}
	}
}

// region writes one region file of about target bytes: chunks first, from
// sector 2 on, then the header with their locations and timestamps.
func (w *worker) region(f *os.File, d *dimension, rx, rz int, target int64) error {
	bw := w.stream(f)
	if _, err := f.Seek(headerSize, 0); err != nil {
		return err
	}
	var header [headerSize]byte

	// Explored chunks form a blob around a random point of the region.
	cx0, cz0 := w.rng.Float64()*chunksPerDim, w.rng.Float64()*chunksPerDim
	var order [slots]uint16
	var dist [slots]float64
	for i := range order {
		order[i] = uint16(i)
		dx, dz := float64(i%chunksPerDim)-cx0, float64(i/chunksPerDim)-cz0
		dist[i] = dx*dx + dz*dz + w.rng.Float64()*60
	}
	slices.SortFunc(order[:], func(a, b uint16) int {
		switch da, db := dist[a], dist[b]; {
		case da < db:
			return -1
		case da > db:
			return 1
		}
		return int(a) - int(b)
	})

	planned := min(slots, max(1, int(float64(target)/d.typical)))
	written := int64(headerSize)
	sector := headerSize / sectorSize
	perRich := d.typical // running estimate of on-disk bytes per unit of richness
	var pad [sectorSize]byte
	for used, slot := range order {
		if written >= target {
			break
		}
		// Richness steers chunk size so the region lands on its target.
		want := float64(target-written) / float64(max(1, planned-used))
		rich := min(4, max(0.15, want/perRich*(0.7+0.6*w.rng.Float64())))
		cx, cz := rx*chunksPerDim+int(slot)%chunksPerDim, rz*chunksPerDim+int(slot)/chunksPerDim
		data := w.chunk(d, cx, cz, rich)
		length := len(data) + 1
		n := (4 + length + sectorSize - 1) / sectorSize
		if written+int64(n)*sectorSize > maxRegion {
			break
		}
		var head [5]byte
		binary.BigEndian.PutUint32(head[:], uint32(length))
		head[4] = compressionZlib
		bw.Write(head[:])
		bw.Write(data)
		bw.Write(pad[:n*sectorSize-4-length])

		binary.BigEndian.PutUint32(header[4*slot:], uint32(sector)<<8|uint32(n))
		ts := epoch.Unix() + w.rng.Int64N(30*24*3600)
		binary.BigEndian.PutUint32(header[sectorSize+4*int(slot):], uint32(ts))
		sector += n
		written += int64(n) * sectorSize
		perRich = 0.8*perRich + 0.2*float64(n*sectorSize)/rich
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	_, err := f.WriteAt(header[:], 0)
	return err
}

// chunk builds one chunk's NBT and returns it zlib-compressed (valid until
// the next call). rich scales the number of non-air sections and how varied
// their blocks are, so the compressed size grows roughly linearly with it.
func (w *worker) chunk(d *dimension, cx, cz int, rich float64) []byte {
	r := w.rng
	n := &w.n
	n.reset()
	w.spans = w.spans[:0]
	n.compound("")
	n.int("DataVersion", dataVersion)
	n.int("xPos", int32(cx))
	n.int("yPos", int32(d.minY))
	n.int("zPos", int32(cz))
	n.str("Status", "minecraft:full")
	n.long("LastUpdate", 100000+r.Int64N(5_000_000))
	n.long("InhabitedTime", r.Int64N(200_000))
	n.byteTag("isLightOn", 1)

	solid := min(d.sections, max(1, int(float64(d.solid)*min(rich, 1.5)+r.Float64())))
	n.list("sections", tagCompound, d.sections)
	for s := range d.sections {
		n.byteTag("Y", int8(d.minY+s))
		n.compound("block_states")
		if s < solid {
			w.section(d, min(1, rich*(0.25+0.5*r.Float64())))
		} else {
			n.list("palette", tagCompound, 1)
			n.str("Name", d.air)
			n.end()
		}
		n.end()
		n.compound("biomes")
		nb := 1 + r.IntN(min(3, len(d.biomes)))
		n.list("palette", tagString, nb)
		start := r.IntN(len(d.biomes) - nb + 1)
		for _, b := range d.biomes[start : start+nb] {
			n.elemStr(b)
		}
		if nb > 1 {
			n.longArray("data", 2) // 64 entries of 1 or 2 bits
			n.elemLong(r.Uint64() & r.Uint64())
			n.elemLong(r.Uint64() & r.Uint64())
		}
		n.end()
		// Light arrays only where light changes: around the surface, and
		// in some underground sections (torches, lava).
		if d.sky && s >= solid-2 && s <= solid+2 {
			n.byteArray("SkyLight", w.light(s >= solid, 24))
		}
		if s < solid && r.IntN(3) == 0 {
			n.byteArray("BlockLight", w.light(false, 8))
		}
		n.end()
	}

	n.compound("Heightmaps")
	for _, name := range []string{"MOTION_BLOCKING", "MOTION_BLOCKING_NO_LEAVES", "OCEAN_FLOOR", "WORLD_SURFACE"} {
		n.longArray(name, 37) // 256 entries of 9 bits
		base := uint64(60 + r.IntN(40))
		for range 37 {
			x := r.Uint64()
			var v uint64
			for k := range 7 {
				v |= (base + x>>(3*k)&7) << (9 * k)
			}
			n.elemLong(v)
		}
	}
	n.end()

	entities := r.IntN(3)
	n.list("block_entities", tagCompound, entities)
	for range entities {
		n.str("id", "minecraft:chest")
		n.int("x", int32(cx*16+r.IntN(16)))
		n.int("y", int32(r.IntN(120)))
		n.int("z", int32(cz*16+r.IntN(16)))
		n.byteTag("keepPacked", 0)
		items := r.IntN(12)
		n.list("Items", tagCompound, items)
		for range items {
			n.byteTag("Slot", int8(r.IntN(27)))
			n.str("id", itemNames[r.IntN(len(itemNames))])
			n.int("count", int32(1+r.IntN(64)))
			n.end()
		}
		n.end()
	}
	n.list("block_ticks", tagEnd, 0)
	n.list("fluid_ticks", tagEnd, 0)
	n.list("PostProcessing", tagList, d.sections)
	for range d.sections {
		n.b = append(n.b, tagShort, 0, 0, 0, 0)
	}
	n.compound("structures")
	n.compound("References")
	n.end()
	n.compound("starts")
	n.end()
	n.end()
	n.end()
	return w.zlib(n.b, w.spans)
}

// section writes a block_states palette and its packed data: 16 blocks of
// 4 bits per long, the filler block (index 0) where the terrain is uniform
// and a stretch of mixed blocks (uniformly random indices) covering a share
// variety of the section. A section without variety is all filler: a
// one-entry palette and no data, as the game writes it.
func (w *worker) section(d *dimension, variety float64) {
	r, n := w.rng, &w.n
	mixed := int(variety * 256)
	if mixed == 0 {
		n.list("palette", tagCompound, 1)
		n.str("Name", d.blocks[0])
		n.end()
		return
	}
	// Sixteen entries, so every 4-bit index is valid: the filler, then 15
	// distinct others from a random start.
	n.list("palette", tagCompound, 16)
	n.str("Name", d.blocks[0])
	n.end()
	off := r.IntN(len(d.blocks) - 1)
	for i := range 15 {
		n.str("Name", d.blocks[1+(off+i)%(len(d.blocks)-1)])
		n.end()
	}
	n.longArray("data", 256)
	start := r.IntN(256 - mixed + 1)
	n.b = append(n.b, zeros[:8*start]...)
	span := [2]int{len(n.b), len(n.b) + 8*mixed}
	for range mixed {
		n.elemLong(r.Uint64())
	}
	n.b = append(n.b, zeros[:8*(256-start-mixed)]...)
	w.spans = append(w.spans, span)
}

// zlib returns raw as a zlib stream (valid until the next call). The spans
// of raw hold uniformly random bytes that no compressor can shrink, so they
// go into stored blocks, between deflate segments of the rest; each segment
// starts a fresh compressor, so no back-reference crosses a stored block.
// That yields what a compressor would emit, at a fraction of the cost.
func (w *worker) zlib(raw []byte, spans [][2]int) []byte {
	w.zbuf.Reset()
	w.zbuf.Write([]byte{0x78, 0x01}) // deflate, 32 KiB window, fastest
	prev := 0
	for _, s := range spans {
		w.fw.Reset(&w.zbuf)
		w.fw.Write(raw[prev:s[0]])
		w.fw.Flush() // ends on a byte boundary
		for p := s[0]; p < s[1]; {
			k := min(s[1]-p, 0xffff)
			w.zbuf.Write([]byte{0, byte(k), byte(k >> 8), ^byte(k), ^byte(k >> 8)})
			w.zbuf.Write(raw[p : p+k])
			p += k
		}
		prev = s[1]
	}
	w.fw.Reset(&w.zbuf)
	w.fw.Write(raw[prev:])
	w.fw.Close()
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], adler32.Checksum(raw))
	w.zbuf.Write(sum[:])
	return w.zbuf.Bytes()
}

// light returns a 2048-byte light array: full (0xff) or dark, with a few
// varied bytes. The slice is valid until the next call.
func (w *worker) light(lit bool, noise int) []byte {
	b := w.raw[:2048]
	if lit {
		copy(b, fullLight[:])
	} else {
		clear(b)
	}
	for range w.rng.IntN(noise + 1) {
		b[w.rng.IntN(len(b))] = byte(w.rng.Uint32())
	}
	return b
}

// zeros is 256 zero longs (a section of filler blocks); read only.
var zeros [256 * 8]byte

// fullLight is a fully lit light array; read only.
var fullLight = func() (b [2048]byte) {
	for i := range b {
		b[i] = 0xff
	}
	return b
}()
