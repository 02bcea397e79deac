package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
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
	"github.com/worldbackup/worldbackup/archiver/regfile"
	"github.com/worldbackup/worldbackup/archiver/store"
	"github.com/worldbackup/worldbackup/archiver/tarstream"
	"github.com/worldbackup/worldbackup/archiver/verify"
	"github.com/worldbackup/worldbackup/jobapi"
)

const verifyHelp = `Usage: archiver verify (--run-id R | --archive PATH [--sha256 HEX] | --archive-from FILE) [flags]

Re-reads an archive and checks its size and SHA-256 against the run's row in
the catalog, and that it decompresses and parses as tar to the end. With
--archive, the run is the one named by the file (<run id>.tar.zst); with
--sha256 too, the catalog is not consulted; --archive-from reads both from
the file archiver resolve wrote (the verify Job by run). A chunked run (its manifest as
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

With an archive, the result is also one JSON line in the termination log
(the verify Job's result): status verified or failed, run_id, archive_ref,
sha256, chunks_checked, chunks, regions, problems_total, the first problem
and the error that stopped the verify, if any.
`

// flagReadDataSubset is verify's local flag: the share of a chunked run's
// blobs to check.
const flagReadDataSubset = "read-data-subset"

// verifyFlags are the flags of verify: the contract's request (what the
// verify Job passes) and the local flags of a run by hand.
type verifyFlags struct {
	jobapi.Verify
	config, runID, subset, world string
	json                         bool
	terminationLog               string
}

// verifyLocalFlags are the flags of verify that are not the Job's.
func verifyLocalFlags() []string {
	return []string{jobapi.FlagConfig, jobapi.FlagRunID, flagReadDataSubset, flagWorld, flagJSON, "termination-log"}
}

// newVerifyFlags returns the flag set of verify and the flags it fills.
func newVerifyFlags(stderr io.Writer) (*flag.FlagSet, *verifyFlags) {
	f := &verifyFlags{}
	fs := newFlagSet(jobapi.KindVerify, verifyHelp, stderr)
	f.Bind(fs)
	fs.StringVar(&f.config, jobapi.FlagConfig, config.DefaultPath, jobapi.ConfigFileName)
	fs.StringVar(&f.runID, jobapi.FlagRunID, "", "verify this run's archive")
	fs.StringVar(&f.subset, flagReadDataSubset, "", "chunked runs: check about this share of the data blobs (5% or 0.05; default all)")
	fs.StringVar(&f.world, flagWorld, "", "with "+jobapi.Flag(jobapi.FlagWorldCheck)+": check this world folder instead of an archive")
	fs.BoolVar(&f.json, flagJSON, false, "print a JSON summary on stdout")
	fs.StringVar(&f.terminationLog, "termination-log", defaultTerminationLog,
		"file for the one-line JSON summary of an archive's verify; skipped when its folder is missing (the default path: when the file is missing)")
	return fs, f
}

