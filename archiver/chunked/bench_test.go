//go:build linux

package chunked

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/worldbackup/worldbackup/archiver/store"
	"github.com/worldbackup/worldbackup/archiver/tarstream"
	"github.com/worldbackup/worldbackup/internal/worldgen"
)

// BenchmarkWrite writes a first chunked run (no previous run: every blob
// hashed, tried with zstd and stored) of a generated world into a folder
// store in a temp folder, the world read from the page cache. Set
// CHUNKED_BENCH_WORLD to one of make bench's worlds (.bench/worlds/...) to
// measure it instead of a 128 MiB one; bytes/op is the file data archived.
// With -cpuprofile it shows where a first backup's CPU goes; the sealed
// case is an encrypted run's (a Sealer), the plain one a run in the clear.
func BenchmarkWrite(b *testing.B) {
	root := os.Getenv("CHUNKED_BENCH_WORLD")
	if root == "" {
		root = filepath.Join(b.TempDir(), "world")
		if _, err := worldgen.Generate(root, worldgen.Options{Size: 128 << 20, Seed: 1}); err != nil {
			b.Fatal(err)
		}
	}
	warm, err := tarstream.Write(b.Context(), discard{}, root, tarstream.Options{Compression: tarstream.None, Excludes: tarstream.DefaultExcludes})
	if err != nil {
		b.Fatal(err)
	}
	for _, sealed := range []bool{false, true} {
		name := "plain"
		var sl *Sealer
		if sealed {
			name, sl = "sealed", NewSealer([32]byte{1, 2, 3})
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(warm.InputBytes)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				st, err := store.NewLocal(b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				i++
				res, err := Write(b.Context(), st, root, Options{Server: "bench", RunID: "r" + string(rune('a'+i%26)),
					Tar: tarstream.Options{Excludes: tarstream.DefaultExcludes}, Sealer: sl})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(res.AddedBytes)/float64(warm.InputBytes), "stored/in")
			}
		})
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
func (discard) Close() error                { return nil }
