package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/worldbackup/worldbackup/archiver/catalog"
	"github.com/worldbackup/worldbackup/archiver/config"
	"github.com/worldbackup/worldbackup/archiver/crypt"
	"github.com/worldbackup/worldbackup/archiver/store"
	"github.com/worldbackup/worldbackup/archiver/tarstream"
	"github.com/worldbackup/worldbackup/archiver/verify"
	"github.com/worldbackup/worldbackup/jobapi"
)

const verifyHelp = `Usage: archiver verify (--run-id R | --archive PATH [--sha256 HEX]) [flags]

Re-reads an archive and checks its size and SHA-256 against the run's row in
the catalog, and that it decompresses and parses as tar to the end. With
--archive, the run is the one named by the file (<run id>.tar.zst); with
--sha256 too, the catalog is not consulted. A chunked run (its manifest as
--archive, or its --run-id) is checked blob by blob: the manifest against its
SHA-256, then every blob against its hash (or about --read-data-subset of the
data blobs); a missing pack is named. An encrypted archive needs
--encryption-key-file (a key that does not open it exits 2). The archive is read as a
restore reads it: the compression its bytes tell, and nothing after the end
of the tar and compressed streams. Exits 3 with the reason on any mismatch or
corruption, 1 when the archive or the catalog cannot be read, 2 when the S3
store has no such bucket or refuses the credentials.

With --world-check, the verified archive is then restored into a scratch
folder (--scratch) and the world checked as the game would load it:
level.dat, every region file's table and chunk (or --chunks 10% of them,
each region's newest always), the player files; --world DIR checks a folder
instead of an archive. A problem exits 3, naming the file and chunk.
`

// flagReadDataSubset is verify's local flag: the share of a chunked run's
// blobs to check.
const flagReadDataSubset = "read-data-subset"

