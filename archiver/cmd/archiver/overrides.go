package main

import (
	"flag"

	"github.com/hashicorp/go-hclog"

	"github.com/worldbackup/worldbackup/archiver/config"
	"github.com/worldbackup/worldbackup/jobapi"
)

// configOverride is a felis.toml key that a flag replaces when given.
type configOverride struct{ flag, key string }

// configOverrides returns the keys of felis.toml that a flag replaces. A Job's
// arguments always give --archive-root or --store, a backup's also
// --compression, and with an S3 store the two key files: in a Job those
// keys of the config Secret never take effect (archiver/README.md names
// them).
func configOverrides() []configOverride {
	return []configOverride{
		{jobapi.FlagArchiveRoot, "archive.local_path"},
		{jobapi.FlagArchiveRoot, "archive.store"},
		{jobapi.FlagStore, "archive.local_path"},
		{jobapi.FlagStore, "archive.store"},
		{jobapi.FlagCompression, "archive.compression"},
		{jobapi.FlagFormat, "archive.format"},
		{jobapi.FlagExclude, "archive.excludes"},
		{jobapi.FlagS3Endpoint, "archive.endpoint"},
		{jobapi.FlagS3Region, "archive.region"},
		{jobapi.FlagS3PathStyle, "archive.path_style"},
		{jobapi.FlagS3AccessKeyFile, "archive.access_key_file"},
		{jobapi.FlagS3SecretKeyFile, "archive.secret_key_file"},
		{jobapi.FlagEncryptionKeyFile, "archive.encryption_key_file"},
		{jobapi.FlagRcon, "rcon.address"},
		{jobapi.FlagRconPasswordFile, "rcon.password_file"},
		{jobapi.FlagRconRequired, "rcon.required"},
	}
}

// warnOverrides logs a warning for each key of cfg that a flag given on fs
// replaces: the key has no effect on this run.
func warnOverrides(log hclog.Logger, fs *flag.FlagSet, cfg config.Config) {
	for _, o := range configOverrides() {
		if fs.Lookup(o.flag) != nil && flagSet(fs, o.flag) && cfg.IsSet(o.key) {
			log.Warn("a flag overrides a key of felis.toml, which has no effect", "flag", jobapi.Flag(o.flag), "key", o.key, "config", cfg.Path())
		}
	}
}
