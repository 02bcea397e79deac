package jobapi

import "flag"

// Restore is the request of `archiver restore`: restore the world folder
// Into from Archive (a file, or an s3:// object read with S3), checked
// against SHA256, or from the archive of the ResolvedRun file ArchiveFrom
// (the restore by run: archiver resolve wrote it); RunID is the restore's
// idempotency key.
type Restore struct {
	RunID       string
	Archive     string // a file or s3://bucket/key
	SHA256      string // 64 lowercase hex digits
	ArchiveFrom string // a ResolvedRun file, in place of Archive and SHA256
	Into        string
	Replace     bool  // replace a world that is not empty
	MaxBytes    int64 // 0 = DefaultMaxBytes
	MaxEntries  int64 // 0 = DefaultMaxEntries
	S3          S3    // with an s3:// Archive
	// EncryptionKeyFile holds the age identity of an encrypted archive
	// (a mounted Secret); "" = the archive is not encrypted.
	EncryptionKeyFile string

	LogFormat LogFormat // "" = LogAuto
	Notify    Notify    // the webhook of the run's outcome
}

// Kind returns KindRestore.
func (Restore) Kind() string { return KindRestore }

// WithDefaults returns r as the archiver sees it: the flags it leaves out
// at their defaults.
func (r Restore) WithDefaults() Restore {
	if r.MaxBytes <= 0 {
		r.MaxBytes = DefaultMaxBytes
	}
	if r.MaxEntries <= 0 {
		r.MaxEntries = DefaultMaxEntries
	}
	if r.LogFormat == "" {
		r.LogFormat = LogAuto
	}
	r.Notify = r.Notify.withDefaults()
	return r
}

// Args returns the archiver's command line of r, the subcommand first. The
// restore needs no database and no config file.
func (r Restore) Args() []string {
	a := args{KindRestore}
	a.str(FlagRunID, r.RunID)
	if r.ArchiveFrom != "" {
		a.always(FlagArchiveFrom, r.ArchiveFrom)
	} else {
		a.always(FlagArchive, r.Archive)
		a.always(FlagSHA256, r.SHA256)
	}
	a.always(FlagInto, r.Into)
	a.bool(FlagReplace, r.Replace)
	a.int(FlagMaxBytes, r.MaxBytes)
	a.int(FlagMaxEntries, r.MaxEntries)
	r.S3.args(&a)
	r.Notify.args(&a)
	a.str(FlagEncryptionKeyFile, r.EncryptionKeyFile)
	a.str(FlagLogFormat, string(r.LogFormat))
	return a
}

// Bind registers the restore's flags on fs, storing into r.
func (r *Restore) Bind(fs *flag.FlagSet) {
	fs.StringVar(&r.Archive, FlagArchive, "", "archive to restore, a file or s3://bucket/key: .tar.zst, .tar.gz or .tar, detected from its bytes (required unless "+Flag(FlagArchiveFrom)+")")
	fs.StringVar(&r.SHA256, FlagSHA256, "", "the archive's expected SHA-256, 64 lowercase hex digits, as archiver list shows it (required unless "+Flag(FlagArchiveFrom)+")")
	fs.StringVar(&r.ArchiveFrom, FlagArchiveFrom, "", "read the archive and its SHA-256 from this file, which archiver resolve wrote, in place of "+Flag(FlagArchive)+" and "+Flag(FlagSHA256)+" (the restore by run); the world's marker then names the run alone: a rerun of the same restore does nothing, even when the catalog's newest run has changed")
	fs.StringVar(&r.Into, FlagInto, "", "world folder to restore into (required)")
	fs.BoolVar(&r.Replace, FlagReplace, false, "replace DIR's contents when it is not empty (without it, a non-empty DIR is an error)")
	fs.StringVar(&r.RunID, FlagRunID, "", "the restore's own run ID (the restore Job passes it): recorded in DIR's restore marker; a rerun with the same run ID does nothing, whatever archive it is given")
	fs.Int64Var(&r.MaxBytes, FlagMaxBytes, DefaultMaxBytes, "refuse the archive when its files hold more bytes than this")
	fs.Int64Var(&r.MaxEntries, FlagMaxEntries, DefaultMaxEntries, "refuse the archive when it has more entries than this")
	bindLogFormat(fs, &r.LogFormat)
	r.Notify.Bind(fs)
	r.S3.Bind(fs)
	BindEncryptionKeyFile(fs, &r.EncryptionKeyFile, KeyFileReads)
}

// Parsed finishes r after fs.Parse (nothing to do: every field is a flag).
func (r *Restore) Parsed(*flag.FlagSet) {}
