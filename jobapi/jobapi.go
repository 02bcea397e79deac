// Package jobapi is the one contract between a component's Job and the
// archiver it runs: both provider/jobspec (which renders the Job) and
// archiver/cmd/archiver (which parses its command line) compile against it.
//
// A Job kind (backup, restore, prune, verify) is one request struct here: Args
// encodes it to the container's arguments, Bind registers the same flags on
// the archiver's flag set, so a request survives the trip through the
// container unchanged (the round-trip test of archiver/cmd/archiver shows
// it). The result is the termination message: one JSON line of the kind's
// result struct, decoded by ParseSummary for the components' outputs.
//
// The rules both halves apply live here once: server names and run IDs,
// the archive layout and compression names, archive refs, the S3 URL, key
// and endpoint rules, the retention grammar, the pod paths, and the
// archiver's defaults that the components' schema quotes. The provider maps
// a rule's error onto its input; it does not re-implement the rule.
//
// The package has no dependencies beyond the standard library.
package jobapi

import (
	"errors"
	"flag"
	"strconv"
	"strings"
)

// The Job kinds: each is an archiver subcommand and the middle segment of
// its Job's name.
const (
	KindBackup  = "backup"
	KindRestore = "restore"
	KindPrune   = "prune"
	KindVerify  = "verify"
)

// Kinds lists the Job kinds.
func Kinds() []string { return []string{KindBackup, KindRestore, KindPrune, KindVerify} }

// The flag names of the requests (without the leading "--").
const (
	FlagServer           = "server"
	FlagRunID            = "run-id"
	FlagFormerOwner      = "former-owner"
	FlagNamespace        = "namespace"
	FlagWorld            = "world"
	FlagConfig           = "config"
	FlagArchiveRoot      = "archive-root"
	FlagStore            = "store"
	FlagCompression      = "compression"
	FlagFormat           = "format"
	FlagFullRead         = "full-read"
	FlagExclude          = "exclude"
	FlagRcon             = "rcon"
	FlagRconPasswordFile = "rcon-password-file"
	FlagRconRequired     = "rcon-required"
	FlagLogFormat        = "log-format"

	FlagConcurrency      = "concurrency"
	FlagConcurrencyGroup = "concurrency-group"

	FlagEncryptionKeyFile    = "encryption-key-file"
	FlagNewEncryptionKeyFile = "new-encryption-key-file"

	FlagS3Endpoint      = "s3-endpoint"
	FlagS3Region        = "s3-region"
	FlagS3PathStyle     = "s3-path-style"
	FlagS3AccessKeyFile = "s3-access-key-file"
	FlagS3SecretKeyFile = "s3-secret-key-file"

	FlagKeepLast    = "keep-last"
	FlagKeepHourly  = "keep-hourly"
	FlagKeepDaily   = "keep-daily"
	FlagKeepWeekly  = "keep-weekly"
	FlagKeepMonthly = "keep-monthly"
	FlagKeepYearly  = "keep-yearly"
	FlagKeepWithin  = "keep-within"
	FlagMinKeep     = "min-keep"
	FlagGrace       = "grace"
	FlagDryRun      = "dry-run"

	FlagArchive    = "archive"
	FlagSHA256     = "sha256"
	FlagInto       = "into"
	FlagReplace    = "replace"
	FlagMaxBytes   = "max-bytes"
	FlagMaxEntries = "max-entries"

	FlagWorldCheck = "world-check"
	FlagChunks     = "chunks"
	FlagScratch    = "scratch"
	// The flags of the commands run by hand and of the exporter.
	FlagJSON         = "json"
	FlagLimit        = "limit"
	FlagWide         = "wide"
	FlagMaxAge       = "max-age"
	FlagListen       = "listen"
	FlagCluster      = "cluster"
	FlagServerMaxAge = "server-max-age"
)

// EndOfFlags is the argument that ends the flags of a command line.
const EndOfFlags = "--"

// Flag returns the command-line form of the flag name: "--" + name.
func Flag(name string) string { return EndOfFlags + name }

// Given reports whether any of the flags names was set on fs's command line.
func Given(fs *flag.FlagSet, names ...string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		for _, n := range names {
			set = set || f.Name == n
		}
	})
	return set
}

// args builds a command line: each add appends a flag and its value.
type args []string

func (a *args) str(name, v string) {
	if v != "" {
		*a = append(*a, Flag(name), v)
	}
}

func (a *args) always(name, v string) { *a = append(*a, Flag(name), v) }

func (a *args) int(name string, n int64) {
	if n > 0 {
		*a = append(*a, Flag(name), strconv.FormatInt(n, 10))
	}
}

func (a *args) bool(name string, b bool) {
	if b {
		*a = append(*a, Flag(name))
	}
}

// LogFormat is the value of --log-format: json, text or auto (json when
// stderr is not a terminal).
type LogFormat string

// The log formats.
const (
	LogJSON LogFormat = "json"
	LogText LogFormat = "text"
	LogAuto LogFormat = "auto"
)

func (f *LogFormat) String() string { return string(*f) }

// Set implements flag.Value.
func (f *LogFormat) Set(s string) error {
	switch LogFormat(s) {
	case LogJSON, LogText, LogAuto:
		*f = LogFormat(s)
		return nil
	}
	return errors.New("want json, text or auto")
}

// stringList is a repeatable string flag. An empty value gives an empty,
// non-nil list: "--exclude=" alone replaces the config file's list with
// nothing.
type stringList struct{ p *[]string }

func (l stringList) String() string {
	if l.p == nil {
		return ""
	}
	return strings.Join(*l.p, ",")
}

func (l stringList) Set(s string) error {
	if *l.p == nil {
		*l.p = []string{}
	}
	if s != "" {
		*l.p = append(*l.p, s)
	}
	return nil
}

// notBool is a boolean flag that stores its negation: --rcon-required=false
// sets RconOptional.
type notBool struct{ p *bool }

func (b notBool) String() string {
	if b.p == nil {
		return "true"
	}
	return strconv.FormatBool(!*b.p)
}

func (b notBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*b.p = !v
	return nil
}

func (b notBool) IsBoolFlag() bool { return true }

// bindLogFormat registers --log-format on fs.
func bindLogFormat(fs *flag.FlagSet, f *LogFormat) {
	if *f == "" {
		*f = LogAuto
	}
	fs.Var(f, FlagLogFormat, "json, text or auto (json when stderr is not a terminal)")
}
