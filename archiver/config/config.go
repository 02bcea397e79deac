// Package config reads felis.toml, the archiver's configuration file:
//
//	[database]
//	url = "postgres://user:pass@host:5432/felis"
//
//	[archive]
//	local_path = "/backups"      # optional when --archive-root is given
//	format = "chunked"           # chunked (the default) | tar
//	compression = "zstd"         # format tar only: zstd | gzip | none
//	excludes = ["*.jar", "cache/", "logs/", "*.tmp"]
//	allow_empty = false          # record a world without files
//
//	# or, instead of local_path, an S3-compatible object store:
//	store = "s3://bucket/prefix"
//	endpoint = "https://minio.example:9000"   # empty: AWS
//	region = "us-east-1"
//	path_style = true
//	access_key_file = "/etc/felis-s3/access-key"   # files of a mounted Secret
//	secret_key_file = "/etc/felis-s3/secret-key"
//	part_size_mib = 8            # 5-64; memory is about 2 parts, the largest archive 10000 parts
//
//	[rcon]                       # optional: quiesce the game server while it is read
//	address = "survival:25575"
//	password_file = "/etc/felis-rcon/rcon-password"
//	required = true              # false: an unreachable server is a warning
//
// Unknown keys are errors. Every error names the file and the key; the
// database URL, which holds a password, never appears in an error or in the
// formatted Config.
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/worldbackup/worldbackup/archiver/secretfile"
	"github.com/worldbackup/worldbackup/archiver/tarstream"
	"github.com/worldbackup/worldbackup/jobapi"
)

// DefaultPath is where the backup Job mounts felis.toml.
const DefaultPath = jobapi.DefaultConfigPath

// Config is the content of felis.toml.
type Config struct {
	Database Database `toml:"database"`
	Archive  Archive  `toml:"archive"`
	Rcon     Rcon     `toml:"rcon"`
	Notify   Notify   `toml:"notify"`

	path string          // the file it was read from, for errors
	set  map[string]bool // the keys the file sets, e.g. "archive.compression"
}

// Database is the [database] table.
type Database struct {
	// URL is the catalog's connection string (postgres:// URL or key=value
	// form). Secret: never log it.
	URL string `toml:"url"`
}

// String hides the URL, so printing a Config never reveals the password.
func (d Database) String() string {
	if d.URL == "" {
		return "{URL:}"
	}
	return "{URL:<redacted>}"
}

// GoString hides the URL from %#v.
func (d Database) GoString() string { return "config.Database" + d.String() }

// Archive is the [archive] table.
type Archive struct {
	// LocalPath is the absolute folder archives are written below.
	LocalPath string `toml:"local_path"`
	// Compression of the tar format's archives; default zstd. The
	// archiver refuses it with the chunked format.
	Compression tarstream.Compression `toml:"compression"`
	// Excludes are glob patterns of world entries to leave out; default
	// tarstream.DefaultExcludes. An explicit empty list excludes nothing.
	Excludes []string `toml:"excludes"`
	// AllowEmpty records a world without files (empty, or everything
	// excluded); by default such a backup fails.
	AllowEmpty bool `toml:"allow_empty"`
	// Format is "chunked" (deduplicated blobs in packs, one manifest per
	// run, the default) or "tar" (one compressed tar archive per run).
	Format string `toml:"format"`
	// FullReadEvery, for the chunked format, has every Nth run of a
	// server read every file, even those unchanged since its previous
	// run; 0 never does.
	FullReadEvery int `toml:"full_read_every"`
	// EncryptionKeyFile is the file (of a mounted Secret) holding the age
	// identity archives are encrypted to; empty: no encryption.
	EncryptionKeyFile string `toml:"encryption_key_file"`
	S3
}

// S3 is the S3 store's part of the [archive] table. The credentials are
// never in this file: they are read from AccessKeyFile and SecretKeyFile,
// files of a mounted Secret.
type S3 struct {
	// Store is "s3://bucket" or "s3://bucket/prefix"; empty: the local
	// folder store at LocalPath.
	Store         string `toml:"store"`
	Endpoint      string `toml:"endpoint"`
	Region        string `toml:"region"`
	PathStyle     bool   `toml:"path_style"`
	AccessKeyFile string `toml:"access_key_file"`
	SecretKeyFile string `toml:"secret_key_file"`
	// PartSizeMiB is the multipart upload's part size; 0: 8 MiB.
	PartSizeMiB int `toml:"part_size_mib"`
}

// Enabled reports whether archives go to an S3 store.
func (s S3) Enabled() bool { return s.Store != "" }

// Rcon is the [rcon] table: how to reach the game server's RCON listener
// to turn its autosave off while the world is read. The password is never
// in this file: it is read from PasswordFile, a mounted Secret.
type Rcon struct {
	Address      string `toml:"address"`
	PasswordFile string `toml:"password_file"`
	// Required: an unreachable server fails the backup (default true).
	Required *bool `toml:"required"`
}

