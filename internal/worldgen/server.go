package worldgen

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"
)

// smallFiles lists everything but the region files: per-world metadata,
// player files, the server's configuration, and the jars, cache and logs
// that backups exclude by default.
func (p *plan) smallFiles() []file {
	players := p.players()
	var files []file
	add := func(rel string, mode os.FileMode, write func(w *worker, f *os.File) error) {
		files = append(files, file{rel: rel, mode: mode, mtime: p.mtime(), write: write})
	}
	seed := p.rng.Int64()

	for _, wd := range []struct{ dir, name string }{
		{"world", "world"}, {"world_nether", "world_nether"}, {"world_the_end", "world_the_end"},
	} {
		for _, ld := range []string{"level.dat", "level.dat_old"} {
			add(wd.dir+"/"+ld, 0o600, func(w *worker, f *os.File) error { return w.levelDat(f, wd.name, seed) })
		}
		add(wd.dir+"/uid.dat", 0o644, func(w *worker, f *os.File) error { return w.random(f, 16) })
		add(wd.dir+"/session.lock", 0o644, func(w *worker, f *os.File) error { return writeString(f, "☃") })
	}
	for _, d := range []string{"raids", "random_sequences", "scoreboard", "chunks"} {
		add("world/data/"+d+".dat", 0o644, func(w *worker, f *os.File) error { return w.dataFile(f) })
	}
	add("world_the_end/data/raids_end.dat", 0o644, func(w *worker, f *os.File) error { return w.dataFile(f) })

	files = append(files, p.playerFiles(players)...)

	configs := configFiles(players)
	for _, name := range slices.Sorted(maps.Keys(configs)) { // map order would break determinism
		body := configs[name]
		add(name, 0o644, func(w *worker, f *os.File) error { return writeString(f, body) })
	}

	size := p.o.Size
	excluded := func(n int64) int64 { return max(16<<10, n) }
	add("paper.jar", 0o644, func(w *worker, f *os.File) error { return w.jar(f, excluded(size/200)) })
	add("cache/mojang_1.21.4.jar", 0o644, func(w *worker, f *os.File) error { return w.jar(f, excluded(size/200)) })
	for _, pl := range plugins {
		add("plugins/"+pl+".jar", 0o644, func(w *worker, f *os.File) error {
			return w.jar(f, excluded(size/200/int64(len(plugins))))
		})
		add("plugins/"+pl+"/config.yml", 0o644, func(w *worker, f *os.File) error { return w.pluginConfig(f, pl) })
	}
	add("logs/latest.log", 0o644, func(w *worker, f *os.File) error { return w.log(f, excluded(size/400), players) })
	for day := 1; day <= 3; day++ {
		add(fmt.Sprintf("logs/2025-03-0%d-1.log.gz", day), 0o644, func(w *worker, f *os.File) error {
			return w.jar(f, excluded(size/1200)) // already-compressed bytes
		})
	}
	return files
}

var plugins = []string{"EssentialsX", "LuckPerms", "WorldEdit", "Vault", "CoreProtect"}

func writeString(f *os.File, s string) error {
	_, err := f.WriteString(s)
	return err
}

// random writes n random bytes.
func (w *worker) random(f *os.File, n int64) error {
	bw := w.stream(f)
	for n > 0 {
		b := w.raw[:min(int64(len(w.raw)), n)]
		for i := 0; i+8 <= len(b); i += 8 {
			v := w.rng.Uint64()
			b[i], b[i+1], b[i+2], b[i+3], b[i+4], b[i+5], b[i+6], b[i+7] =
				byte(v), byte(v>>8), byte(v>>16), byte(v>>24), byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56)
		}
		for i := len(b) &^ 7; i < len(b); i++ {
			b[i] = byte(w.rng.Uint32())
		}
		bw.Write(b)
		n -= int64(len(b))
	}
	return bw.Flush()
}

