package tarstream

import (
	"fmt"
	"io"
	"runtime"

	"github.com/klauspost/compress/zstd"
	"github.com/klauspost/pgzip"

	"github.com/worldbackup/worldbackup/jobapi"
)

// Compression names the compression applied to the tar stream.
type Compression string

// The supported compressions, named by jobapi.
const (
	Zstd Compression = jobapi.CompressionZstd
	Gzip Compression = jobapi.CompressionGzip
	None Compression = jobapi.CompressionNone
)

// Compressions lists the supported compressions, default first
// (jobapi.Compressions).
var Compressions = func() []Compression {
	var cs []Compression
	for _, c := range jobapi.Compressions() {
		cs = append(cs, Compression(c))
	}
	return cs
}()

// ParseCompression returns the Compression named s ("zstd", "gzip" or "none").
func ParseCompression(s string) (Compression, error) {
	for _, c := range Compressions {
		if string(c) == s {
			return c, nil
		}
	}
	return "", fmt.Errorf("unknown compression %q (want zstd, gzip or none)", s)
}

// Memory bounds of the compressors. They fix the process's memory use
// whatever the size of the world.
const (
	// zstdWindow is the zstd window (largest back-reference distance).
	// Region files are already zlib-compressed, so a larger window buys
	// little (0.2% at 4 MiB) and costs CPU and memory.
	zstdWindow = 128 << 10
	// gzipBlock is the input size of one parallel deflate block.
	gzipBlock = 512 << 10
)

// encoders returns the number of parallel compression jobs to run.
func encoders() int { return min(max(runtime.GOMAXPROCS(0), 1), 4) }

// newCompressor wraps w in the compressor for c. Closing the result flushes
// it; it never closes w.
func newCompressor(w io.Writer, c Compression) (io.WriteCloser, error) {
	switch c {
	case Zstd:
		// Concurrency 1: the encoder compresses in the caller's goroutine,
		// the stream's compression stage, which overlaps the reading and
		// tarring of the files and the hashing and writing of the archive.
		// Its parallel modes cost goroutine hand-offs per 128 KiB block (or
		// 50 MB of job buffers) and were slower on two cores.
		//
		// No entropy coding of literals: a world is mostly zlib-compressed
		// chunks, whose bytes Huffman coding cannot shrink by the 1/16 it
		// must save: it took over half of zstd's CPU time for 0.03% of the
		// archive's size. Sequences (the zeros padding each 4 KiB sector,
		// repeated NBT) are still FSE-coded.
		enc, err := zstd.NewWriter(w,
			zstd.WithEncoderLevel(zstd.SpeedFastest),
			zstd.WithWindowSize(zstdWindow),
			zstd.WithEncoderConcurrency(1),
			zstd.WithNoEntropyCompression(true),
		)
		if err != nil {
			return nil, fmt.Errorf("creating zstd encoder: %w", err)
		}
		return enc, nil
	case Gzip:
		gz, err := pgzip.NewWriterLevel(w, pgzip.BestSpeed)
		if err != nil {
			return nil, fmt.Errorf("creating gzip encoder: %w", err)
		}
		if err := gz.SetConcurrency(gzipBlock, 2*encoders()); err != nil {
			return nil, fmt.Errorf("configuring gzip encoder: %w", err)
		}
		return gz, nil
	case None:
		return nopWriteCloser{w}, nil
	default:
		return nil, fmt.Errorf("unknown compression %q", c)
	}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
