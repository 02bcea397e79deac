package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/worldbackup/worldbackup/archiver/catalog"
	"github.com/worldbackup/worldbackup/archiver/config"
	"github.com/worldbackup/worldbackup/archiver/store"
	"github.com/worldbackup/worldbackup/archiver/tarstream"
	"github.com/worldbackup/worldbackup/archiver/verify"
	"github.com/worldbackup/worldbackup/internal/layout"
)

const verifyHelp = `Usage: archiver verify (--run-id R | --archive PATH [--sha256 HEX]) [flags]

Re-reads an archive and checks its size and SHA-256 against the run's row in
the catalog, and that it decompresses and parses as tar to the end. With
--archive, the run is the one named by the file (<run id>.tar.zst); with
--sha256 too, the catalog is not consulted. The archive is read as a
restore reads it: the compression its bytes tell, and nothing after the end
of the tar and compressed streams. Exits 3 with the reason on any mismatch or
corruption, 1 when the archive or the catalog cannot be read, 2 when the S3
store has no such bucket or refuses the credentials.
`

func cmdVerify(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	format := logFormat("auto")
	fs := newFlagSet("verify", verifyHelp, stderr)
	configPath := fs.String("config", config.DefaultPath, "felis.toml")
	runID := fs.String("run-id", "", "verify this run's archive")
	archive := fs.String("archive", "", "verify this archive file")
	sha := fs.String("sha256", "", "with --archive: expected SHA-256 (lowercase hex); skips the catalog")
	fs.Var(&format, "log-format", "json, text or auto (json when stderr is not a terminal)")
	var s3f s3Flags
	s3f.add(fs)
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return code
	}
	switch {
	case (*runID == "") == (*archive == ""):
		return usageError(stderr, "verify", "give exactly one of --run-id and --archive")
	case *sha != "" && *archive == "":
		return usageError(stderr, "verify", "--sha256 goes with --archive")
	case *sha != "" && !isSHA256(*sha):
		return usageError(stderr, "verify", "--sha256 %q: want 64 lowercase hex digits", *sha)
	case *runID != "":
		if err := layout.CheckRunID(*runID); err != nil {
			return usageError(stderr, "verify", "--run-id: %s", err)
		}
	}
	log := newLogger(format, stderr)

	var path string
	var want verify.Want
	if *archive != "" {
		path = *archive
		if !store.IsS3URL(path) {
			abs, err := filepath.Abs(*archive)
			if err != nil {
				return usageError(stderr, "verify", "--archive: %s", err)
			}
			path = abs
		}
		run, c, ok := splitArchiveName(filepath.Base(path))
		if !ok {
			return usageError(stderr, "verify", "--archive %q: want a <run id>.tar.zst, .tar.gz or .tar file", *archive)
		}
		want = verify.Want{Size: -1, SHA256: *sha, Compression: c}
		*runID = run
	}
	if *sha == "" {
		db, code := openCatalog(ctx, log, *configPath, stderr)
		if db == nil {
			return code
		}
		rec, err := db.Lookup(ctx, *runID)
		db.Close()
		if errors.Is(err, catalog.ErrNotFound) {
			log.Error("the catalog has no row for this run", "run_id", *runID)
			return exitFailed
		}
		if err != nil {
			log.Error("looking up the run", "run_id", *runID, "error", err)
			return exitFailed
		}
		if path != "" && path != rec.ArchiveRef {
			log.Warn("checking a file at another path than the recorded one", "archive", path, "recorded", rec.ArchiveRef)
		}
		if path == "" {
			path = rec.ArchiveRef
		}
		c, err := tarstream.ParseCompression(rec.Compression)
		if err != nil {
			log.Error("the row names an unknown compression", "run_id", *runID, "error", err)
			return exitFailed
		}
		want = verify.Want{Size: rec.SizeBytes, SHA256: rec.SHA256, Compression: c}
	}
	open := func(context.Context) (io.ReadCloser, error) { return os.Open(path) }
	if store.IsS3URL(path) {
		s3s, err := s3f.settings(fs, *configPath)
		if err == nil {
			open, err = openS3Ref(s3s, path)
		}
		if err != nil {
			return usageError(stderr, "verify", "%s", err)
		}
	}
	return verifyFile(ctx, log, path, open, want, stdout)
}

func verifyFile(ctx context.Context, log hclog.Logger, path string, open func(context.Context) (io.ReadCloser, error),
	want verify.Want, stdout io.Writer) int {
	f, err := open(ctx)
	if err != nil {
		log.Error("cannot open the archive", "error", err)
		if errors.Is(err, store.ErrNoRoot) || errors.Is(err, store.ErrDenied) {
			return exitUsage // a missing bucket, refused credentials: no retry can help
		}
		return exitFailed
	}
	defer f.Close()
	rep, err := verify.Archive(ctx, f, want)
	if err != nil {
		log.Error("archive verification failed", "archive", path, "error", err)
		if errors.Is(err, verify.ErrMismatch) || errors.Is(err, verify.ErrCorrupt) {
			return exitRefused
		}
		return exitFailed
	}
	fmt.Fprintf(stdout, "ok %s: %d bytes, sha256 %s, %d tar entries\n", path, rep.Size, rep.SHA256, rep.Entries)
	return exitOK
}

// splitArchiveName splits "<run id><ext>" into the run ID and compression.
func splitArchiveName(name string) (string, tarstream.Compression, bool) {
	for _, c := range tarstream.Compressions {
		ext, err := layout.Extension(string(c))
		if err != nil {
			continue
		}
		if run, ok := strings.CutSuffix(name, ext); ok && layout.CheckRunID(run) == nil {
			return run, c, true
		}
	}
	return "", "", false
}

func isSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, r := range s {
		if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f') {
			return false
		}
	}
	return true
}