// jar writes n bytes that look like a zip (compressed, so random after the
// local file header magic).
func (w *worker) jar(f *os.File, n int64) error {
	if _, err := f.WriteString("PK\x03\x04"); err != nil {
		return err
	}
	return w.random(f, n-4)
}

// levelDat writes a gzip NBT level.dat: world settings and game rules.
func (w *worker) levelDat(f *os.File, name string, seed int64) error {
	r, n := w.rng, &w.n
	n.reset()
	n.compound("")
	n.compound("Data")
	n.int("DataVersion", dataVersion)
	n.str("LevelName", name)
	n.int("version", 19133)
	n.compound("Version")
	n.int("Id", dataVersion)
	n.str("Name", "1.21.4")
	n.str("Series", "main")
	n.byteTag("Snapshot", 0)
	n.end()
	n.int("SpawnX", int32(r.IntN(512)-256))
	n.int("SpawnY", 64+int32(r.IntN(16)))
	n.int("SpawnZ", int32(r.IntN(512)-256))
	n.long("Time", 1_000_000+r.Int64N(50_000_000))
	n.long("DayTime", r.Int64N(24000))
	n.long("LastPlayed", epoch.UnixMilli()+r.Int64N(30*24*3600*1000))
	n.int("GameType", 0)
	n.byteTag("Difficulty", 2)
	n.byteTag("hardcore", 0)
	n.byteTag("allowCommands", 0)
	n.byteTag("initialized", 1)
	n.byteTag("raining", int8(r.IntN(2)))
	n.int("rainTime", int32(r.IntN(100000)))
	n.list("ServerBrands", tagString, 1)
	n.elemStr("Paper")
	n.compound("WorldGenSettings")
	n.long("seed", seed)
	n.byteTag("generate_features", 1)
	n.byteTag("bonus_chest", 0)
	n.compound("dimensions")
	for _, d := range []string{"minecraft:overworld", "minecraft:the_nether", "minecraft:the_end"} {
		n.compound(d)
		n.str("type", d)
		n.compound("generator")
		n.str("type", "minecraft:noise")
		n.str("settings", d)
		n.compound("biome_source")
		n.str("type", "minecraft:multi_noise")
		n.str("preset", d)
		n.end()
		n.end()
		n.end()
	}
	n.end()
	n.end()
	n.compound("GameRules")
	for _, g := range gameRules {
		k, v, _ := strings.Cut(g, "=")
		n.str(k, v)
	}
	n.end()
	n.compound("DataPacks")
	n.list("Enabled", tagString, 2)
	n.elemStr("vanilla")
	n.elemStr("file/bukkit")
	n.list("Disabled", tagString, 0)
	n.end()
	n.end()
	n.end()
	return w.gzipTo(f, n.b)
}

// dataFile writes a small gzip NBT file of world/data.
func (w *worker) dataFile(f *os.File) error {
	n := &w.n
	n.reset()
	n.compound("")
	n.compound("data")
	k := w.rng.IntN(40)
	n.list("entries", tagCompound, k)
	for i := range k {
		n.int("id", int32(i))
		n.long("value", w.rng.Int64())
		n.end()
	}
	n.end()
	n.int("DataVersion", dataVersion)
	n.end()
	return w.gzipTo(f, n.b)
}

func (w *worker) pluginConfig(f *os.File, name string) error {
	b := fmt.Appendf(w.text[:0], "# %s configuration\nconfig-version: %d\n", name, 1+w.rng.IntN(9))
	for i := range 20 + w.rng.IntN(60) {
		b = fmt.Appendf(b, "setting-%d:\n  enabled: %t\n  value: %d\n", i, w.rng.IntN(2) == 0, w.rng.IntN(10000))
	}
	w.text = b
	_, err := f.Write(b)
	return err
}

