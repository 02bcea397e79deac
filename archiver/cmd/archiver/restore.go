package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"

	"github.com/hashicorp/go-hclog"

	"github.com/worldbackup/worldbackup/archiver/config"
	"github.com/worldbackup/worldbackup/archiver/extract"
	"github.com/worldbackup/worldbackup/archiver/store"
	"github.com/worldbackup/worldbackup/jobapi"
)

const restoreHelp = `Usage: archiver restore (--archive PATH --sha256 HEX | --archive-from FILE) --into DIR [--replace] [--run-id R] [flags]

Restores a world from an archive that may have been tampered with. The
archive's SHA-256 is checked before anything is extracted; the archive is then
extracted into a staging folder (beside DIR, or inside DIR when DIR is a mount
point) and only when it extracted completely is it swapped into place. The old
world is kept aside until the swap is done, then removed. A refused or failed
archive leaves DIR as it was, and the log names the entry and the reason.

Refused: names with ".." or absolute names, NUL bytes, symlinks whose target
leaves DIR, hard links to anything but an earlier file of the archive, entries
written through a symlink, duplicate entries, devices and fifos, and archives
past --max-bytes or --max-entries, and bytes after the end of the archive.
Restore needs no database and no config file: take the checksum from the
catalog (archiver list) beforehand, or give --archive-from, the file archiver
resolve wrote for a run ID or latest (the restore Job's init container runs
it): the archive and checksum are read from it, at most 16 KiB, checked as
the catalog's rules say. A run it found gone from the catalog (resolve
--allow-gone: pruned since, or never recorded) is not restored: with the
world's marker naming --run-id, the restore was done before and exits 0
(already restored); otherwise it exits 2, the world as it was.

A chunked run (backup --format chunked) is named by its manifest,
<root>/_chunked/runs/<server>/<run id>.manifest or its s3:// URL, and --sha256
is the manifest's: it is checked first, then every blob against its hash while
the tar stream is rebuilt and extracted; a damaged blob or a missing pack
refuses the run (exit 3, naming the pack) before anything is swapped in.

An encrypted archive (backup with --encryption-key-file: <run>.tar.zst.age, an
age file; or an encrypted chunked run) needs --encryption-key-file: the
checksum covers the ciphertext and is checked first, then it is decrypted
(every piece authenticated) and extracted as any other. A key that does not
open it exits 2, a tampered or truncated ciphertext 3; the world is untouched.

An s3://bucket/key archive is read from the S3 store named by the --s3-*
flags, with the credentials of the files of a mounted Secret. It is streamed
twice, nothing is downloaded to disk: once to check its SHA-256, once to
extract it, checked again before the swap.

With --run-id, the restored world holds a marker (.worldbackup-restored: the
run ID, the checksum, the time and the marker's own inode); a rerun with the
same run ID finds it and exits 0 without touching the world, whatever archive
it is given (the run ID is the restore's key: a Job re-created with a newer
archive, or latest resolved to a newer run, restores nothing; give a new run
ID to restore another archive). A marker naming the run ID that this restore
did not write there (planted, copied, or from an archiver before the inode
binding) is refused: exit 2, the world untouched; delete it to restore again.
A world a running server uses (a locked session.lock) is refused, exit 1,
after the marker is read: a rerun of a restore already done exits 0. The
log's world_state says what DIR holds at the end: unchanged, restored,
replaced (", old copy left at PATH" when the old world could not be
removed), already restored, or incomplete (a half-done swap: rerun to
finish).

A restored world writes a one-line JSON summary to the termination log
(status restored or already-restored, run_id, archive_ref, sha256,
size_bytes, world_state); a failed restore writes none, so the pod's
termination message is the log's tail.
`

// restoreFlags are the flags of restore: the contract's request (what the
// restore Job passes) and the local flags of a run by hand.
type restoreFlags struct {
	jobapi.Restore
	terminationLog string
}

// restoreLocalFlags are the flags of restore that are not the Job's.
func restoreLocalFlags() []string { return []string{"termination-log"} }

// newRestoreFlags returns the flag set of restore and the flags it fills.
func newRestoreFlags(stderr io.Writer) (*flag.FlagSet, *restoreFlags) {
	f := &restoreFlags{}
	fs := newFlagSet(jobapi.KindRestore, restoreHelp, stderr)
	f.Bind(fs)
	fs.StringVar(&f.terminationLog, "termination-log", defaultTerminationLog,
		"file for the one-line JSON summary of a restored world; skipped when its folder is missing (the default path: when the file is missing)")
	return fs, f
}

