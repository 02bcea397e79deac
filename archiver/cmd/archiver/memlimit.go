package main

import (
	"bytes"
	"io"
	"os"
	"runtime/debug"
	"strconv"
)

// DefaultSoftMemoryLimit is the Go runtime's soft memory limit the archiver
// sets for itself (debug.SetMemoryLimit): the garbage collector then keeps
// the heap near what the run holds rather than letting it double between
// collections, so a chunked backup's peak RSS stays about flat as the world
// grows (its live heap grows only with the file records, a few hundred bytes
// a file; measured in archiver/README.md "Memory"). It is soft: a run that
// needs more gets more, the collector working harder. GOMEMLIMIT in the
// environment replaces it; a container memory limit below it lowers it to
// 90% of that limit.
const DefaultSoftMemoryLimit = 80 << 20

// The cgroup files holding the container's memory limit (v2, then v1).
var cgroupLimitFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// setSoftMemoryLimit sets the archiver's soft memory limit, unless
// GOMEMLIMIT is set, and returns it (0: left to GOMEMLIMIT).
func setSoftMemoryLimit() int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	limit := softMemoryLimit(containerMemoryLimit(cgroupLimitFiles))
	debug.SetMemoryLimit(limit)
	return limit
}

// softMemoryLimit is DefaultSoftMemoryLimit, or 90% of the container's
// limit when that is lower (container <= 0: none known).
func softMemoryLimit(container int64) int64 {
	if container > 0 && container/10*9 < DefaultSoftMemoryLimit {
		return container / 10 * 9
	}
	return DefaultSoftMemoryLimit
}

// containerMemoryLimit returns the first limit one of files holds, in
// bytes; 0 when none does ("max", a missing file, garbage). Each read is
// bounded.
func containerMemoryLimit(files []string) int64 {
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			continue
		}
		b, err := io.ReadAll(io.LimitReader(f, 64))
		f.Close()
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
		if err == nil && n > 0 && n < 1<<60 { // v1's "no limit" is near 2^63
			return n
		}
	}
	return 0
}
