package jobapi

import (
	"flag"
	"fmt"
	"strings"
)

// Backup is the request of `archiver backup`: archive the world of Server
// as run RunID into the folder store ArchiveRoot or the S3 store Store,
// quiescing the game server over Rcon, then prune with Retention.
type Backup struct {
	Server      string
	RunID       string
	FormerOwner string // "" = none
	// Namespace is the Job's namespace, recorded in the run's row and
	// scoping the server's runs the backup looks at; "" = every namespace
	// (CheckNamespace, NamespaceUsage).
	Namespace string
	World     string // "" = DefaultWorld
	Config    string // felis.toml; "" = DefaultConfigPath

	// Store is the S3 store s3://bucket[/prefix] (with the settings S3);
	// "": the folder store ArchiveRoot (or felis.toml's [archive]).
	Store       string
	S3          S3
	ArchiveRoot string

	Compression string   // "" = [archive] compression
	Format      string   // tar or chunked; "" = [archive] format
	FullRead    bool     // chunked: read every file, even unchanged ones
	Excludes    []string // nil = [archive] excludes; empty = none

	// EncryptionKeyFile is the file holding the age identity the run
	// encrypts to (a mounted Secret); "" = [archive] encryption_key_file,
	// or no encryption.
	EncryptionKeyFile string

	Rcon      Rcon       // Address "": [rcon] of felis.toml, or none
	Retention *Retention // nil: no prune after the run

	LogFormat LogFormat // "" = LogAuto
	Notify    Notify    // the webhook of the run's outcome

	// Concurrency, when above 0, has the run wait for one of that many
	// slots of ConcurrencyGroup in the catalog before it starts (see
	// CheckConcurrency): the door of a concurrency cap.
	Concurrency      int
	ConcurrencyGroup string
}

// Rcon says how the backup reaches the game server to quiesce it.
type Rcon struct {
	Address      string // host:port
	PasswordFile string // file holding the password (a mounted Secret)
	Optional     bool   // --rcon-required=false: an unreachable server is a warning
}

// Kind returns KindBackup.
func (Backup) Kind() string { return KindBackup }

// WithDefaults returns b as the archiver sees it: the flags it leaves out
// at their defaults.
func (b Backup) WithDefaults() Backup {
	setDefault(&b.World, DefaultWorld)
	setDefault(&b.Config, DefaultConfigPath)
	if b.LogFormat == "" {
		b.LogFormat = LogAuto
	}
	b.Notify = b.Notify.withDefaults()
	if b.Retention != nil {
		r := b.Retention.withDefaults()
		b.Retention = &r
	}
	return b
}

// Args returns the archiver's command line of b, the subcommand first.
// The credentials and the RCON password are files, never values.
func (b Backup) Args() []string {
	a := args{KindBackup}
	a.always(FlagServer, b.Server)
	a.always(FlagRunID, b.RunID)
	a.str(FlagFormerOwner, b.FormerOwner)
	a.str(FlagNamespace, b.Namespace)
	a.str(FlagWorld, b.World)
	a.str(FlagConfig, b.Config)
	if b.Store != "" {
		a.always(FlagStore, b.Store)
		b.S3.args(&a)
	} else {
		a.str(FlagArchiveRoot, b.ArchiveRoot)
	}
	a.str(FlagCompression, b.Compression)
	a.str(FlagFormat, b.Format)
	if b.FullRead {
		a = append(a, Flag(FlagFullRead))
	}
	a.str(FlagEncryptionKeyFile, b.EncryptionKeyFile)
	for _, e := range b.Excludes {
		a.always(FlagExclude, e)
	}
	if b.Excludes != nil && len(b.Excludes) == 0 {
		a = append(a, Flag(FlagExclude)+"=") // an empty list: exclude nothing
	}
	if r := b.Rcon; r.Address != "" {
		a.always(FlagRcon, r.Address)
		a.str(FlagRconPasswordFile, r.PasswordFile)
		if r.Optional {
			a = append(a, Flag(FlagRconRequired)+"=false")
		}
	}
	if b.Retention != nil {
		b.Retention.args(&a)
	}
	b.Notify.args(&a)
	a.str(FlagLogFormat, string(b.LogFormat))
	return append(a, ConcurrencyArgs(b.Concurrency, b.ConcurrencyGroup)...)
}

// ConcurrencyArgs returns the flags that have a backup wait for one of n
// slots of group (none when n is 0): the backup Job of a capped
// WorldBackup gets them.
func ConcurrencyArgs(n int, group string) []string {
	var a args
	a.int(FlagConcurrency, int64(n))
	a.str(FlagConcurrencyGroup, group)
	return a
}

// MaxConcurrency bounds a concurrency cap: the components' concurrency
// input and the archiver's --concurrency.
const MaxConcurrency = 1000

// MaxConcurrencyGroup bounds the length of a concurrency group, in bytes.
const MaxConcurrencyGroup = 256