// cmdRestore runs `archiver restore`: flag problems exit 2, a checksum
// mismatch or refused archive exits 3 and a failed restore 1 (the world
// folder as its world_state says), a restored world exits 0.
func cmdRestore(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, f := newRestoreFlags(stderr)
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return code
	}
	f.Parsed(fs)
	archive, sum, into, runID, maxBytes, maxEntries := &f.Archive, &f.SHA256, &f.Into, &f.RunID, &f.MaxBytes, &f.MaxEntries
	replace, format, termPath := &f.Replace, f.LogFormat, &f.terminationLog
	var problems []string
	if f.ArchiveFrom != "" {
		if *archive != "" || *sum != "" {
			return usageError(stderr, jobapi.KindRestore, "%s replaces %s and %s: give one or the other",
				jobapi.Flag(jobapi.FlagArchiveFrom), jobapi.Flag(jobapi.FlagArchive), jobapi.Flag(jobapi.FlagSHA256))
		}
		res, err := resolvedArchive(f.ArchiveFrom)
		if err != nil {
			return usageError(stderr, jobapi.KindRestore, "%s", err)
		}
		*archive, *sum = res.ArchiveRef, res.SHA256
		if res.Gone {
			return restoreGone(ctx, fs, f, res, stdout, stderr)
		}
	}
	if *archive == "" {
		problems = append(problems, jobapi.Flag(jobapi.FlagArchive)+" is required: the archive file to restore")
	}
	switch {
	case *sum == "":
		problems = append(problems, jobapi.Flag(jobapi.FlagSHA256)+" is required: the archive's SHA-256 as the catalog recorded it (archiver list)")
	case !jobapi.IsSHA256(*sum):
		problems = append(problems, flagErrorf(jobapi.FlagSHA256, "%q: want 64 lowercase hex digits", *sum).Error())
	}
	if *into == "" {
		problems = append(problems, jobapi.Flag(jobapi.FlagInto)+" is required: the world folder to restore into")
	}
	if *maxBytes <= 0 {
		problems = append(problems, flagErrorf(jobapi.FlagMaxBytes, "%d: must be positive", *maxBytes).Error())
	}
	if *maxEntries <= 0 {
		problems = append(problems, flagErrorf(jobapi.FlagMaxEntries, "%d: must be positive", *maxEntries).Error())
	}
	keys, err := loadKeys(fs, f.EncryptionKeyFile)
	if err != nil {
		problems = append(problems, flagErrorf(jobapi.FlagEncryptionKeyFile, ": %s", err).Error())
	}
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintf(stderr, "archiver restore: %s\n", p)
		}
		return exitUsage
	}
	o := extract.Options{
		Archive:    *archive,
		SHA256:     *sum,
		Into:       *into,
		Replace:    *replace,
		RunID:      *runID,
		MaxBytes:   *maxBytes,
		MaxEntries: *maxEntries,
		Decrypt:    decryptOf(keys),
	}
	if st, key, ok, err := chunkedStore(s3Over(fs, f.S3, config.S3{}), *archive); ok {
		if err != nil {
			return usageError(stderr, jobapi.KindRestore, "%s", flagErrorf(jobapi.FlagArchive, ": %s", err))
		}
		if root, _, _ := jobapi.SplitManifestRef(*archive); !jobapi.IsS3URL(*archive) && *into != "" {
			if abs, err := filepath.Abs(*into); err == nil && within(root, abs) {
				return usageError(stderr, jobapi.KindRestore, "the chunked store %s lies inside the target folder %s, which the restore replaces: restore elsewhere", root, *into)
			}
		}
		ref := *archive
		o.Open = func(ctx context.Context) (io.ReadCloser, error) {
			return chunkedStream(ctx, st, ref, key, o.SHA256, keys)
		}
		o.Verified = true
	} else if jobapi.IsS3URL(*archive) {
		open, err := openS3Ref(s3Over(fs, f.S3, config.S3{}), *archive)
		if err != nil {
			return usageError(stderr, jobapi.KindRestore, "%s", flagErrorf(jobapi.FlagArchive, ": %s", err))
		}
		o.Open = open
	} else if s3Given(fs) {
		return usageError(stderr, jobapi.KindRestore, "the %s* flags go with an s3:// %s", jobapi.Flag("s3-"), jobapi.Flag(jobapi.FlagArchive))
	}
	if err := o.Validate(); err != nil {
		return usageError(stderr, "restore", "%s", err)
	}
	log := newLogger(format, stderr)

	if err := extract.CheckFolder(*into); err != nil {
		log.Error("restore refused: --into is not a folder: give the world's folder", "into", *into, "world_state", extract.StateUnchanged, "error", err)
		return exitUsage
	}
	// Restore refuses a world a running server uses (ErrInUse), after its
	// marker: a rerun of a restore already done exits 0 while the server runs.
	res, err := extract.Restore(ctx, log, o)
	if err != nil {
		return restoreFailed(log, err, *archive, *into)
	}
	tlog := terminationLog{path: *termPath, explicit: flagSet(fs, "termination-log")}
	if res.WorldState == extract.StateAlreadyRestored {
		return alreadyRestored(log, tlog, res, *into, *runID, "", stdout)
	}
	tlog.writeBounded(log, &jobapi.RestoreResult{Status: jobapi.StatusRestored, RunID: *runID, ArchiveRef: *archive, SHA256: *sum,
		SizeBytes: res.ArchiveBytes, WorldState: res.WorldState})
	fmt.Fprintf(stdout, "restored %s into %s: %d entries, %d files, %d bytes (%s); world %s\n",
		*archive, *into, res.Entries, res.Files, res.Bytes, res.Compression, res.WorldState)
	return exitOK
}

