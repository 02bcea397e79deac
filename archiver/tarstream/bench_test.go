//go:build linux

package tarstream

import (
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/worldbackup/worldbackup/internal/worldgen"
)

// benchWorldSize is the size of the world BenchmarkWrite archives; override
// it with TARSTREAM_BENCH_SIZE (e.g. 1GiB, like make bench), or archive an
// existing world folder (one of make bench's under .bench/worlds) with
// TARSTREAM_BENCH_WORLD.
const benchWorldSize = 128 << 20

// BenchmarkWrite streams a generated world (Anvil-like region files and
// thousands of small player files) through Write, with the default excludes,
// into a temp file (written, not fsynced) and into nothing, for each
// compression. The world is generated once and read from the page cache;
// bytes/op is the file data archived.
func BenchmarkWrite(b *testing.B) {
	size := int64(benchWorldSize)
	if s := os.Getenv("TARSTREAM_BENCH_SIZE"); s != "" {
		var err error
		if size, err = worldgen.ParseSize(s); err != nil {
			b.Fatalf("TARSTREAM_BENCH_SIZE: %v", err)
		}
	}
	root := os.Getenv("TARSTREAM_BENCH_WORLD")
	if root == "" {
		root = filepath.Join(b.TempDir(), "world")
		if _, err := worldgen.Generate(root, worldgen.Options{Size: size, Seed: 1}); err != nil {
			b.Fatal(err)
		}
	}
	// Warm the page cache and learn the bytes archived.
	warm, err := Write(b.Context(), discard{}, root, Options{Compression: None, Excludes: DefaultExcludes})
	if err != nil {
		b.Fatal(err)
	}
	out := filepath.Join(b.TempDir(), "archive")
	for _, c := range Compressions {
		for _, dst := range []string{"file", "discard"} {
			b.Run(string(c)+"/"+dst, func(b *testing.B) {
				b.SetBytes(warm.InputBytes)
				b.ReportAllocs()
				var size int64
				cpu0 := cpuTime(b)
				for b.Loop() {
					var w io.WriteCloser = discard{}
					if dst == "file" {
						f, err := os.Create(out)
						if err != nil {
							b.Fatal(err)
						}
						w = f
					}
					res, err := Write(b.Context(), w, root, Options{Compression: c, Excludes: DefaultExcludes})
					if err != nil {
						b.Fatal(err)
					}
					if err := w.Close(); err != nil {
						b.Fatal(err)
					}
					if res.InputBytes != warm.InputBytes {
						b.Fatalf("archived %d bytes, want %d", res.InputBytes, warm.InputBytes)
					}
					size = res.Size
				}
				b.ReportMetric(float64(size)/float64(warm.InputBytes), "ratio")
				b.ReportMetric((cpuTime(b)-cpu0).Seconds()/float64(b.N), "cpu-s/op")
			})
		}
	}
}

// cpuTime returns the user and system CPU time the process has used so far
// (all its threads): on a shared machine it varies less than wall time.
func cpuTime(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// discard is io.Discard with a Close, and without io.ReaderFrom, so the
// stream's own write path is measured.
type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
func (discard) Close() error                { return nil }