// CheckConcurrency checks a backup's concurrency flags: n from 0 (no cap)
// to MaxConcurrency, and with a cap a group of 1 to MaxConcurrencyGroup
// bytes.
func CheckConcurrency(n int, group string) error {
	switch {
	case n < 0 || n > MaxConcurrency:
		return fmt.Errorf("%s is %d: it is how many backups of the group run at once, from 1 to %d (0: no cap)", Flag(FlagConcurrency), n, MaxConcurrency)
	case n == 0 && group != "":
		return fmt.Errorf("%s is set without %s", Flag(FlagConcurrencyGroup), Flag(FlagConcurrency))
	case n > 0 && group == "":
		return fmt.Errorf("%s needs %s: the name of the backups that share the cap (a cluster)", Flag(FlagConcurrency), Flag(FlagConcurrencyGroup))
	case len(group) > MaxConcurrencyGroup:
		return fmt.Errorf("%s is %d bytes long, more than %d", Flag(FlagConcurrencyGroup), len(group), MaxConcurrencyGroup)
	}
	return nil
}

// Bind registers the backup's flags on fs, storing into b. After fs.Parse,
// call Parsed.
func (b *Backup) Bind(fs *flag.FlagSet) {
	fs.StringVar(&b.Server, FlagServer, "", "server name, a DNS-1123 label (required)")
	fs.StringVar(&b.RunID, FlagRunID, "", "run ID, the idempotency key: "+RunIDPattern+" (required)")
	fs.StringVar(&b.FormerOwner, FlagFormerOwner, "", "former owner of the world, recorded in the row")
	fs.StringVar(&b.Namespace, FlagNamespace, "", NamespaceUsage)
	fs.StringVar(&b.World, FlagWorld, DefaultWorld, "world folder to archive")
	fs.StringVar(&b.Config, FlagConfig, DefaultConfigPath, ConfigFileName)
	fs.StringVar(&b.ArchiveRoot, FlagArchiveRoot, "", "archive root folder; overrides [archive] local_path")
	fs.StringVar(&b.Compression, FlagCompression, "", "format tar only: zstd, gzip or none; overrides [archive] compression (default "+DefaultCompression+")")
	fs.StringVar(&b.Format, FlagFormat, "", "archive format, "+FormatChunked+" (deduplicated blobs in packs) or "+FormatTar+" (one compressed tar per run); overrides [archive] format (default "+DefaultFormat+")")
	fs.BoolVar(&b.FullRead, FlagFullRead, false, "chunked format: read every file, even those unchanged since the server's previous chunked run")
	fs.Var(stringList{&b.Excludes}, FlagExclude, "glob of entries to leave out, repeatable; replaces [archive] excludes (default "+strings.Join(DefaultExcludes(), ", ")+"); an empty one alone: exclude nothing")
	fs.StringVar(&b.Rcon.Address, FlagRcon, "", "host:port of the game server's RCON: autosave off while the world is read; overrides [rcon] address")
	fs.StringVar(&b.Rcon.PasswordFile, FlagRconPasswordFile, "", "file holding the RCON password (a mounted Secret); overrides [rcon] password_file")
	fs.Var(notBool{&b.Rcon.Optional}, FlagRconRequired, "fail when the game server cannot be reached (false: warn and back up without quiescing); overrides [rcon] required")
	BindEncryptionKeyFile(fs, &b.EncryptionKeyFile, KeyFileWrites)
	b.Retention = new(Retention)
	b.Retention.Bind(fs)
	fs.StringVar(&b.Store, FlagStore, "", "s3://bucket/prefix: archive into this S3 store (settings: the --s3-* flags over [archive]); overrides [archive] store and local_path")
	b.S3.Bind(fs)
	bindLogFormat(fs, &b.LogFormat)
	b.Notify.Bind(fs)
	fs.IntVar(&b.Concurrency, FlagConcurrency, 0, "wait, before the run, for one of this many slots of "+Flag(FlagConcurrencyGroup)+
		" in the catalog (PostgreSQL advisory locks, held until the run ends): at most that many backups of the group run at once (0: no cap)")
	fs.StringVar(&b.ConcurrencyGroup, FlagConcurrencyGroup, "", "the backups that share "+Flag(FlagConcurrency)+"'s slots (the components: a cluster)")
}

// Parsed finishes b after fs.Parse: Retention is nil unless a retention
// flag was given.
func (b *Backup) Parsed(fs *flag.FlagSet) {
	if !Given(fs, RetentionFlags()...) {
		b.Retention = nil
	}
}

func setDefault(v *string, def string) {
	if *v == "" {
		*v = def
	}
}

// BindEncryptionKeyFile registers --encryption-key-file on fs (backup,
// restore, verify, export, rekey), storing into p; use says what the
// command does with the file, which holds an age identity.
func BindEncryptionKeyFile(fs *flag.FlagSet, p *string, use string) {
	fs.StringVar(p, FlagEncryptionKeyFile, "", "file holding the age identity (AGE-SECRET-KEY-1..., as age-keygen writes it; a mounted Secret): "+use)
}

// The uses of --encryption-key-file that BindEncryptionKeyFile's callers give.
const (
	// KeyFileWrites: a backup's.
	KeyFileWrites = "archives are encrypted to its first identity; overrides [archive] encryption_key_file"
	// KeyFileReads: a restore's or an export's.
	KeyFileReads = "an encrypted archive is read with any of its identities"
)

// NeedKeyAdvice is what an encrypted archive read without a key file is
// told to do, in the archiver's errors.
func NeedKeyAdvice() string {
	return "pass " + Flag(FlagEncryptionKeyFile) + " (in a Job, the component's encryption input)"
}
