// Package chunked is the "chunked" archive format: a run's content is the
// tar stream package tarstream writes (the same entries, order and headers
// as a "tar" archive), kept as content-addressed blobs grouped into pack
// files, with one manifest per run listing the blobs of the stream in order.
// Blobs are named by the SHA-256 of their bytes, so a run stores only the
// blobs no earlier run stored: what changed.
//
// The stream is cut where its content is: the tar metadata between two
// files' data one blob; a region file (.mca, .mcc) at its location table
// (the 8 KiB header one blob, each chunk's data one blob and the rest of
// its sectors another, free sectors too), so a chunk the game rewrote costs
// one blob and a chunk it moved none; any other file by content-defined
// chunking (github.com/restic/chunker). A file whose size, times and inode
// match the previous run's manifest is not read again: its blob lists are
// reused.
//
// Write (the backup side) is a tarstream.Sink; Open and Rebuild (the restore
// side) check the manifest against its SHA-256, then every blob against its
// name while the tar stream is rebuilt, so a damaged store fails with
// ErrCorrupt before a restore swaps anything in. FORMAT.md describes the
// bytes, for anyone writing another reader.
package chunked