func cmdVerify(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, f := newVerifyFlags(stderr)
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return code
	}
	f.Parsed(fs)
	format, configPath, runID, archive, sha, subset, s3f := f.LogFormat, &f.config, &f.runID, &f.Archive, &f.SHA256, &f.subset, f.S3
	keyFile := f.EncryptionKeyFile
	if !flagSet(fs, jobapi.FlagEncryptionKeyFile) && *runID != "" {
		// A run verified by its ID is looked up in the catalog that
		// felis.toml names, whose key file is the one its backups used.
		// A config that does not load is reported where the catalog is
		// opened.
		if cfg, err := config.Load(*configPath); err == nil {
			keyFile = cfg.Archive.EncryptionKeyFile
		}
	}
	keys, err := loadKeys(fs, keyFile)
	if err != nil {
		return usageError(stderr, "verify", "%s", flagErrorf(jobapi.FlagEncryptionKeyFile, ": %s", err))
	}
	var resolvedRun string // the run archiver resolve found, with --archive-from
	if f.ArchiveFrom != "" {
		if *archive != "" || *sha != "" || *runID != "" {
			return usageError(stderr, jobapi.KindVerify, "%s replaces %s, %s and %s: give one or the other",
				jobapi.Flag(jobapi.FlagArchiveFrom), jobapi.Flag(jobapi.FlagArchive), jobapi.Flag(jobapi.FlagSHA256), jobapi.Flag(jobapi.FlagRunID))
		}
		res, err := resolvedArchive(f.ArchiveFrom)
		if err != nil {
			return usageError(stderr, jobapi.KindVerify, "%s", err)
		}
		if res.Gone {
			return usageError(stderr, jobapi.KindVerify, "%s %s: run %s of server %s is no longer in the catalog: nothing to verify",
				jobapi.Flag(jobapi.FlagArchiveFrom), f.ArchiveFrom, res.RunID, res.Server)
		}
		*archive, *sha, resolvedRun = res.ArchiveRef, res.SHA256, res.RunID
	}
	wc := worldCheckFlags{enabled: f.WorldCheck, chunks: f.Chunks, world: f.world, scratch: f.Scratch, json: f.json}
	if wc.scratch == "" {
		wc.scratch = os.TempDir()
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
		return checkWorld(ctx, newLogger(format, stderr), wco, wc.world, worldSummary{}, wc.json, nil, stdout)
	}
	// With --json the summary is the only line on stdout.
	okOut := stdout
	if wc.json {
		okOut = io.Discard
	}
	// rep is the termination message of an archive's verify: the verify
	// Job's result, written once the archive has been checked.
	rep := &jobapi.VerifyResult{}
	defer func() {
		if rep.Status != "" {
			terminationLog{path: f.terminationLog, explicit: flagSet(fs, "termination-log")}.
				writeBounded(newLogger(format, stderr), rep, &rep.Problem, &rep.Error)
		}
	}()
	// checked runs the world check after the archive verified as src.
	checked := func(code int, src restoreSource) int {
		rep.ArchiveRef, rep.SHA256, rep.RunID = src.archive, src.sha256, cmp.Or(*runID, resolvedRun)
		rep.Status = jobapi.StatusFailed
		if code != exitOK || !wc.enabled {
			if code == exitOK {
				rep.Status = jobapi.StatusVerified
				if wc.json {
					fmt.Fprintf(stdout, "{\"status\":\"ok\",\"archive\":%q}\n", src.archive)
				}
			}
			return code
		}
		code = checkArchiveWorld(ctx, newLogger(format, stderr).Named("worldcheck"), &wc, wco, src, rep, stdout)
		if code == exitOK {
			rep.Status = jobapi.StatusVerified
		}
		return code
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
		return checked(verifyChunked(ctx, log, rep, s3s, *archive, *sha, keys, share, seed, okOut), chunkedSource(s3s, *archive, *sha, keys))
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
			log.Error("the catalog has no row for this run: `archiver list` shows the recorded run IDs "+
				"(a run the program made is recorded under its full ID, with the cluster and server in it)", "run_id", *runID)
			return exitUsage
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
			return checked(verifyChunked(ctx, log, rep, s3s, path, rec.SHA256, keys, share, seed, okOut), chunkedSource(s3s, path, rec.SHA256, keys))
		}
		c, err := tarstream.ParseCompression(rec.Compression)
		if err != nil {
			log.Error("the row names an unknown compression", "run_id", *runID, "error", err)
			return exitFailed
		}
		want = verify.Want{Size: rec.SizeBytes, SHA256: rec.SHA256, Compression: c, Decrypt: decryptOf(keys)}
	}
	open := func(context.Context) (io.ReadCloser, error) { return regfile.Open(path) }
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
	return checked(verifyFile(ctx, log, rep, path, open, want, okOut), src)
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

// verifyFile checks the archive path opens against want; its failure goes
// into rep's Error.
func verifyFile(ctx context.Context, log hclog.Logger, rep *jobapi.VerifyResult, path string, open func(context.Context) (io.ReadCloser, error),
	want verify.Want, stdout io.Writer) int {
	vr, err := verify.Archive(ctx, func(ctx context.Context) (io.ReadCloser, error) {
		f, err := open(ctx)
		if err != nil {
			return nil, openError{err}
		}
		return f, nil
	}, want)
	var oe openError
	if errors.As(err, &oe) {
		log.Error("cannot open the archive", "error", oe.err)
		rep.Error = "cannot open the archive: " + oe.err.Error()
		if errors.Is(err, store.ErrNoRoot) || errors.Is(err, store.ErrDenied) {
			return exitUsage // a missing bucket, refused credentials: no retry can help
		}
		return exitFailed
	}
	if err != nil {
		log.Error("archive verification failed", "archive", path, "error", err)
		rep.Error = "archive verification failed: " + err.Error()
		if keyProblem(err) && !errors.Is(err, verify.ErrMismatch) {
			return exitUsage
		}
		if errors.Is(err, verify.ErrMismatch) || errors.Is(err, verify.ErrCorrupt) {
			return exitRefused
		}
		return exitFailed
	}
	fmt.Fprintf(stdout, "ok %s: %d bytes, sha256 %s, %d tar entries\n", path, vr.Size, vr.SHA256, vr.Entries)
	return exitOK
}

// openError marks an error of opening the archive, as against reading it.
type openError struct{ err error }

func (e openError) Error() string { return e.err.Error() }
func (e openError) Unwrap() error { return e.err }
