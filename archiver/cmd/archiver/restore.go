package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/worldbackup/worldbackup/archiver/config"
	"github.com/worldbackup/worldbackup/archiver/extract"
	"github.com/worldbackup/worldbackup/archiver/store"
)

const restoreHelp = `Usage: archiver restore --archive PATH --sha256 HEX --into DIR [--replace] [--run-id R] [flags]

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
catalog (archiver list) beforehand.

An s3://bucket/key archive is read from the S3 store named by the --s3-*
flags, with the credentials of the files of a mounted Secret. It is streamed
twice, nothing is downloaded to disk: once to check its SHA-256, once to
extract it, checked again before the swap.

With --run-id, the restored world holds a marker (.worldbackup-restored: the
run ID, the checksum and the time); a rerun with the same run ID and checksum
finds it and exits 0 without touching the world. The log's world_state says
what DIR holds at the end: unchanged, restored, replaced (", old copy left at
PATH" when the old world could not be removed), already restored, or
incomplete (a half-done swap: rerun to finish).

A restored world writes a one-line JSON summary to the termination log
(status restored or already-restored, run_id, archive_ref, sha256,
size_bytes, world_state); a failed restore writes none, so the pod's
termination message is the log's tail.
`

// restoreSummary is the termination message of a restore that succeeded.
type restoreSummary struct {
	Status     string `json:"status"` // restored | already-restored
	RunID      string `json:"run_id,omitempty"`
	ArchiveRef string `json:"archive_ref"`
	SHA256     string `json:"sha256"`
	SizeBytes  int64  `json:"size_bytes,omitempty"`
	WorldState string `json:"world_state"`
}

// cmdRestore runs `archiver restore`: flag problems exit 2, a checksum
// mismatch or refused archive exits 3 and a failed restore 1 (the world
// folder as its world_state says), a restored world exits 0.
func cmdRestore(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	format := logFormat("auto")
	fs := newFlagSet("restore", restoreHelp, stderr)
	archive := fs.String("archive", "", "archive to restore, a file or s3://bucket/key: .tar.zst, .tar.gz or .tar, detected from its bytes (required)")
	sum := fs.String("sha256", "", "the archive's expected SHA-256, 64 lowercase hex digits, as archiver list shows it (required)")
	into := fs.String("into", "", "world folder to restore into (required)")
	replace := fs.Bool("replace", false, "replace DIR's contents when it is not empty (without it, a non-empty DIR is an error)")
	runID := fs.String("run-id", "", "the restore's own run ID (the restore Job passes it): recorded in DIR's restore marker; a rerun with the same run ID and checksum does nothing")
	maxBytes := fs.Int64("max-bytes", extract.DefaultMaxBytes, "refuse the archive when its files hold more bytes than this")
	maxEntries := fs.Int64("max-entries", extract.DefaultMaxEntries, "refuse the archive when it has more entries than this")
	fs.Var(&format, "log-format", "json, text or auto (json when stderr is not a terminal)")
	termPath := fs.String("termination-log", defaultTerminationLog,
		"file for the one-line JSON summary of a restored world; skipped when its folder is missing (the default path: when the file is missing)")
	var s3f s3Flags
	s3f.add(fs)
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return code
	}
	var problems []string
	if *archive == "" {
		problems = append(problems, "--archive is required: the archive file to restore")
	}
	switch {
	case *sum == "":
		problems = append(problems, "--sha256 is required: the archive's SHA-256 as the catalog recorded it (archiver list)")
	case !isSHA256(*sum):
		problems = append(problems, fmt.Sprintf("--sha256 %q: want 64 lowercase hex digits", *sum))
	}
	if *into == "" {
		problems = append(problems, "--into is required: the world folder to restore into")
	}
	if *maxBytes <= 0 {
		problems = append(problems, fmt.Sprintf("--max-bytes %d: must be positive", *maxBytes))
	}
	if *maxEntries <= 0 {
		problems = append(problems, fmt.Sprintf("--max-entries %d: must be positive", *maxEntries))
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
	}
	if store.IsS3URL(*archive) {
		open, err := openS3Ref(s3f.over(fs, config.S3{}), *archive)
		if err != nil {
			return usageError(stderr, "restore", "--archive: %s", err)
		}
		o.Open = open
	} else if s3f.given(fs) {
		return usageError(stderr, "restore", "the --s3-* flags go with an s3:// --archive")
	}
	if err := o.Validate(); err != nil {
		return usageError(stderr, "restore", "%s", err)
	}
	log := newLogger(format, stderr)

	// A running server keeps writing its world: never restore under it.
	switch err := extract.WorldInUse(*into); {
	case errors.Is(err, extract.ErrInUse):
		log.Error("restore refused: the world is in use", "into", *into, "world_state", extract.StateUnchanged, "error", err)
		return exitFailed
	case errors.Is(err, extract.ErrNotFolder):
		log.Error("restore refused: --into is not a folder: give the world's folder", "into", *into, "world_state", extract.StateUnchanged, "error", err)
		return exitUsage
	case err != nil:
		log.Error("restore refused: cannot check whether a server uses the world", "into", *into, "world_state", extract.StateUnchanged, "error", err)
		return exitFailed
	}
	res, err := extract.Restore(ctx, log, o)
	if err != nil {
		state := extract.WorldState(err)
		var refused *extract.RefusedError
		switch {
		case errors.As(err, &refused):
			log.Error("archive refused", "entry", refused.Name, "index", refused.Index, "reason", refused.Reason,
				"archive", *archive, "into", *into, "world_state", state, "error", err)
			return exitRefused
		case errors.Is(err, extract.ErrChecksum):
			log.Error("archive checksum mismatch", "archive", *archive, "into", *into, "world_state", state, "error", err)
			return exitRefused
		case errors.Is(err, store.ErrDenied) || errors.Is(err, store.ErrNoRoot):
			log.Error("the archive store refused the restore", "archive", *archive, "into", *into, "world_state", state, "error", err)
			return exitUsage
		default:
			log.Error("restore failed", "archive", *archive, "into", *into, "world_state", state, "error", err)
			return exitFailed
		}
	}
	summary := restoreSummary{Status: "restored", RunID: *runID, ArchiveRef: *archive, SHA256: *sum,
		SizeBytes: res.ArchiveBytes, WorldState: res.WorldState}
	if res.WorldState == extract.StateAlreadyRestored {
		summary.Status = "already-restored"
	}
	terminationLog{path: *termPath, explicit: flagSet(fs, "termination-log")}.writeBounded(log, &summary)
	if res.WorldState == extract.StateAlreadyRestored {
		fmt.Fprintf(stdout, "already restored %s into %s (run %s)\n", *archive, *into, *runID)
		return exitOK
	}
	fmt.Fprintf(stdout, "restored %s into %s: %d entries, %d files, %d bytes (%s); world %s\n",
		*archive, *into, res.Entries, res.Files, res.Bytes, res.Compression, res.WorldState)
	return exitOK
}
