package jobapi

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
)

// Verify is the request of `archiver verify` as the verify Job runs it:
// check the archive Archive (a file, a chunked run's manifest, or an
// s3:// object read with S3) against SHA256, or the archive of the
// ResolvedRun file ArchiveFrom (the verify by run: archiver resolve wrote
// it), then, with WorldCheck, restore it into a fresh folder under Scratch
// and check the world it holds (Chunks of each region's chunks). Like a
// restore it needs no database and no config file.
type Verify struct {
	Archive     string // a file, a manifest or s3://bucket/key
	SHA256      string // 64 lowercase hex digits
	ArchiveFrom string // a ResolvedRun file, in place of Archive and SHA256
	WorldCheck  bool
	Chunks      string // the chunk sample, 10% or 0.1; "" = every chunk
	Scratch     string // "" = the system temp folder
	S3          S3     // with an s3:// Archive
	// EncryptionKeyFile holds the age identity of an encrypted archive
	// (a mounted Secret); "" = the archive is not encrypted.
	EncryptionKeyFile string
	Notify            Notify // the webhook of the run's outcome

	LogFormat LogFormat // "" = LogAuto
}

// Kind returns KindVerify.
func (Verify) Kind() string { return KindVerify }

// WithDefaults returns v as the archiver sees it: the flags it leaves out
// at their defaults.
func (v Verify) WithDefaults() Verify {
	if v.LogFormat == "" {
		v.LogFormat = LogAuto
	}
	v.Notify = v.Notify.withDefaults()
	return v
}

// Args returns the archiver's command line of v, the subcommand first.
func (v Verify) Args() []string {
	a := args{KindVerify}
	if v.ArchiveFrom != "" {
		a.always(FlagArchiveFrom, v.ArchiveFrom)
	} else {
		a.always(FlagArchive, v.Archive)
		a.always(FlagSHA256, v.SHA256)
	}
	a.bool(FlagWorldCheck, v.WorldCheck)
	a.str(FlagChunks, v.Chunks)
	a.str(FlagScratch, v.Scratch)
	v.S3.args(&a)
	a.str(FlagEncryptionKeyFile, v.EncryptionKeyFile)
	v.Notify.args(&a)
	a.str(FlagLogFormat, string(v.LogFormat))
	return a
}

// Bind registers the verify Job's flags on fs, storing into v.
func (v *Verify) Bind(fs *flag.FlagSet) {
	fs.StringVar(&v.Archive, FlagArchive, "", "verify this archive: a file, a chunked run's manifest or s3://bucket/key")
	fs.StringVar(&v.SHA256, FlagSHA256, "", "with "+Flag(FlagArchive)+": expected SHA-256 (lowercase hex); skips the catalog")
	fs.StringVar(&v.ArchiveFrom, FlagArchiveFrom, "", "read the archive and its SHA-256 from this file, which archiver resolve wrote, in place of "+Flag(FlagArchive)+" and "+Flag(FlagSHA256)+" (the verify by run)")
	fs.BoolVar(&v.WorldCheck, FlagWorldCheck, false, "after the archive verifies, restore it into a scratch folder and check the world it holds (level.dat, region files, chunks, player files)")
	fs.StringVar(&v.Chunks, FlagChunks, "", "with "+Flag(FlagWorldCheck)+": check about this share of each region's chunks (10% or 0.1; default all; each region's newest always)")
	fs.StringVar(&v.Scratch, FlagScratch, "", "with "+Flag(FlagWorldCheck)+": folder under which the archive is restored for the check, removed after (default the system temp folder)")
	v.S3.Bind(fs)
	BindEncryptionKeyFile(fs, &v.EncryptionKeyFile, KeyFileReads+"; with "+Flag(FlagRunID)+", overrides [archive] encryption_key_file")
	v.Notify.Bind(fs)
	bindLogFormat(fs, &v.LogFormat)
}

// Parsed finishes v after fs.Parse (nothing to do: every field is a flag).
func (v *Verify) Parsed(*flag.FlagSet) {}

// ParseShare parses a share of a whole, "10%" or "0.1", above 0 and at
// most 1: the world check's chunk sample, a chunked verify's data subset.
func ParseShare(s string) (float64, error) {
	v, pct := strings.CutSuffix(s, "%")
	f, err := strconv.ParseFloat(v, 64)
	if err == nil && pct {
		f /= 100
	}
	if err != nil || !(f > 0 && f <= 1) {
		return 0, fmt.Errorf("%q: want a share above 0 and at most 100%%, such as 5%% or 0.05", s)
	}
	return f, nil
}
