package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"unicode"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/worldbackup/worldbackup/archiver/backup"
	"github.com/worldbackup/worldbackup/archiver/catalog"
	"github.com/worldbackup/worldbackup/archiver/config"
	"github.com/worldbackup/worldbackup/archiver/prune"
	"github.com/worldbackup/worldbackup/archiver/secretfile"
	"github.com/worldbackup/worldbackup/archiver/store"
	"github.com/worldbackup/worldbackup/jobapi"
)

// archiveStore is the archive store of backup and prune: the folder store,
// or an S3 store.
type archiveStore interface {
	backup.Store
	prune.Store
}

var (
	_ archiveStore = (*store.Local)(nil)
	_ archiveStore = (*store.S3)(nil)
	_ store.Locker = lockerFunc(nil)
)

// lockerFunc adapts the catalog's advisory archive lock to store.Locker.
type lockerFunc func(ctx context.Context, name string) (func(), error)

func (f lockerFunc) Lock(ctx context.Context, name string) (func(), error) { return f(ctx, name) }

// maxKeyFile bounds a file of a mounted Secret that readSecretFile reads:
// an S3 key or the RCON password is a few dozen bytes.
const maxKeyFile = 4096

// readSecretFile reads the file path of a mounted Secret: a regular file
// (a symbolic link to one, as Kubernetes mounts them) of at most
// maxKeyFile bytes, so that /dev/zero or a FIFO cannot make the archiver
// read forever (secretfile.Read's rule). Its errors never hold the file's
// content.
func readSecretFile(path string) ([]byte, error) {
	return secretfile.Read(path, maxKeyFile)
}

// readKeyFile reads one credential from the file path (a mounted Secret's
// key), without its trailing newline. Its errors name the file and what it
// should hold, never its content.
func readKeyFile(path, what string) (string, error) {
	b, err := readSecretFile(path)
	if err != nil {
		return "", fmt.Errorf("reading the S3 %s: %w (mount the credentials Secret there)", what, err)
	}
	v := strings.TrimRightFunc(string(b), unicode.IsSpace)
	switch {
	case v == "":
		return "", fmt.Errorf("the S3 %s file %s is empty", what, path)
	case strings.ContainsFunc(v, unicode.IsSpace):
		return "", fmt.Errorf("the S3 %s file %s holds more than one word: it must hold the %s alone", what, path, what)
	}
	return v, nil
}

// storeOverrides applies --store (its value storeURL) and the --s3-* flags
// s3 to cfg's [archive]: the flags of backup and prune.
func storeOverrides(fs *flag.FlagSet, storeURL string, s3 jobapi.S3, cfg config.Config) (config.Config, error) {
	switch {
	case flagSet(fs, jobapi.FlagStore) && flagSet(fs, jobapi.FlagArchiveRoot):
		return cfg, fmt.Errorf("give one of %s (an S3 store) and %s (a folder)", jobapi.Flag(jobapi.FlagStore), jobapi.Flag(jobapi.FlagArchiveRoot))
	case flagSet(fs, jobapi.FlagStore):
		if _, _, err := jobapi.ParseS3URL(storeURL); err != nil {
			return cfg, flagErrorf(jobapi.FlagStore, ": %w", err)
		}
		cfg.Archive.Store, cfg.Archive.LocalPath = storeURL, ""
	case s3Given(fs) && (!cfg.Archive.S3.Enabled() || flagSet(fs, jobapi.FlagArchiveRoot)):
		return cfg, fmt.Errorf("the %s* flags go with an S3 store: %s or [archive] store", jobapi.Flag("s3-"), jobapi.Flag(jobapi.FlagStore))
	}
	if err := s3Check(fs, s3); err != nil {
		return cfg, err
	}
	cfg.Archive.S3 = s3Over(fs, s3, cfg.Archive.S3)
	return cfg, nil
}

// Where an S3 store's URL comes from, which the error of a bucket that
// does not exist names (store.S3Options.URLFrom).
var (
	// storeURLFrom: a backup's or prune's store.
	storeURLFrom = fmt.Sprintf("the store URL (%s or felis.toml's [archive] store; in a Job, the component's store.url)",
		jobapi.Flag(jobapi.FlagStore))
	// archiveRefFrom: the store of an archive that restore, verify or
	// export reads.
	archiveRefFrom = fmt.Sprintf("the archive reference (%s, or the run's row; in a Job, the component's archiveRef or store.url)",
		jobapi.Flag(jobapi.FlagArchive))
)

