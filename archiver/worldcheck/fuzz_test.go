package worldcheck

import (
	"path/filepath"
	"testing"
	"time"
)

// FuzzRegion feeds arbitrary region files (seeded with valid ones of every
// compression and broken tables) to Check and checks that nothing panics,
// that a failed check names a problem, and that the check ends. Run it with
//
//	go test ./archiver/worldcheck -run '^$' -fuzz FuzzRegion -fuzztime 20s -fuzzminimizetime 10x
//
// (minimizing a new input by time spends most of a short run on it).
func FuzzRegion(f *testing.F) {
	now := uint32(time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC).Unix())
	for comp := byte(1); comp <= 4; comp++ {
		f.Add(regionFile(map[int][]byte{0: compress(f, comp, chunkNBT(f, 0, 0)), 33: compress(f, comp, chunkNBT(f, 1, 1))},
			map[int]byte{0: comp, 33: comp}, now))
	}
	f.Add(regionFile(map[int][]byte{5: nested(600)}, map[int]byte{5: 3}, now))
	f.Add(regionFile(map[int][]byte{5: nil}, map[int]byte{5: 130}, now))
	f.Add(make([]byte, headerSize))
	f.Add([]byte{})
	// One folder for all inputs: a worker runs them one at a time.
	dir := f.TempDir()
	writeFile(f, filepath.Join(dir, "level.dat"), gzipNBT(f, map[string]any{"Data": map[string]any{"DataVersion": int32(4189)}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		writeFile(t, filepath.Join(dir, "region", "r.0.0.mca"), data)
		res, err := Check(t.Context(), dir, Options{Now: testNow})
		if err != nil {
			t.Fatalf("Check: %v", err)
		}
		if (res.Status == StatusOK) != (res.ProblemsTotal == 0) {
			t.Fatalf("status %s with %d problems", res.Status, res.ProblemsTotal)
		}
		if res.ChunksChecked > 1024 {
			t.Fatalf("checked %d chunks of one region", res.ChunksChecked)
		}
	})
}

// FuzzChunk feeds arbitrary chunk payloads, by compression byte, to the
// decompression and NBT checks: nothing panics, nothing decompresses past
// MaxDocument. Run it with
//
//	go test ./archiver/worldcheck -run '^$' -fuzz FuzzChunk -fuzztime 20s
func FuzzChunk(f *testing.F) {
	for comp := byte(1); comp <= 4; comp++ {
		f.Add(comp, compress(f, comp, chunkNBT(f, 3, 4)))
	}
	f.Add(byte(3), nested(600))
	f.Add(byte(3), []byte{tagCompound, 0, 0, tagList, 0, 1, 'l', tagCompound, 0x7f, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, comp byte, payload []byte) {
		c := &checker{}
		err := c.decompress(comp, bytesReader(payload))
		if c.buf.Len() > MaxDocument {
			t.Fatalf("decompressed %d bytes, above the cap", c.buf.Len())
		}
		if err == nil {
			_, _, _ = checkShape(c.buf.Bytes())
		}
	})
}