// log writes about n bytes of server log lines.
func (w *worker) log(f *os.File, n int64, players []player) error {
	bw := w.stream(f)
	t := epoch.Add(29 * 24 * time.Hour)
	var written int64
	for written < n {
		t = t.Add(time.Duration(w.rng.IntN(5000)) * time.Millisecond)
		pl := players[w.rng.IntN(len(players))]
		var line []byte
		switch w.rng.IntN(4) {
		case 0:
			line = fmt.Appendf(w.text[:0], "[%s INFO]: %s joined the game\n", t.Format("15:04:05"), pl.name)
		case 1:
			line = fmt.Appendf(w.text[:0], "[%s INFO]: %s lost connection: Disconnected\n", t.Format("15:04:05"), pl.name)
		case 2:
			line = fmt.Appendf(w.text[:0], "[%s INFO]: <%s> %s\n", t.Format("15:04:05"), pl.name, syllables[w.rng.IntN(len(syllables))])
		default:
			line = fmt.Appendf(w.text[:0], "[%s INFO]: UUID of player %s is %s\n", t.Format("15:04:05"), pl.name, pl.uuid)
		}
		w.text = line
		bw.Write(line)
		written += int64(len(line))
	}
	return bw.Flush()
}

// configFiles returns the server's root configuration files by path.
func configFiles(players []player) map[string]string {
	var cache, ops, white strings.Builder
	cache.WriteString("[")
	white.WriteString("[\n")
	for i, p := range players {
		if i > 0 {
			cache.WriteString(",")
		}
		fmt.Fprintf(&cache, `{"name":%q,"uuid":%q,"expiresOn":"2025-04-15 12:00:00 +0000"}`, p.name, p.uuid)
		sep := ",\n"
		if i == len(players)-1 {
			sep = "\n"
		}
		fmt.Fprintf(&white, "  {\n    \"uuid\": %q,\n    \"name\": %q\n  }%s", p.uuid, p.name, sep)
	}
	cache.WriteString("]")
	white.WriteString("]")
	ops.WriteString("[\n")
	fmt.Fprintf(&ops, "  {\n    \"uuid\": %q,\n    \"name\": %q,\n    \"level\": 4,\n    \"bypassesPlayerLimit\": false\n  }\n]", players[0].uuid, players[0].name)
	return map[string]string{
		"server.properties":               serverProperties,
		"eula.txt":                        "#By changing the setting below to TRUE you are indicating your agreement to our EULA (https://aka.ms/MinecraftEULA).\neula=true\n",
		"bukkit.yml":                      "settings:\n  allow-end: true\n  warn-on-overload: true\n  permissions-file: permissions.yml\n  update-folder: update\n  plugin-profiling: false\n  connection-throttle: 4000\n  query-plugins: true\n  deprecated-verbose: default\n  shutdown-message: Server closed\n  minimum-api: none\n  use-map-color-cache: true\nspawn-limits:\n  monsters: 70\n  animals: 10\n  water-animals: 5\n  ambient: 15\nchunk-gc:\n  period-in-ticks: 600\nticks-per:\n  animal-spawns: 400\n  monster-spawns: 1\n  autosave: 6000\naliases: now-in-commands.yml\n",
		"spigot.yml":                      "settings:\n  debug: false\n  save-user-cache-on-stop-only: false\n  bungeecord: false\n  timeout-time: 60\n  restart-on-crash: true\n  restart-script: ./start.sh\n  netty-threads: 4\n  moved-wrongly-threshold: 0.0625\n  moved-too-quickly-multiplier: 10.0\n  log-villager-deaths: true\n  log-named-deaths: true\nworld-settings:\n  default:\n    view-distance: default\n    simulation-distance: default\n    mob-spawn-range: 8\n    item-despawn-rate: 6000\n    merge-radius:\n      item: 0.5\n      exp: -1.0\n",
		"commands.yml":                    "command-block-overrides: []\nignore-vanilla-permissions: false\naliases:\n  icanhasbukkit:\n  - version $1-\n",
		"help.yml":                        "general-topics: {}\namended-topics: {}\nignore-plugins: []\n",
		"permissions.yml":                 "",
		"config/paper-global.yml":         "_version: 29\nchunk-loading-basic:\n  player-max-chunk-generate-rate: -1.0\n  player-max-chunk-load-rate: 100.0\n  player-max-chunk-send-rate: 75.0\nchunk-system:\n  gen-parallelism: default\n  io-threads: -1\n  worker-threads: -1\nconsole:\n  enable-brigadier-completions: true\nmessages:\n  no-permission: <red>I'm sorry, but you do not have permission to perform this command.\nproxies:\n  velocity:\n    enabled: false\n    online-mode: true\n    secret: ''\n",
		"config/paper-world-defaults.yml": "_version: 31\nanticheat:\n  anti-xray:\n    enabled: false\nchunks:\n  auto-save-interval: default\n  max-auto-save-chunks-per-tick: 24\nentities:\n  spawning:\n    despawn-ranges:\n      monster:\n        hard: 128\n        soft: 32\n",
		"ops.json":                        ops.String(),
		"whitelist.json":                  white.String(),
		"banned-players.json":             "[]",
		"banned-ips.json":                 "[]",
		"usercache.json":                  cache.String(),
		"version_history.json":            `{"currentVersion":"git-Paper-232 (MC: 1.21.4)"}`,
	}
}

