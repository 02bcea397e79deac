package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/worldbackup/worldbackup/archiver/extract"
)

const restoreHelp = `Usage: archiver restore --archive PATH --sha256 HEX --into DIR [--replace] [flags]

Restores a world from an archive that may have been tampered with. The
archive's SHA-256 is checked before anything is extracted; the archive is then
extracted into a staging folder (beside DIR, or inside DIR when DIR is a mount
point) and only when it extracted completely is it swapped into place. The old
world is kept aside until the swap is done, then removed. A refused or failed
archive leaves DIR as it was, and the log names the entry and the reason.

Refused: names with ".." or absolute names, NUL bytes, symlinks whose target
leaves DIR, hard links to anything but an earlier file of the archive, entries
written through a symlink, duplicate entries, devices and fifos, and archives
past --max-bytes or --max-entries. Restore needs no database and no config
file: take the checksum from the catalog (archiver list) beforehand.
`

// cmdRestore runs `archiver restore`: flag problems exit 2, a checksum
// mismatch, refused archive or failed restore exits 1 (the world folder as it
// was), a restored world exits 0.
func cmdRestore(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	format := logFormat("auto")
	fs := newFlagSet("restore", restoreHelp, stderr)
	archive := fs.String("archive", "", "archive file to restore: .tar.zst, .tar.gz or .tar, detected from its bytes (required)")
	sum := fs.String("sha256", "", "the archive's expected SHA-256, 64 lowercase hex digits, as archiver list shows it (required)")
	into := fs.String("into", "", "world folder to restore into (required)")
	replace := fs.Bool("replace", false, "replace DIR's contents when it is not empty (without it, a non-empty DIR is an error)")
	maxBytes := fs.Int64("max-bytes", extract.DefaultMaxBytes, "refuse the archive when its files hold more bytes than this")
	maxEntries := fs.Int64("max-entries", extract.DefaultMaxEntries, "refuse the archive when it has more entries than this")
	fs.Var(&format, "log-format", "json, text or auto (json when stderr is not a terminal)")
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
		MaxBytes:   *maxBytes,
		MaxEntries: *maxEntries,
	}
	if err := o.Validate(); err != nil {
		return usageError(stderr, "restore", "%s", err)
	}
	log := newLogger(format, stderr)

	// A running server keeps writing its world: never restore under it.
	if err := extract.WorldInUse(*into); err != nil {
		log.Error("restore refused; the world folder is untouched", "into", *into, "error", err)
		return exitFailed
	}
	res, err := extract.Restore(ctx, log, o)
	if err != nil {
		var refused *extract.RefusedError
		switch {
		case errors.As(err, &refused):
			log.Error("archive refused; the world folder is untouched", "entry", refused.Name, "index", refused.Index,
				"reason", refused.Reason, "archive", *archive, "into", *into, "error", err)
		case errors.Is(err, extract.ErrChecksum):
			log.Error("archive checksum mismatch; nothing was extracted", "archive", *archive, "error", err)
		default:
			log.Error("restore failed; the world folder is as it was", "archive", *archive, "into", *into, "error", err)
		}
		return exitFailed
	}
	fmt.Fprintf(stdout, "restored %s into %s: %d entries, %d files, %d bytes (%s)\n",
		*archive, *into, res.Entries, res.Files, res.Bytes, res.Compression)
	return exitOK
}