// s3Options returns the options of the S3 store s names, with the
// credentials read from its key files; from says where s.Store was given
// (storeURLFrom, archiveRefFrom). Its errors are configuration errors.
func s3Options(s config.S3, from string) (store.S3Options, error) {
	if s.AccessKeyFile == "" || s.SecretKeyFile == "" {
		return store.S3Options{}, fmt.Errorf("an S3 store needs its credentials files: [archive] access_key_file and secret_key_file, or %s and %s",
			jobapi.Flag(jobapi.FlagS3AccessKeyFile), jobapi.Flag(jobapi.FlagS3SecretKeyFile))
	}
	ak, err := readKeyFile(s.AccessKeyFile, "access key ID")
	if err != nil {
		return store.S3Options{}, err
	}
	sk, err := readKeyFile(s.SecretKeyFile, "secret access key")
	if err != nil {
		return store.S3Options{}, err
	}
	o := store.S3Options{URL: s.Store, URLFrom: from, Endpoint: s.Endpoint, Region: s.Region, PathStyle: s.PathStyle,
		AccessKey: ak, SecretKey: sk, PartSize: int64(s.PartSizeMiB) << 20}
	if _, err := store.NewS3(o); err != nil {
		return store.S3Options{}, err
	}
	return o, nil
}

// storeSpec says which archive store a command uses: the folder Root, or
// the S3 store of S3 when it is set.
type storeSpec struct {
	Root string
	S3   *store.S3Options
}

// archiveStoreSpec returns the store of cfg for a command whose
// --archive-root is root (empty: not given): that folder when given, else
// the S3 store of [archive] store, else [archive] local_path (empty when
// unset). Its errors are configuration errors.
func archiveStoreSpec(cfg config.Config, root string) (storeSpec, error) {
	if root != "" || !cfg.Archive.S3.Enabled() {
		if root == "" {
			root = cfg.Archive.LocalPath
		}
		return storeSpec{Root: root}, nil
	}
	o, err := s3Options(cfg.Archive.S3, storeURLFrom)
	if err != nil {
		return storeSpec{}, fmt.Errorf("%s: [archive]: %w", cfg.Path(), err)
	}
	return storeSpec{S3: &o}, nil
}

// open returns the store; an S3 store takes its locks from db (nil: none).
func (s storeSpec) open(db *catalog.DB) (archiveStore, error) {
	if s.S3 == nil {
		return store.NewLocal(s.Root)
	}
	o := *s.S3
	if db != nil {
		o.Locker = lockerFunc(db.LockArchive)
	}
	return store.NewS3(o)
}

// s3HeapBase is the memory of a backup besides the S3 store's two parts:
// the folder store's whole run peaks at about 32 MiB RSS.
const s3HeapBase = 24 << 20

// limitMemory sets the Go runtime's soft memory limit of a backup into an
// S3 store to its two part buffers plus s3HeapBase (40 MiB at 8 MiB parts),
// unless GOMEMLIMIT is set. The buffers are live for the whole run, and the
// garbage collector's default pacing lets the heap grow to twice what is
// live: 60 MiB RSS on a 1 GiB world without the limit, 49 MiB with it.
func (s storeSpec) limitMemory() {
	if s.S3 == nil || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	part := s.S3.PartSize
	if part == 0 {
		part = store.DefaultPartSize
	}
	debug.SetMemoryLimit(2*part + s3HeapBase)
}

// s3Given reports whether any S3 flag (jobapi.S3) was set. The S3
// settings are flags over [archive] for backup and prune, alone for verify
// and restore, which may run without felis.toml (restore never reads it: it
// has no database).
func s3Given(fs *flag.FlagSet) bool { return jobapi.Given(fs, jobapi.S3Flags()...) }

// s3Check applies the rules of the endpoint and the region to the flags
// of f that were set; its errors name the flag and never quote the
// endpoint's userinfo.
func s3Check(fs *flag.FlagSet, f jobapi.S3) error {
	var errs []error
	if flagSet(fs, jobapi.FlagS3Endpoint) && f.Endpoint != "" {
		if err := jobapi.CheckS3Endpoint(f.Endpoint); err != nil {
			errs = append(errs, flagErrorf(jobapi.FlagS3Endpoint, ": %w", err))
		}
	}
	if flagSet(fs, jobapi.FlagS3Region) && f.Region != "" {
		if err := jobapi.CheckS3Region(f.Region); err != nil {
			errs = append(errs, flagErrorf(jobapi.FlagS3Region, ": %w", err))
		}
	}
	return errors.Join(errs...)
}