const serverProperties = `#Minecraft server properties
#Sat Mar 01 00:00:00 UTC 2025
accepts-transfers=false
allow-flight=false
allow-nether=true
broadcast-console-to-ops=true
broadcast-rcon-to-ops=true
bug-report-link=
difficulty=normal
enable-command-block=false
enable-jmx-monitoring=false
enable-query=false
enable-rcon=false
enable-status=true
enforce-secure-profile=true
enforce-whitelist=false
entity-broadcast-range-percentage=100
force-gamemode=false
function-permission-level=2
gamemode=survival
generate-structures=true
generator-settings={}
hardcore=false
hide-online-players=false
initial-disabled-packs=
initial-enabled-packs=vanilla
level-name=world
level-seed=
level-type=minecraft\:normal
log-ips=true
max-chained-neighbor-updates=1000000
max-players=20
max-tick-time=60000
max-world-size=29999984
motd=A Minecraft Server
network-compression-threshold=256
online-mode=true
op-permission-level=4
pause-when-empty-seconds=60
player-idle-timeout=0
prevent-proxy-connections=false
pvp=true
query.port=25565
rate-limit=0
rcon.password=
rcon.port=25575
region-file-compression=deflate
require-resource-pack=false
resource-pack=
resource-pack-id=
resource-pack-prompt=
resource-pack-sha1=
server-ip=
server-port=25565
simulation-distance=10
spawn-monsters=true
spawn-protection=16
sync-chunk-writes=true
text-filtering-config=
text-filtering-version=0
use-native-transport=true
view-distance=10
white-list=false
`

var gameRules = []string{
	"announceAdvancements=true", "blockExplosionDropDecay=true", "commandBlockOutput=true",
	"disableElytraMovementCheck=false", "disableRaids=false", "doDaylightCycle=true", "doEntityDrops=true",
	"doFireTick=true", "doImmediateRespawn=false", "doInsomnia=true", "doLimitedCrafting=false",
	"doMobLoot=true", "doMobSpawning=true", "doPatrolSpawning=true", "doTileDrops=true",
	"doTraderSpawning=true", "doVinesSpread=true", "doWardenSpawning=true", "doWeatherCycle=true",
	"drowningDamage=true", "fallDamage=true", "fireDamage=true", "forgiveDeadPlayers=true",
	"freezeDamage=true", "keepInventory=false", "logAdminCommands=true", "maxCommandChainLength=65536",
	"maxEntityCramming=24", "mobGriefing=true", "naturalRegeneration=true", "playersSleepingPercentage=100",
	"randomTickSpeed=3", "reducedDebugInfo=false", "sendCommandFeedback=true", "showDeathMessages=true",
	"spawnRadius=10", "spectatorsGenerateChunks=true", "universalAnger=false",
}
