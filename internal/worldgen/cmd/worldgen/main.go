// Command worldgen writes a synthetic, deterministic Minecraft (Paper) server
// folder for tests, benchmarks and demos (see package worldgen).
//
//	worldgen [-size 512MiB] [-seed 1] [-players 0] DIR
//
// DIR must be missing or empty. On success it prints one line: the folder,
// files and bytes written, and how long it took.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/worldbackup/worldbackup/internal/worldgen"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("worldgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	size := fs.String("size", "64MiB", "approximate total size (512MiB, 2GiB, bytes)")
	seed := fs.Int64("seed", 1, "world seed; the same flags write the same bytes")
	players := fs.Int("players", 0, "players with files under world/playerdata (0 = one per 512 KiB)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: worldgen [-size 512MiB] [-seed 1] [-players N] DIR\n\n"+
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