// s3Over returns base with the flags of f that were set in its place.
func s3Over(fs *flag.FlagSet, f jobapi.S3, base config.S3) config.S3 {
	if flagSet(fs, jobapi.FlagS3Endpoint) {
		base.Endpoint = f.Endpoint
	}
	if flagSet(fs, jobapi.FlagS3Region) {
		base.Region = f.Region
	}
	if flagSet(fs, jobapi.FlagS3PathStyle) {
		base.PathStyle = f.PathStyle
	}
	if flagSet(fs, jobapi.FlagS3AccessKeyFile) {
		base.AccessKeyFile = f.AccessKeyFile
	}
	if flagSet(fs, jobapi.FlagS3SecretKeyFile) {
		base.SecretKeyFile = f.SecretKeyFile
	}
	return base
}

// errNotS3Ref is returned for a ref that is not an s3:// object URL.
var errNotS3Ref = errors.New("not an s3://bucket/key URL")

// openS3Ref returns an opener of the object that ref (s3://bucket/key)
// names, with the server and credentials of s (its Store is ignored).
func openS3Ref(s config.S3, ref string) (func(ctx context.Context) (io.ReadCloser, error), error) {
	bucket, key, ok := jobapi.SplitS3Ref(ref)
	if !ok || key == "" {
		return nil, fmt.Errorf("%q: %w", ref, errNotS3Ref)
	}
	s.Store = jobapi.S3URL(bucket, "")
	o, err := s3Options(s, archiveRefFrom)
	if err != nil {
		return nil, err
	}
	st, err := store.NewS3(o)
	if err != nil {
		return nil, err
	}
	if _, ok := st.KeyOf(ref); !ok {
		return nil, fmt.Errorf("%q: %w", ref, errNotS3Ref)
	}
	return func(ctx context.Context) (io.ReadCloser, error) { return st.Open(ctx, key) }, nil
}

// s3BackupParams returns the run's parameters for an S3 store: no archive
// root to check or to keep out of the world.
func s3BackupParams(f *backupFlags, cfg config.Config) (backup.Params, string, config.Config, error) {
	world, err := filepath.Abs(f.World)
	if err != nil {
		return backup.Params{}, "", config.Config{}, flagErrorf(jobapi.FlagWorld, ": %w", err)
	}
	p := backup.Params{
		Server:           f.Server,
		RunID:            f.RunID,
		FormerOwner:      f.FormerOwner,
		Namespace:        f.Namespace,
		World:            world,
		Compression:      cfg.Archive.Compression,
		Excludes:         cfg.Archive.Excludes,
		AllowEmpty:       f.allowEmpty || cfg.Archive.AllowEmpty,
		ProgressInterval: f.progressInterval,
		Format:           cfg.Archive.Format,
		FullRead:         f.FullRead,
		FullReadEvery:    cfg.Archive.FullReadEvery,
	}
	if err := p.Validate(); err != nil {
		return backup.Params{}, "", config.Config{}, err
	}
	return p, "", cfg, nil
}

// s3Settings returns the S3 settings of an s3:// archive: the flags f over
// the [archive] settings of felis.toml at configPath, which is read only
// when the flags do not name both key files.
func s3Settings(fs *flag.FlagSet, f jobapi.S3, configPath string) (config.S3, error) {
	var base config.S3
	if !flagSet(fs, jobapi.FlagS3AccessKeyFile) || !flagSet(fs, jobapi.FlagS3SecretKeyFile) {
		cfg, err := config.Load(configPath)
		if err != nil {
			return config.S3{}, fmt.Errorf("%w (or give the S3 settings as %s* flags)", err, jobapi.Flag("s3-"))
		}
		base = cfg.Archive.S3
	}
	if err := s3Check(fs, f); err != nil {
		return config.S3{}, err
	}
	return s3Over(fs, f, base), nil
}

// secrets returns what an error of a run with s and cfg must never show:
// the database password and the S3 keys.
func (s storeSpec) secrets(cfg config.Config) []string {
	var out []string
	if c, err := pgconn.ParseConfig(cfg.Database.URL); err == nil && c.Password != "" {
		out = append(out, c.Password)
	}
	if s.S3 != nil {
		out = append(out, s.S3.AccessKey, s.S3.SecretKey)
	}
	return out
}
