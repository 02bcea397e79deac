package worldgen

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"time"
)

// player is one player's identity and how much they played, which scales
// the size of their stats and advancements.
type player struct {
	uuid     string
	name     string
	activity float64 // 0..1, most players near 0 (joined once)
}

func (p *plan) players() []player {
	out := make([]player, p.o.Players)
	for i := range out {
		out[i] = player{
			uuid:     uuid(p.rng),
			name:     playerName(p.rng, i),
			activity: p.rng.Float64() * p.rng.Float64() * p.rng.Float64(),
		}
	}
	return out
}

func uuid(r *rand.Rand) string {
	a, b := r.Uint64(), r.Uint64()
	a = a&^0xf000 | 0x4000     // version 4
	b = b&^(0xc<<60) | 0x8<<60 // variant 10
	return fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", a>>32, a>>16&0xffff, a&0xffff, b>>48, b&0xffffffffffff)
}

func uuidInts(u string) [4]int32 {
	var out [4]int32
	hex := make([]byte, 0, 32)
	for i := 0; i < len(u); i++ {
		if u[i] != '-' {
			hex = append(hex, u[i])
		}
	}
	for i := range out {
		v, _ := strconv.ParseUint(string(hex[8*i:8*i+8]), 16, 32)
		out[i] = int32(uint32(v))
	}
	return out
}

var syllables = []string{"cra", "fty", "mine", "zor", "blo", "ck", "ster", "pix", "el", "dra", "gon", "ny", "kat", "xx", "pro", "noob", "sky", "lar"}

func playerName(r *rand.Rand, i int) string {
	s := ""
	for range 2 + r.IntN(2) {
		s += syllables[r.IntN(len(syllables))]
	}
	name := fmt.Sprintf("%s%d", s, i)
	if len(name) > 16 {
		name = name[len(name)-16:]
	}
	return name
}

// playerFiles lists each player's playerdata (.dat and .dat_old), stats and
// advancements files.
func (p *plan) playerFiles(players []player) []file {
	var files []file
	for _, pl := range players {
		files = append(files,
			file{rel: "world/playerdata/" + pl.uuid + ".dat", mode: 0o644, mtime: p.mtime(),
				write: func(w *worker, f *os.File) error { return w.playerData(f, pl) }},
			file{rel: "world/playerdata/" + pl.uuid + ".dat_old", mode: 0o644, mtime: p.mtime(),
				write: func(w *worker, f *os.File) error { return w.playerData(f, pl) }},
			file{rel: "world/stats/" + pl.uuid + ".json", mode: 0o644, mtime: p.mtime(),
				write: func(w *worker, f *os.File) error { return w.stats(f, pl) }},
			file{rel: "world/advancements/" + pl.uuid + ".json", mode: 0o644, mtime: p.mtime(),
				write: func(w *worker, f *os.File) error { return w.advancements(f, pl) }},
		)
	}
	return files
}

// playerData writes a gzip NBT player file: position, inventory, ender
// chest, recipe book.
func (w *worker) playerData(f *os.File, pl player) error {
	r, n := w.rng, &w.n
	n.reset()
	n.compound("")
	n.int("DataVersion", dataVersion)
	id := uuidInts(pl.uuid)
	n.intArray("UUID", id[:]...)
	n.list("Pos", tagDouble, 3)
	n.elemDouble(r.Float64()*4000 - 2000)
	n.elemDouble(float64(60 + r.IntN(40)))
	n.elemDouble(r.Float64()*4000 - 2000)
	n.list("Rotation", tagFloat, 2)
	n.elemFloat(r.Float32() * 360)
	n.elemFloat(r.Float32()*180 - 90)
	n.float("Health", float32(1+r.IntN(20)))
	n.int("foodLevel", int32(r.IntN(21)))
	n.int("XpLevel", int32(pl.activity*60))
	n.int("SelectedItemSlot", int32(r.IntN(9)))
	n.str("Dimension", []string{"minecraft:overworld", "minecraft:the_nether", "minecraft:the_end"}[r.IntN(3)])
	n.short("Fire", -20)
	n.byteTag("OnGround", 1)
	for _, inv := range []string{"Inventory", "EnderItems"} {
		count := int(pl.activity*36) + r.IntN(4)
		n.list(inv, tagCompound, count)
		for i := range count {
			n.byteTag("Slot", int8(i))
			n.str("id", itemNames[r.IntN(len(itemNames))])
			n.int("count", int32(1+r.IntN(64)))
			n.end()
		}
	}
	n.compound("abilities")
	for _, a := range []string{"invulnerable", "mayfly", "instabuild", "flying", "mayBuild"} {
		n.byteTag(a, 0)
	}
	n.float("walkSpeed", 0.1)
	n.float("flySpeed", 0.05)
	n.end()
	n.compound("recipeBook")
	recipes := int(pl.activity * float64(len(itemNames)))
	n.list("recipes", tagString, recipes)
	for _, it := range itemNames[:recipes] {
		n.elemStr(it)
	}
	n.list("toBeDisplayed", tagString, 0)
	n.end()
	n.compound("Paper")
	n.long("LastLogin", epoch.UnixMilli()+r.Int64N(30*24*3600*1000))
	n.long("LastSeen", epoch.UnixMilli()+r.Int64N(30*24*3600*1000))
	n.end()
	n.compound("bukkit")
	n.str("lastKnownName", pl.name)
	n.long("firstPlayed", epoch.UnixMilli()-r.Int64N(365*24*3600*1000))
	n.end()
	n.end()
	return w.gzipTo(f, n.b)
}

