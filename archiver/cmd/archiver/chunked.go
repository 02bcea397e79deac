package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/hashicorp/go-hclog"

	"github.com/worldbackup/worldbackup/archiver/chunked"
	"github.com/worldbackup/worldbackup/archiver/config"
	"github.com/worldbackup/worldbackup/archiver/crypt"
	"github.com/worldbackup/worldbackup/archiver/store"
	"github.com/worldbackup/worldbackup/jobapi"
)

// chunkedStore returns the store holding the chunked run whose manifest ref
// is ref, and the manifest's key; ok is false when ref is not a manifest's.
// An S3 store takes its server and credentials from s (its Store is
// ignored).
func chunkedStore(s config.S3, ref string) (st chunked.Store, key string, ok bool, err error) {
	root, key, ok := jobapi.SplitManifestRef(ref)
	if !ok {
		return nil, "", false, nil
	}
	if store.IsS3URL(ref) {
		s.Store = root
		o, err := s3Options(s, archiveRefFrom)
		if err != nil {
			return nil, "", true, err
		}
		s3, err := store.NewS3(o)
		if err != nil {
			return nil, "", true, err
		}
		return s3, key, true, nil
	}
	l, err := store.NewLocal(root)
	if err != nil {
		return nil, "", true, err
	}
	return l, key, true, nil
}

// chunkedStream opens the tar stream of the chunked run at key: its
// manifest is checked against sum first, then every blob while the stream
// is read. Damage ends the stream with an error wrapping chunked.ErrCorrupt
// or chunked.ErrMissing; any other failure (the store) as an *fs.PathError,
// which the extractor reports as an I/O failure, not a refusal.
func chunkedStream(ctx context.Context, st chunked.Store, ref, key, sum string, keys *crypt.Keys) (io.ReadCloser, error) {
	m, err := openChunked(ctx, st, key, sum, keys)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The blobs are small: hand the extractor large writes, so each
		// pipe handoff carries many of them (the bytes are checked already).
		bw := bufio.NewWriterSize(pw, streamBuf)
		err := chunked.Rebuild(ctx, st, m, bw)
		if err == nil {
			err = bw.Flush()
		}
		if err != nil && !errors.Is(err, chunked.ErrCorrupt) && !errors.Is(err, chunked.ErrMissing) {
			err = &fs.PathError{Op: "read", Path: ref, Err: err}
		}
		pw.CloseWithError(err)
	}()
	return &streamCloser{PipeReader: pr, cancel: cancel, done: done}, nil
}

// streamBuf is the size of the writes chunkedStream hands the extractor.
const streamBuf = 1 << 20

// streamCloser stops the rebuilding goroutine on Close.
type streamCloser struct {
	*io.PipeReader
	cancel context.CancelFunc
	done   chan struct{}
}

func (s *streamCloser) Close() error {
	s.cancel()
	s.PipeReader.CloseWithError(errors.New("stream closed"))
	<-s.done
	return nil
}

// chunkedDamage reports whether err says a chunked run is damaged or
// incomplete (exit 3).
func chunkedDamage(err error) bool {
	return errors.Is(err, chunked.ErrCorrupt) || errors.Is(err, chunked.ErrMissing)
}

const exportHelp = `Usage: archiver export --archive REF --sha256 HEX [flags] > world.tar

Writes the plain tar stream of a chunked run to stdout, so
"archiver export --archive REF --sha256 HEX | tar -x -C DIR" restores it with
GNU tar. REF is the run's manifest (archive_ref in archiver list): a path
<root>/_chunked/runs/<server>/<run id>.manifest or its s3:// URL. The manifest
is checked against --sha256 before anything is written, then every blob
against its hash before its bytes are: a damaged or missing blob stops the
stream (exit 3, naming the pack), which then ends with a block that is no
tar header, so tar fails too (a stream cut between two members would
otherwise look complete to GNU tar without pipefail). Needs no database.
`

// poisonBlock ends a failed export's stream: 512 bytes of 0xff, no tar
// header (its checksum does not match), so tar exits with an error.
var poisonBlock = func() (b [512]byte) {
	for i := range b {
		b[i] = 0xff
	}
	return b
}()