// Notify is the [notify] table: the webhook a run posts its outcome to.
// The URL is never in this file: it is read from URLFile, a mounted
// Secret's key (--notify-url-file overrides it).
type Notify struct {
	URLFile string `toml:"url_file"`
	// On is "failure" (the default) or "always".
	On string `toml:"on"`
}

// Enabled reports whether a game server is to be quiesced.
func (r Rcon) Enabled() bool { return r.Address != "" }

// IsRequired reports whether an unreachable server fails the backup.
func (r Rcon) IsRequired() bool { return r.Required == nil || *r.Required }

// maxFile bounds the read of felis.toml, a mounted Secret of a few KiB:
// 1 MiB, so that a wrong file is refused rather than read whole.
const maxFile = 1 << 20

// Load reads, completes with defaults and validates the file at path.
func Load(path string) (Config, error) {
	raw, err := secretfile.Read(path, maxFile)
	if err != nil {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return Config{}, fmt.Errorf("config file %s does not exist: mount the config Secret there or pass --config", path)
		case errors.Is(err, secretfile.ErrTooLarge):
			return Config{}, fmt.Errorf("config file %s is larger than 1 MiB (felis.toml holds a few KiB): is it the right file?", path)
		case errors.Is(err, secretfile.ErrNotRegular):
			return Config{}, fmt.Errorf("config file %w", err)
		}
		return Config{}, fmt.Errorf("reading config file: %w", err)
	}
	c, err := Parse(path, string(raw))
	if err != nil {
		return Config{}, err
	}
	c = c.withDefaults()
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// Parse decodes the TOML text raw read from path (named in errors), without
// defaults or validation.
func Parse(path, raw string) (Config, error) {
	c := Config{path: path}
	md, err := toml.Decode(raw, &c)
	if err != nil {
		return Config{}, decodeError(path, raw, err)
	}
	if undecoded := md.Undecoded(); len(undecoded) > 0 {
		keys := make([]string, len(undecoded))
		for i, k := range undecoded {
			keys[i] = k.String()
		}
		return Config{}, fmt.Errorf("%s: unknown key %s (known keys: database.url, archive.local_path, archive.compression, archive.excludes, archive.allow_empty, archive.store, archive.endpoint, archive.region, archive.path_style, archive.access_key_file, archive.secret_key_file, archive.part_size_mib, rcon.address, rcon.password_file, rcon.required)",
			path, strings.Join(quoteAll(keys), ", "))
	}
	c.set = map[string]bool{}
	for _, k := range md.Keys() {
		c.set[k.String()] = true
	}
	return c, nil
}

// Path returns the file the Config was read from.
func (c Config) Path() string { return c.path }

// IsSet reports whether the file sets key ("archive.compression"), as
// opposed to its default.
func (c Config) IsSet(key string) bool { return c.set[key] }

// withDefaults fills in the optional settings.
func (c Config) withDefaults() Config {
	if c.Archive.Compression == "" {
		c.Archive.Compression = tarstream.Zstd
	}
	if c.Archive.Excludes == nil {
		c.Archive.Excludes = slices.Clone(tarstream.DefaultExcludes)
	}
	if c.Archive.Format == "" {
		c.Archive.Format = jobapi.DefaultFormat
	}
	return c
}

// Validate checks every setting; errors name the file and the key.
func (c Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s: %s", c.pathOrDefault(), key, fmt.Sprintf(format, args...)))
	}
	if err := checkURL(c.Database.URL); err != nil {
		bad("[database] url", "%s", err)
	}
	if p := c.Archive.LocalPath; p != "" && !filepath.IsAbs(p) {
		bad("[archive] local_path", "%q is not an absolute path", p)
	}
	for _, e := range c.Archive.S3.problems(c.Archive.LocalPath) {
		bad(e.key, "%s", e.msg)
	}
	if _, err := tarstream.ParseCompression(string(c.Archive.Compression)); err != nil {
		bad("[archive] compression", "%s", err)
	}
	if err := tarstream.ValidateExcludes(c.Archive.Excludes); err != nil {
		bad("[archive] excludes", "%s", err)
	}
	if f := c.Archive.Format; f != "" {
		if err := jobapi.CheckFormat(f); err != nil {
			bad("[archive] format", "%s", err)
		}
	}
	if n := c.Archive.FullReadEvery; n < 0 {
		bad("[archive] full_read_every", "%d is negative: give the number of runs between full reads, or 0 for never", n)
	}
	if p := c.Archive.EncryptionKeyFile; p != "" && !filepath.IsAbs(p) {
		bad("[archive] encryption_key_file", "%s", notAbsSecretFile)
	}
	if r := c.Rcon; r.Enabled() || r.PasswordFile != "" || r.Required != nil {
		if err := jobapi.CheckRconAddress(r.Address); err != nil {
			bad("[rcon] address", "%s", err)
		}
		switch {
		case r.PasswordFile == "":
			bad("[rcon] password_file", "missing: the file of the mounted Secret that holds the RCON password")
		case !filepath.IsAbs(r.PasswordFile):
			bad("[rcon] password_file", "%s", notAbsSecretFile)
		}
	}
	return errors.Join(errs...)
}