// gzipTo writes b to f through the worker's gzip writer.
func (w *worker) gzipTo(f *os.File, b []byte) error {
	bw := w.stream(f)
	w.gz.Reset(bw)
	if _, err := w.gz.Write(b); err != nil {
		return err
	}
	if err := w.gz.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

// stats writes the compact JSON the game keeps per player.
func (w *worker) stats(f *os.File, pl player) error {
	r := w.rng
	b := append(w.text[:0], `{"stats":{`...)
	cats := []string{"minecraft:mined", "minecraft:used", "minecraft:picked_up", "minecraft:crafted", "minecraft:killed", "minecraft:dropped"}
	for ci, c := range cats {
		if ci > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, c...)
		b = append(b, `":{`...)
		k := 1 + int(pl.activity*float64(len(itemNames)-1)*r.Float64())
		off := r.IntN(len(itemNames) - k + 1)
		for i, it := range itemNames[off : off+k] {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '"')
			b = append(b, it...)
			b = append(b, `":`...)
			b = strconv.AppendInt(b, 1+r.Int64N(1+int64(pl.activity*50000)), 10)
		}
		b = append(b, '}')
	}
	b = append(b, `,"minecraft:custom":{`...)
	for i, c := range customStats {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, c...)
		b = append(b, `":`...)
		b = strconv.AppendInt(b, r.Int64N(1+int64(pl.activity*5_000_000)), 10)
	}
	b = append(b, `}},"DataVersion":`...)
	b = strconv.AppendInt(b, dataVersion, 10)
	b = append(b, '}')
	w.text = b
	_, err := f.Write(b)
	return err
}

// advancements writes the pretty-printed JSON of recipe and story
// advancements a player has earned.
func (w *worker) advancements(f *os.File, pl player) error {
	r := w.rng
	b := append(w.text[:0], "{\n"...)
	k := 2 + int(pl.activity*float64(len(itemNames)+len(storyAdvancements)))
	for i := range k {
		var name, crit string
		if i < len(storyAdvancements) {
			name, crit = storyAdvancements[i], "requirement"
		} else {
			it := itemNames[(i-len(storyAdvancements))%len(itemNames)]
			name, crit = "minecraft:recipes/misc/"+it[len("minecraft:"):], "has_"+it[len("minecraft:"):]
		}
		t := epoch.Add(time.Duration(r.Int64N(int64(30 * 24 * time.Hour)))).Format("2006-01-02 15:04:05 -0700")
		b = fmt.Appendf(b, "  %q: {\n    \"criteria\": {\n      %q: %q\n    },\n    \"done\": true\n  },\n", name, crit, t)
	}
	b = fmt.Appendf(b, "  \"DataVersion\": %d\n}", dataVersion)
	w.text = b
	_, err := f.Write(b)
	return err
}