// errRunGone is the error of a restore whose run the catalog no longer has
// and whose world's marker does not show it done.
var errRunGone = errors.New("nothing to restore")

// restoreGone finishes a restore by run whose run archiver resolve found
// gone from the catalog (pruned since the restore was asked for, or never
// recorded: the catalog cannot tell): with the world's marker naming this
// restore's run ID, the restore was done before and nothing is done (exit
// 0, already restored, as any rerun); otherwise it is refused, exit 2, the
// world as it was (an interrupted swap is finished first, as by any
// restore).
func restoreGone(ctx context.Context, fs *flag.FlagSet, f *restoreFlags, run jobapi.ResolvedRun, stdout, stderr io.Writer) int {
	log := newLogger(f.LogFormat, stderr)
	gone := fmt.Errorf("%w: run %s of server %s is not in the catalog (pruned since the restore was asked for, or never "+
		"recorded: check `archiver list --server %s`); name a recorded run, or remove the restore entry",
		errRunGone, run.RunID, run.Server, run.Server)
	o := extract.Options{Into: f.Into, Replace: f.Replace, RunID: f.RunID, Gone: gone}
	if err := o.Validate(); err != nil {
		return usageError(stderr, jobapi.KindRestore, "%s", err)
	}
	if err := extract.CheckFolder(f.Into); err != nil {
		log.Error("restore refused: --into is not a folder: give the world's folder", "into", f.Into, "world_state", extract.StateUnchanged, "error", err)
		return exitUsage
	}
	res, err := extract.Restore(ctx, log, o)
	if err != nil {
		return restoreFailed(log, err, "", f.Into)
	}
	tlog := terminationLog{path: f.terminationLog, explicit: flagSet(fs, "termination-log")}
	return alreadyRestored(log, tlog, res, f.Into, f.RunID, "; its run "+run.RunID+" is not in the catalog", stdout)
}

// alreadyRestored reports a restore that found its run ID's marker in the
// world (extract.StateAlreadyRestored): what the world holds is the archive
// this run ID restored before, which a re-created Job may name another (a
// marker of an older archiver names none). note ends the line on stdout.
func alreadyRestored(log hclog.Logger, tlog terminationLog, res extract.Result, into, runID, note string, stdout io.Writer) int {
	tlog.writeBounded(log, &jobapi.RestoreResult{Status: jobapi.StatusAlreadyRestored, RunID: runID,
		ArchiveRef: res.Restored.Archive, SHA256: res.Restored.SHA256, SizeBytes: res.ArchiveBytes, WorldState: res.WorldState})
	fmt.Fprintf(stdout, "already restored %s into %s (run %s%s)\n", cmp.Or(res.Restored.Archive, "sha256 "+res.Restored.SHA256), into, runID, note)
	return exitOK
}

// restoreFailed logs why extract.Restore failed with err, restoring archive
// ("" for a run gone from the catalog) into into, and returns the exit
// code: 2 for what a retry cannot help, 3 for an archive refused, 1 else.
func restoreFailed(log hclog.Logger, err error, archive, into string) int {
	state := extract.WorldState(err)
	kv := []any{"into", into, "world_state", state, "error", err}
	if archive != "" {
		kv = append([]any{"archive", archive}, kv...)
	}
	var refused *extract.RefusedError
	switch {
	case errors.Is(err, errRunGone):
		log.Error("restore refused", kv...)
		return exitUsage
	case errors.Is(err, extract.ErrInUse):
		log.Error("restore refused: the world is in use", kv...)
		return exitFailed
	case keyProblem(err):
		log.Error("restore refused: the encryption key is missing, unusable or wrong", kv...)
		return exitUsage
	case errors.As(err, &refused):
		at := []any{"reason", refused.Reason}
		if refused.Index != 0 { // about one entry: name it; else the reason says where
			at = append([]any{"entry", refused.Name, "index", refused.Index}, at...)
		}
		log.Error("archive refused", append(at, kv...)...)
		return exitRefused
	case chunkedDamage(err):
		log.Error("chunked run refused", kv...)
		return exitRefused
	case errors.Is(err, extract.ErrChecksum):
		log.Error("archive checksum mismatch", kv...)
		return exitRefused
	case errors.Is(err, extract.ErrMarkerNotBound):
		log.Error("restore refused: the world's marker names this run but is not bound to it", kv...)
		return exitUsage
	case errors.Is(err, store.ErrDenied) || errors.Is(err, store.ErrNoRoot):
		log.Error("the archive store refused the restore", kv...)
		return exitUsage
	default:
		log.Error("restore failed", kv...)
		return exitFailed
	}
}