func cmdExport(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	format := logFormat("auto")
	fs := newFlagSet("export", exportHelp, stderr)
	archive := fs.String(jobapi.FlagArchive, "", "the chunked run's manifest, a path or s3:// URL (required)")
	sum := fs.String(jobapi.FlagSHA256, "", "the manifest's SHA-256 as archiver list shows it (required)")
	fs.Var(&format, jobapi.FlagLogFormat, "json, text or auto (json when stderr is not a terminal)")
	var s3f jobapi.S3
	s3f.Bind(fs)
	var keyFile string
	jobapi.BindEncryptionKeyFile(fs, &keyFile, jobapi.KeyFileReads)
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return code
	}
	keys, err := loadKeys(fs, keyFile)
	if err != nil {
		return usageError(stderr, "export", "%s", flagErrorf(jobapi.FlagEncryptionKeyFile, ": %s", err))
	}
	switch {
	case *archive == "":
		return usageError(stderr, "export", "%s is required: the chunked run's manifest", jobapi.Flag(jobapi.FlagArchive))
	case !jobapi.IsSHA256(*sum):
		return usageError(stderr, "export", "%s", flagErrorf(jobapi.FlagSHA256, "%q: want 64 lowercase hex digits", *sum))
	}
	st, key, ok, err := chunkedStore(s3Over(fs, s3f, config.S3{}), *archive)
	switch {
	case !ok:
		return usageError(stderr, "export", "%s", flagErrorf(jobapi.FlagArchive, "%q is not a chunked run's manifest (<root>/_chunked/runs/<server>/<run id>.manifest); a tar archive is a tar file already", *archive))
	case err != nil:
		return usageError(stderr, "export", "%s", flagErrorf(jobapi.FlagArchive, ": %s", err))
	}
	log := newLogger(format, stderr)
	m, err := openChunked(ctx, st, key, *sum, keys)
	if err == nil {
		err = chunked.Rebuild(ctx, st, m, stdout)
	}
	if err != nil {
		// Whatever was written is a prefix of the tar stream: end it with a
		// block tar refuses, so that `export | tar -x` fails even where only
		// tar's exit status is seen. A failed write here changes nothing.
		_, _ = stdout.Write(poisonBlock[:])
		log.Error("export failed", "archive", *archive, "error", err)
		if keyProblem(err) {
			return exitUsage
		}
		if chunkedDamage(err) {
			return exitRefused
		}
		return exitFailed
	}
	log.Info("exported", "archive", *archive, "bytes", m.StreamSize)
	return exitOK
}

// parseShare parses --read-data-subset and --chunks: a percentage "5%" or
// a fraction "0.05" (jobapi.ParseShare).
func parseShare(s string) (float64, error) { return jobapi.ParseShare(s) }

// verifyChunked checks every blob of the chunked run at ref (or share of
// its data blobs) against its hash, after its manifest against sum.
func verifyChunked(ctx context.Context, log hclog.Logger, rep *jobapi.VerifyResult, s config.S3, ref, sum string, keys *crypt.Keys, share float64, seed uint64, stdout io.Writer) int {
	st, key, ok, err := chunkedStore(s, ref)
	if err == nil && !ok {
		// --archive named a file, and --run-id's row a chunked run.
		err = fmt.Errorf("%q is not a chunked run's manifest (<root>/%s/runs/<server>/<run id>.manifest): give the run's manifest, or %s alone",
			ref, jobapi.ChunkedDir, jobapi.Flag(jobapi.FlagRunID))
	}
	if err != nil {
		log.Error("cannot open the chunked run's store", "archive", ref, "error", err)
		rep.Error = "cannot open the chunked run's store: " + err.Error()
		return exitUsage
	}
	m, err := openChunked(ctx, st, key, sum, keys)
	var res chunked.VerifyResult
	if err == nil {
		res, err = chunked.Verify(ctx, st, m, share, seed)
	}
	if err != nil {
		log.Error("archive verification failed", "archive", ref, "error", err)
		rep.Error = "archive verification failed: " + err.Error()
		if keyProblem(err) {
			return exitUsage
		}
		if chunkedDamage(err) {
			return exitRefused
		}
		return exitFailed
	}
	fmt.Fprintf(stdout, "ok %s: chunked, %d bytes of tar, sha256 %s, %d blobs (%d bytes) checked in %d packs\n",
		ref, m.StreamSize, sum, res.Blobs, res.Bytes, res.Packs)
	return exitOK
}