var storyAdvancements = []string{
	"minecraft:story/root", "minecraft:story/mine_stone", "minecraft:story/upgrade_tools",
	"minecraft:story/smelt_iron", "minecraft:story/obtain_armor", "minecraft:story/lava_bucket",
	"minecraft:story/iron_tools", "minecraft:story/deflect_arrow", "minecraft:story/form_obsidian",
	"minecraft:story/mine_diamond", "minecraft:story/enter_the_nether", "minecraft:story/shiny_gear",
	"minecraft:story/enchant_item", "minecraft:story/cure_zombie_villager", "minecraft:story/follow_ender_eye",
	"minecraft:story/enter_the_end", "minecraft:adventure/root", "minecraft:adventure/sleep_in_bed",
	"minecraft:husbandry/root", "minecraft:husbandry/plant_seed", "minecraft:nether/root",
}

var customStats = []string{
	"minecraft:play_time", "minecraft:time_since_death", "minecraft:time_since_rest", "minecraft:leave_game",
	"minecraft:walk_one_cm", "minecraft:sprint_one_cm", "minecraft:jump", "minecraft:fall_one_cm",
	"minecraft:damage_taken", "minecraft:deaths", "minecraft:mob_kills", "minecraft:total_world_time",
	"minecraft:sneak_time", "minecraft:swim_one_cm", "minecraft:fly_one_cm", "minecraft:open_chest",
}

var itemNames = []string{
	"minecraft:stone", "minecraft:cobblestone", "minecraft:dirt", "minecraft:grass_block", "minecraft:oak_log",
	"minecraft:oak_planks", "minecraft:stick", "minecraft:crafting_table", "minecraft:furnace", "minecraft:chest",
	"minecraft:torch", "minecraft:coal", "minecraft:iron_ore", "minecraft:raw_iron", "minecraft:iron_ingot",
	"minecraft:gold_ingot", "minecraft:diamond", "minecraft:emerald", "minecraft:redstone", "minecraft:lapis_lazuli",
	"minecraft:wooden_pickaxe", "minecraft:stone_pickaxe", "minecraft:iron_pickaxe", "minecraft:diamond_pickaxe",
	"minecraft:iron_sword", "minecraft:diamond_sword", "minecraft:bow", "minecraft:arrow", "minecraft:shield",
	"minecraft:iron_helmet", "minecraft:iron_chestplate", "minecraft:iron_leggings", "minecraft:iron_boots",
	"minecraft:bread", "minecraft:cooked_beef", "minecraft:cooked_porkchop", "minecraft:apple", "minecraft:golden_apple",
	"minecraft:wheat", "minecraft:wheat_seeds", "minecraft:sugar_cane", "minecraft:paper", "minecraft:book",
	"minecraft:bookshelf", "minecraft:enchanting_table", "minecraft:anvil", "minecraft:bucket", "minecraft:water_bucket",
	"minecraft:lava_bucket", "minecraft:flint_and_steel", "minecraft:obsidian", "minecraft:ender_pearl",
	"minecraft:ender_eye", "minecraft:blaze_rod", "minecraft:netherrack", "minecraft:quartz", "minecraft:glowstone_dust",
	"minecraft:sand", "minecraft:glass", "minecraft:glass_pane", "minecraft:white_wool", "minecraft:white_bed",
	"minecraft:oak_door", "minecraft:oak_fence", "minecraft:ladder", "minecraft:rail", "minecraft:powered_rail",
	"minecraft:minecart", "minecraft:hopper", "minecraft:piston", "minecraft:sticky_piston", "minecraft:observer",
	"minecraft:repeater", "minecraft:comparator", "minecraft:lever", "minecraft:stone_button", "minecraft:tnt",
	"minecraft:gunpowder", "minecraft:bone", "minecraft:bone_meal", "minecraft:string", "minecraft:spider_eye",
	"minecraft:rotten_flesh", "minecraft:leather", "minecraft:feather", "minecraft:copper_ingot", "minecraft:amethyst_shard",
	"minecraft:spyglass", "minecraft:deepslate", "minecraft:cobbled_deepslate", "minecraft:tuff", "minecraft:andesite",
	"minecraft:diorite", "minecraft:granite", "minecraft:smooth_stone", "minecraft:stone_bricks", "minecraft:bricks",
	"minecraft:terracotta", "minecraft:shulker_box", "minecraft:elytra", "minecraft:firework_rocket",
	"minecraft:netherite_ingot", "minecraft:netherite_pickaxe", "minecraft:totem_of_undying", "minecraft:trident",
}
