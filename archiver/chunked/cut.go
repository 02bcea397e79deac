package chunked

import (
	"encoding/binary"
	"slices"
	"strings"

	"github.com/restic/chunker"
)

// Region file layout (Anvil): an 8 KiB header (1024 big-endian locations,
// then 1024 timestamps), then 4 KiB sectors. A location is a 3-byte sector
// offset and a 1-byte sector count; a chunk starts with its 4-byte length.
const (
	sectorSize   = 4096
	regionHeader = 2 * sectorSize
	regionSlots  = 1024
)

// Content-defined chunking of other files: chunks of 64 KiB to 1 MiB,
// about 256 KiB on average, cut with a fixed polynomial in the clear and
// one derived from the data key when sealed (Sealer.chunkerPol); it names
// the cut points, which only the writer needs. Files up to cdcMin are one
// blob.
const (
	cdcPol     = chunker.Pol(0x3DA3358B4DC173)
	cdcMin     = 64 << 10
	cdcMax     = MaxBlob
	cdcAvgBits = 18
)

// isRegion reports whether the file named path is cut as a region file.
func isRegion(path string) bool {
	return strings.HasSuffix(path, ".mca") || strings.HasSuffix(path, ".mcc")
}

// regionCuts returns the cut points of a region file of size bytes whose
// header is hdr: the end of the header, every chunk's first and past-last
// sector (clamped to size), and size; starts marks the cut points where a
// chunk begins. ok is false when the location table is not one the game
// writes (an entry before the header or past the end of the file, or two
// chunks sharing sectors): then the file is cut like any other.
func regionCuts(hdr []byte, size int64) (cuts []int64, starts map[int64]bool, ok bool) {
	if len(hdr) < regionHeader || size < regionHeader {
		return nil, nil, false
	}
	sectors := (size + sectorSize - 1) / sectorSize
	type span struct{ off, end int64 }
	var spans []span
	for i := range regionSlots {
		v := binary.BigEndian.Uint32(hdr[4*i:])
		if v == 0 {
			continue
		}
		off, cnt := int64(v>>8), int64(v&0xff)
		if off < regionHeader/sectorSize || cnt == 0 || off+cnt > sectors {
			return nil, nil, false
		}
		spans = append(spans, span{off, off + cnt})
	}
	slices.SortFunc(spans, func(a, b span) int { return int(a.off - b.off) })
	starts = make(map[int64]bool, len(spans))
	cuts = append(cuts, regionHeader)
	for i, s := range spans {
		if i > 0 && s.off < spans[i-1].end {
			return nil, nil, false
		}
		starts[s.off*sectorSize] = true
		cuts = append(cuts, s.off*sectorSize, min(s.end*sectorSize, size))
	}
	cuts = append(cuts, size)
	slices.Sort(cuts)
	return slices.Compact(cuts), starts, true
}
