// Command worldgen writes a synthetic, deterministic Minecraft (Paper) server
// folder for tests, benchmarks and demos (see package worldgen).
//
//	worldgen [-size 512MiB] [-seed 1] [-players 0] DIR
//	worldgen mutate -world DIR [-seed 1] [-regions 8%] [-chunks 10%] [-new-chunks 3] [-players 5%] [-new-players 2]
//
// DIR must be missing or empty. On success it prints one line: the folder,
// files and bytes written, and how long it took.
//
// mutate applies a "day of play" to a world worldgen wrote (see
// worldgen.Mutate) and prints its report as one JSON object on stdout:
// changed_bytes is what really changed (new chunk sectors, header sectors,
// player files). Exit codes: 0 done, 1 the world could not be written, 2
// bad flags or DIR is not a world worldgen wrote.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/worldbackup/worldbackup/internal/worldgen"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "mutate" {
		return mutate(args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("worldgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	size := fs.String("size", "64MiB", "approximate total size (512MiB, 2GiB, bytes)")
	seed := fs.Int64("seed", 1, "world seed; the same flags write the same bytes")
	players := fs.Int("players", 0, "players with files under world/playerdata (0 = one per 512 KiB)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: worldgen [-size 512MiB] [-seed 1] [-players N] DIR\n"+
			"       worldgen mutate -world DIR [-seed N] ... (worldgen mutate -h)\n\n"+
			"Writes a synthetic Minecraft (Paper) server folder into DIR, which must be missing or empty.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "worldgen: want exactly one DIR argument")
		fs.Usage()
		return 2
	}
	n, err := worldgen.ParseSize(*size)
	if err != nil {
		fmt.Fprintf(stderr, "worldgen: -size: %v\n", err)
		return 2
	}
	o := worldgen.Options{Size: n, Seed: *seed, Players: *players}
	if err := o.Validate(); err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	dir := fs.Arg(0)
	start := time.Now()
	st, err := worldgen.Generate(dir, o)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	d := time.Since(start)
	fmt.Fprintf(stdout, "worldgen: wrote %s: %d files, %d bytes (%s) in %s (%.0f MB/s)\n",
		dir, st.Files, st.Bytes, worldgen.FormatSize(st.Bytes), d.Round(time.Millisecond), float64(st.Bytes)/1e6/d.Seconds())
	return 0
}

// mutate runs `worldgen mutate`: one day of play, the report as JSON.
func mutate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("worldgen mutate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	world := fs.String("world", "", "the server folder worldgen wrote (required)")
	seed := fs.Int64("seed", 1, "selects the files, chunks and new bytes; the same world and flags give the same result")
	regions := shareFlag(fs, "regions", worldgen.DefaultRegionShare, "share of region files touched")
	chunks := shareFlag(fs, "chunks", worldgen.DefaultChunkShare, "share of a touched region file's chunks rewritten")
	players := shareFlag(fs, "players", worldgen.DefaultPlayerShare, "share of players whose files are saved again")
	newChunks := fs.Int("new-chunks", worldgen.DefaultNewChunks, "chunks added per touched region file (-1: none)")
	newPlayers := fs.Int("new-players", worldgen.DefaultNewPlayers, "players who join (-1: none)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: worldgen mutate -world DIR [-seed N] [-regions 8%%] [-chunks 10%%] [-new-chunks 3] [-players 5%%] [-new-players 2]\n\n"+
			"Applies a day of play to a world worldgen wrote: chunks rewritten (in place when they fit, else moved\n"+
			"to the end of the file), chunks added, player files saved, new players. Prints what changed as JSON.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *world == "" || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "worldgen mutate: want -world DIR and no other arguments")
		fs.Usage()
		return 2
	}
	o := worldgen.MutateOptions{Seed: *seed, RegionShare: *regions, ChunkShare: *chunks, PlayerShare: *players,
		NewChunks: *newChunks, NewPlayers: *newPlayers}
	if o.NewChunks == 0 {
		o.NewChunks = -1 // 0 on the command line means none
	}
	if o.NewPlayers == 0 {
		o.NewPlayers = -1
	}
	if err := o.Validate(); err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	rep, err := worldgen.Mutate(*world, o)
	if err != nil {
		fmt.Fprintln(stderr, err)
		if errors.Is(err, worldgen.ErrNotWorld) {
			return 2
		}
		return 1
	}
	b, _ := json.Marshal(rep) // a struct of numbers
	fmt.Fprintf(stdout, "%s\n", b)
	return 0
}

// shareFlag defines a flag holding a share, given as 8% or 0.08.
func shareFlag(fs *flag.FlagSet, name string, def float64, usage string) *float64 {
	v := def
	fs.Func(name, fmt.Sprintf("%s, as 8%% or 0.08 (default %g%%)", usage, 100*def), func(s string) error {
		t := strings.TrimSpace(s)
		div := 1.0
		if strings.HasSuffix(t, "%") {
			t, div = strings.TrimSuffix(t, "%"), 100
		}
		f, err := strconv.ParseFloat(t, 64)
		if err != nil || f <= 0 || f/div > 1 {
			return fmt.Errorf("%q: want a share in (0, 1], like 8%% or 0.08", s)
		}
		v = f / div
		return nil
	})
	return &v
}
