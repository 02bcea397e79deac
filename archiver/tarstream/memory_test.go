package tarstream

import (
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestWriteMemoryBounded: the stream allocates the same whatever the size
// of the files, so nothing is buffered in proportion to the world.
func TestWriteMemoryBounded(t *testing.T) {
	for _, c := range Compressions {
		t.Run(string(c), func(t *testing.T) {
			alloc := func(size int64) uint64 {
				root := t.TempDir()
				f, err := os.Create(filepath.Join(root, "big.mca"))
				if err != nil {
					t.Fatal(err)
				}
				// Sparse: costs no disk; the stream reads zeros.
				if err := f.Truncate(size); err != nil {
					t.Fatal(err)
				}
				f.Close()
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				if _, err := Write(t.Context(), io.Discard, root, Options{Compression: c}); err != nil {
					t.Fatal(err)
				}
				runtime.ReadMemStats(&after)
				return after.TotalAlloc - before.TotalAlloc
			}
			small, large := alloc(16<<20), alloc(128<<20)
			t.Logf("allocated %d KiB for 16 MiB, %d KiB for 128 MiB", small>>10, large>>10)
			if large > 2*small+(4<<20) {
				t.Errorf("allocations grow with the data: %d KiB for 16 MiB, %d KiB for 128 MiB", small>>10, large>>10)
			}
		})
	}
}