// notAbsSecretFile is the problem of a setting naming a Secret's file
// (a key, a password) that is not an absolute path. The value is not
// printed: a user may have typed the secret itself there.
const notAbsSecretFile = "is not an absolute path: name the file of the mounted Secret " +
	"(the value is not printed, in case it is the secret itself)"

func (c Config) pathOrDefault() string {
	if c.path == "" {
		return "felis.toml"
	}
	return c.path
}

// checkURL checks the shape of a connection string; its errors never quote
// it.
func checkURL(s string) error {
	switch {
	case strings.TrimSpace(s) == "":
		return errors.New(`missing: set it to the catalog's connection string, e.g. "postgres://user:pass@host:5432/felis"`)
	case strings.Contains(s, "://"):
		u, err := url.Parse(s)
		if err != nil {
			return errors.New("is not a valid URL (check its quoting and special characters; percent-encode them in the password)")
		}
		if u.Scheme != "postgres" && u.Scheme != "postgresql" {
			return errors.New("must start with postgres:// or postgresql://")
		}
		if u.Host == "" && !strings.Contains(u.RawQuery, "host=") {
			return errors.New("has no host")
		}
	case strings.Contains(s, "="):
	default:
		return errors.New(`is neither a postgres:// URL nor a "key=value ..." connection string`)
	}
	// Parsed as the catalog will parse it, so that a bad parameter is a
	// configuration error (exit 2), not a failed run retried in vain.
	if _, err := pgconn.ParseConfig(s); err != nil {
		return errors.New(describeParseError(err, s))
	}
	return nil
}

// describeParseError says what pgconn found wrong with the connection
// string s, without quoting s or its password.
func describeParseError(err error, s string) string {
	const generic = "is not a valid PostgreSQL connection string"
	var pce *pgconn.ParseConfigError
	if !errors.As(err, &pce) {
		return generic
	}
	bare := *pce
	bare.ConnString = "" // pgconn's own redaction is best effort
	msg := strings.TrimPrefix(bare.Error(), "cannot parse ``: ")
	if strings.HasPrefix(msg, "failed to parse as") {
		// The inner error of a malformed string may quote any part of it.
		return generic + " (check its quoting and special characters; percent-encode them in the password)"
	}
	for _, secret := range secrets(s) {
		if len(secret) >= 3 && strings.Contains(msg, secret) {
			return generic + ": a parameter is invalid (not shown: the message would quote the password)"
		}
	}
	return generic + ": " + msg
}

// secrets returns the passwords written in the connection string s.
func secrets(s string) []string {
	var out []string
	if u, err := url.Parse(s); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok {
			out = append(out, p)
		}
		if p := u.Query().Get("password"); p != "" {
			out = append(out, p)
		}
	}
	for _, f := range strings.Fields(s) {
		if v, ok := strings.CutPrefix(f, "password="); ok {
			out = append(out, strings.Trim(v, `'`))
		}
	}
	return out
}

// decodeError turns a TOML error into one naming the file, line and key,
// without the secret URL.
func decodeError(path, raw string, err error) error {
	var pe toml.ParseError
	if !errors.As(err, &pe) {
		return fmt.Errorf("%s: %s", path, redact(err.Error(), raw))
	}
	msg := pe.Message
	key := pe.LastKey
	switch {
	case strings.Contains(msg, "has already been defined"):
		// The parser's own message names the key, not its value.
		msg += " A key may be set once: it is defined twice, keep one."
	case strings.HasSuffix(key, "url") || strings.Contains(lineOf(raw, pe.Position.Line), "url"):
		msg = "invalid value (not shown: it may hold a password); it must be a quoted string"
	}
	where := fmt.Sprintf("line %d", pe.Position.Line)
	if key != "" {
		where += fmt.Sprintf(" (key %s)", key)
	}
	return fmt.Errorf("%s: %s: %s", path, where, redact(msg, raw))
}

func lineOf(raw string, n int) string {
	lines := strings.Split(raw, "\n")
	if n < 1 || n > len(lines) {
		return ""
	}
	return lines[n-1]
}

// urlLine finds the value text of url = ... assignments.
var urlLine = regexp.MustCompile(`(?m)^\s*url\s*=\s*(.+?)\s*$`)

// redact removes every url value found in raw from msg.
func redact(msg, raw string) string {
	for _, m := range urlLine.FindAllStringSubmatch(raw, -1) {
		v := strings.Trim(m[1], `"'`)
		if len(v) >= 4 {
			msg = strings.ReplaceAll(msg, v, "<redacted>")
		}
	}
	return msg
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}