func cmdVerify(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	format := jobapi.LogAuto
	fs := newFlagSet("verify", verifyHelp, stderr)
	configPath := fs.String(jobapi.FlagConfig, config.DefaultPath, jobapi.ConfigFileName)
	runID := fs.String(jobapi.FlagRunID, "", "verify this run's archive")
	archive := fs.String(jobapi.FlagArchive, "", "verify this archive file")
	sha := fs.String(jobapi.FlagSHA256, "", "with "+jobapi.Flag(jobapi.FlagArchive)+": expected SHA-256 (lowercase hex); skips the catalog")
	subset := fs.String(flagReadDataSubset, "", "chunked runs: check about this share of the data blobs (5% or 0.05; default all)")
	fs.Var(&format, jobapi.FlagLogFormat, "json, text or auto (json when stderr is not a terminal)")
	var s3f jobapi.S3
	s3f.Bind(fs)
	var keyFile string
	jobapi.BindEncryptionKeyFile(fs, &keyFile)
	var wc worldCheckFlags
	wc.bind(fs)
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return code
	}
	keys, err := loadKeys(keyFile)
	if err != nil {
		return usageError(stderr, "verify", "%s", flagErrorf(jobapi.FlagEncryptionKeyFile, ": %s", err))
	}
	seed := uint64(time.Now().UnixNano())
	wco, err := wc.options(fs, seed)
	if err != nil {
		return usageError(stderr, "verify", "%s", err)
	}
	if wc.world != "" {
		if *runID != "" || *archive != "" {
			return usageError(stderr, "verify", "%s", flagErrorf(flagWorld, "checks a folder: give it without %s and %s", jobapi.Flag(jobapi.FlagRunID), jobapi.Flag(jobapi.FlagArchive)))
		}
		if fi, err := os.Stat(wc.world); err != nil || !fi.IsDir() {
			return usageError(stderr, "verify", "%s", flagErrorf(flagWorld, "%s: not a folder: give the world's folder", wc.world))
		}
		return checkWorld(ctx, newLogger(format, stderr), wco, wc.world, worldSummary{}, wc.json, stdout)
	}
	// With --json the summary is the only line on stdout.
	okOut := stdout
	if wc.json {
		okOut = io.Discard
	}
	// checked runs the world check after the archive verified as src.
	checked := func(code int, src restoreSource) int {
		if code != exitOK || !wc.enabled {
			if code == exitOK && wc.json {
				fmt.Fprintf(stdout, "{\"status\":\"ok\",\"archive\":%q}\n", src.archive)
			}
			return code
		}
		return checkArchiveWorld(ctx, newLogger(format, stderr).Named("worldcheck"), &wc, wco, src, stdout)
	}
	switch {
	case (*runID == "") == (*archive == ""):
		return usageError(stderr, "verify", "give exactly one of %s and %s", jobapi.Flag(jobapi.FlagRunID), jobapi.Flag(jobapi.FlagArchive))
	case *sha != "" && *archive == "":
		return usageError(stderr, "verify", "%s goes with %s", jobapi.Flag(jobapi.FlagSHA256), jobapi.Flag(jobapi.FlagArchive))
	case *sha != "" && !jobapi.IsSHA256(*sha):
		return usageError(stderr, "verify", "%s", flagErrorf(jobapi.FlagSHA256, "%q: want 64 lowercase hex digits", *sha))
	case *runID != "":
		if err := jobapi.CheckRunID(*runID); err != nil {
			return usageError(stderr, "verify", "%s", flagErrorf(jobapi.FlagRunID, ": %s", err))
		}
	}
	share := 1.0
	if *subset != "" {
		var err error
		if share, err = parseShare(*subset); err != nil {
			return usageError(stderr, "verify", "%s", flagErrorf(flagReadDataSubset, "%s", err))
		}
	}
	log := newLogger(format, stderr)
	// chunkedS3 is the S3 store settings of a chunked run at ref.
	chunkedS3 := func(ref string) (config.S3, error) {
		if !jobapi.IsS3URL(ref) {
			return config.S3{}, nil
		}
		return s3Settings(fs, s3f, *configPath)
	}
	if _, _, ok := jobapi.SplitManifestRef(*archive); ok && *sha != "" {
		s3s, err := chunkedS3(*archive)
		if err != nil {
			return usageError(stderr, "verify", "%s", err)
		}
		return checked(verifyChunked(ctx, log, s3s, *archive, *sha, keys, share, seed, okOut), chunkedSource(s3s, *archive, *sha, keys))
	}

	var path string
	var want verify.Want
	if _, _, ok := jobapi.SplitManifestRef(*archive); ok {
		path = *archive
		if m := strings.TrimSuffix(path[strings.LastIndex(path, "/")+1:], ".manifest"); m != "" {
			*runID = m
		}
	} else if *archive != "" {
		path = *archive
		if !jobapi.IsS3URL(path) {
			abs, err := filepath.Abs(*archive)
			if err != nil {
				return usageError(stderr, "verify", "%s", flagErrorf(jobapi.FlagArchive, ": %s", err))
			}
			path = abs
		}
		run, c, ok := jobapi.ParseArchiveName(filepath.Base(path))
		if !ok {
			return usageError(stderr, "verify", "%s", flagErrorf(jobapi.FlagArchive, "%q: want a <run id>.tar.zst, .tar.gz or .tar file", *archive))
		}
		want = verify.Want{Size: -1, SHA256: *sha, Compression: tarstream.Compression(c), Decrypt: decryptOf(keys)}
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
		if rec.Format == jobapi.FormatChunked {
			s3s, err := chunkedS3(path)
			if err != nil {
				return usageError(stderr, "verify", "%s", err)
			}
			return checked(verifyChunked(ctx, log, s3s, path, rec.SHA256, keys, share, seed, okOut), chunkedSource(s3s, path, rec.SHA256, keys))
		}
		c, err := tarstream.ParseCompression(rec.Compression)
		if err != nil {
			log.Error("the row names an unknown compression", "run_id", *runID, "error", err)
			return exitFailed
		}
		want = verify.Want{Size: rec.SizeBytes, SHA256: rec.SHA256, Compression: c, Decrypt: decryptOf(keys)}
	}
	open := func(context.Context) (io.ReadCloser, error) { return os.Open(path) }
	if jobapi.IsS3URL(path) {
		s3s, err := s3Settings(fs, s3f, *configPath)
		if err == nil {
			open, err = openS3Ref(s3s, path)
		}
		if err != nil {
			return usageError(stderr, "verify", "%s", err)
		}
	}
	if *subset != "" {
		return usageError(stderr, "verify", "%s", flagErrorf(flagReadDataSubset, "goes with chunked runs; a tar archive is read whole"))
	}
	src := restoreSource{archive: path, sha256: want.SHA256, decrypt: decryptOf(keys)}
	if jobapi.IsS3URL(path) {
		src.open = open
	}
	return checked(verifyFile(ctx, log, path, open, want, okOut), src)
}

// chunkedSource is how the world check restores the chunked run at ref:
// rebuilt from its store, each blob checked while it is read.
func chunkedSource(s config.S3, ref, sum string, keys *crypt.Keys) restoreSource {
	return restoreSource{archive: ref, sha256: sum, verified: true, open: func(ctx context.Context) (io.ReadCloser, error) {
		st, key, _, err := chunkedStore(s, ref)
		if err != nil {
			return nil, err
		}
		return chunkedStream(ctx, st, ref, key, sum, keys)
	}}
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
		if keyProblem(err) && !errors.Is(err, verify.ErrMismatch) {
			return exitUsage
		}
		if errors.Is(err, verify.ErrMismatch) || errors.Is(err, verify.ErrCorrupt) {
			return exitRefused
		}
		return exitFailed
	}
	fmt.Fprintf(stdout, "ok %s: %d bytes, sha256 %s, %d tar entries\n", path, rep.Size, rep.SHA256, rep.Entries)
	return exitOK
}
