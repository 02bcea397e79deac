package jobapi

import "time"

// Pod paths: where a Job mounts what the archiver reads.
const (
	// ConfigFileName is the archiver's config file inside the config
	// Secret, read at <config mount>/ConfigFileName.
	ConfigFileName = "felis.toml"
	// RconMountPath is where the backup Job mounts the RCON password
	// Secret; --rcon-password-file names a key under it.
	RconMountPath = "/etc/felis-rcon"
	// S3MountPath is where a Job mounts the S3 credentials Secret: its two
	// keys under the fixed file names S3AccessKeyFile and S3SecretKeyFile,
	// whatever their keys in the Secret.
	S3MountPath     = "/etc/felis-s3"
	S3AccessKeyFile = "access-key"
	S3SecretKeyFile = "secret-key"
	// EncryptionMountPath is where a Job mounts the encryption Secret: its
	// key (the age identity) under the fixed file name EncryptionKeyFile,
	// which --encryption-key-file names.
	EncryptionMountPath = "/etc/felis-encryption"
	EncryptionKeyFile   = "age-identity"
)

// The archiver's defaults, which the components' schema quotes.
const (
	// DefaultConfigDir is where the Jobs mount the config Secret by
	// default, and DefaultConfigPath --config when it is not given.
	DefaultConfigDir  = "/etc/felis"
	DefaultConfigPath = DefaultConfigDir + "/" + ConfigFileName
	// DefaultWorld is --world when it is not given.
	DefaultWorld = "/world"
	// DefaultCompression is the compression when neither --compression nor
	// [archive] compression is set.
	DefaultCompression = CompressionZstd
	// DefaultS3Region is the bucket's region when none is given.
	DefaultS3Region = "us-east-1"
	// DefaultGrace is --grace when it is not given: runs and archive files
	// younger than this are never pruned.
	DefaultGrace = time.Hour
	// DefaultMaxBytes and DefaultMaxEntries bound what a restore extracts.
	DefaultMaxBytes   int64 = 64 << 30  // 64 GiB of file content
	DefaultMaxEntries int64 = 1_000_000 // archive members
	// MaxFormerOwnerLen is the longest former owner recorded with a run,
	// in bytes.
	MaxFormerOwnerLen = 256
)

// DefaultExcludes are the exclude patterns of a backup when neither
// --exclude nor [archive] excludes is set.
func DefaultExcludes() []string { return []string{"*.jar", "cache/", "logs/", "*.tmp"} }
