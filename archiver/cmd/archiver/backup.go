package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/worldbackup/worldbackup/archiver/backup"
	"github.com/worldbackup/worldbackup/archiver/catalog"
	"github.com/worldbackup/worldbackup/archiver/config"
	"github.com/worldbackup/worldbackup/archiver/crypt"
	"github.com/worldbackup/worldbackup/archiver/prune"
	"github.com/worldbackup/worldbackup/archiver/rcon"
	"github.com/worldbackup/worldbackup/archiver/store"
	"github.com/worldbackup/worldbackup/archiver/tarstream"
	"github.com/worldbackup/worldbackup/jobapi"
)

// The real parts satisfy the interfaces the backup run consumes.
var (
	_ backup.Store    = (*store.Local)(nil)
	_ backup.Catalog  = (*catalog.DB)(nil)
	_ backup.Quiescer = rcon.Quiescer{}
)

const backupHelp = `Usage: archiver backup --server S --run-id R [flags]

Streams the world folder as tar, compressed, into
<archive root>/<server>/<run id>.tar.zst (.tar.gz, .tar) through a temp file,
or into <prefix>/<server>/<run id>.tar.zst of an S3 store ([archive] store or
--store s3://bucket/prefix: a multipart upload completed only when whole),
fsync and rename, then records the run in world_backups. A run whose row
exists already writes nothing and exits 0; a retry of the same run ID removes
the temp files of a killed earlier attempt. If the row cannot be inserted, the
archive is removed. A one-line JSON summary is written to the termination log.

The archive root must exist (a missing one is an unmounted volume: exit 2);
<root>/<server> is created. A folder of the world that is the archive root
(the same device and inode: a bind mount) is skipped with a warning; a world
that is the archive root is refused (exit 2). A world without files (empty,
or everything excluded) fails (exit 1) unless --allow-empty.

With --encryption-key-file (or [archive] encryption_key_file), an age identity
file, the run is encrypted on the client: a tar archive is an age file,
<run id>.tar.zst.age (its row's checksum the ciphertext's); a chunked run's
blobs and manifest are sealed with the server's data key, made on its first
encrypted run and wrapped by the identity in _chunked/keys/<server>.key.

With --rcon (or [rcon] in felis.toml) the game server is quiesced while the
world is read: save-off and save-all flush before, save-on after the archive
is written and before the row, on every exit path.
`

// defaultTerminationLog is where Kubernetes reads a container's
// termination message.
const defaultTerminationLog = "/dev/termination-log"

// backupFlags are the flags of backup: the contract's request (what the
// backup Job passes) and the local flags of a run by hand.
type backupFlags struct {
	jobapi.Backup
	noMigrate, allowEmpty bool
	terminationLog        string
	progressInterval      time.Duration
}

// backupLocalFlags are the flags of backup that are not the Job's.
func backupLocalFlags() []string {
	return []string{"no-migrate", "allow-empty", "termination-log", "progress-interval"}
}

// newBackupFlags returns the flag set of backup and the flags it fills.
func newBackupFlags(stderr io.Writer) (*flag.FlagSet, *backupFlags) {
	f := &backupFlags{}
	fs := newFlagSet(jobapi.KindBackup, backupHelp, stderr)
	f.Bind(fs)
	fs.BoolVar(&f.noMigrate, "no-migrate", false, "do not apply the catalog's migrations first")
	fs.BoolVar(&f.allowEmpty, "allow-empty", false, "record a world without files (empty, or everything excluded); overrides [archive] allow_empty")
	fs.StringVar(&f.terminationLog, "termination-log", defaultTerminationLog,
		"file for the one-line JSON summary; skipped when its folder is missing (the default path: when the file is missing)")
	fs.DurationVar(&f.progressInterval, "progress-interval", backup.DefaultProgressInterval, "time between progress log lines")
	return fs, f
}

func cmdBackup(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs, f := newBackupFlags(stderr)
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return code
	}
	f.Parsed(fs)
	tlog := terminationLog{path: f.terminationLog, explicit: flagSet(fs, "termination-log")}
	log := newLogger(f.LogFormat, stderr)

	p, root, cfg, err := backupSetup(fs, f)
	var spec storeSpec
	if err == nil {
		warnOverrides(log, fs, cfg)
		if !jobapi.TakesCompression(p.Format) && cfg.IsSet("archive.compression") {
			log.Warn("a key of felis.toml has no effect on a chunked run", "key", "archive.compression", "config", cfg.Path())
		}
		spec, err = archiveStoreSpec(cfg, root)
	}
	if err != nil {
		fmt.Fprintf(stderr, "archiver backup: %s\n", err)
		tlog.write(log, jobapi.BackupResult{BackupRun: backup.Summary{Status: backup.StatusFailed, Server: f.Server, RunID: f.RunID, Error: err.Error()}})
		return exitUsage
	}

	quiescer, err := rconSetup(fs, f, cfg)
	var pruneOpts *prune.Options
	if err == nil && f.Retention != nil {
		var o prune.Options
		o, err = retentionOptions(fs, *f.Retention, p.Server, p.Namespace)
		pruneOpts = &o
	}
	if err != nil {
		fmt.Fprintf(stderr, "archiver backup: %s\n", err)
		tlog.write(log, jobapi.BackupResult{BackupRun: backup.Summary{Status: backup.StatusFailed, Server: f.Server, RunID: f.RunID, Error: err.Error()}})
		return exitUsage
	}

	if err == nil {
		keyFile, from := cfg.Archive.EncryptionKeyFile, cfg.Path()+": [archive] encryption_key_file"
		if flagSet(fs, jobapi.FlagEncryptionKeyFile) {
			keyFile, from = f.EncryptionKeyFile, jobapi.Flag(jobapi.FlagEncryptionKeyFile)
		}
		if p.Keys, err = loadKeys(fs, keyFile); err != nil {
			err = fmt.Errorf("%s: %w", from, err)
			fmt.Fprintf(stderr, "archiver backup: %s\n", err)
			tlog.write(log, jobapi.BackupResult{BackupRun: backup.Summary{Status: backup.StatusFailed, Server: f.Server, RunID: f.RunID, Error: err.Error()}})
			return exitUsage
		}
		if p.Keys != nil && p.Keys.Unportable() != "" {
			log.Warn("the key file reads here, but age's own command refuses it: clean it, so that a restore "+
				"without the archiver (age -d -i) works", "key_file", p.Keys.Path(), "problem", p.Keys.Unportable())
		}
	}

	spec.limitMemory()
	hooks := backupHooks{quiesce: quiescer, prune: pruneOpts, slots: f.Concurrency, group: f.ConcurrencyGroup}
	s, err := runBackup(ctx, log, cfg, spec, p, !f.noMigrate, hooks)
	tlog.write(log, s)
	if err != nil {
		log.Error("backup failed", "server", p.Server, "run_id", p.RunID, "error", err)
		if errors.Is(err, store.ErrNoRoot) || errors.Is(err, store.ErrDenied) || errors.Is(err, tarstream.ErrSelfContaining) {
			return exitUsage // no retry can help: the volumes are wrong
		}
		if keyProblem(err) || errors.Is(err, crypt.ErrCorrupt) {
			return exitUsage // the key file does not open the server's data key, or that object is damaged
		}
		if errors.Is(err, backup.ErrRunIDTaken) {
			return exitUsage // no retry can help: choose another run ID
		}
		return exitFailed
	}
	if s.Prune != nil && s.Prune.Error != "" {
		log.Error("the backup is recorded, but the prune after it failed", "server", p.Server, "error", s.Prune.Error)
		return exitFailed
	}
	return exitOK
}

// backupSetup checks the flags and the config file and returns the run's
// parameters and archive root; its errors are usage errors.
func backupSetup(fs *flag.FlagSet, f *backupFlags) (backup.Params, string, config.Config, error) {
	var errs []error
	if f.Server == "" {
		errs = append(errs, flagErrorf(jobapi.FlagServer, "is required"))
	} else if err := jobapi.CheckServer(f.Server); err != nil {
		errs = append(errs, flagErrorf(jobapi.FlagServer, ": %w", err))
	}
	if f.RunID == "" {
		errs = append(errs, flagErrorf(jobapi.FlagRunID, "is required"))
	} else if err := jobapi.CheckRunID(f.RunID); err != nil {
		errs = append(errs, flagErrorf(jobapi.FlagRunID, ": %w", err))
	}
	if err := jobapi.CheckNamespace(f.Namespace); err != nil {
		errs = append(errs, flagErrorf(jobapi.FlagNamespace, ": %w", err))
	}
	if f.progressInterval <= 0 {
		errs = append(errs, flagErrorf("progress-interval", "must be positive"))
	}
	if err := jobapi.CheckConcurrency(f.Concurrency, f.ConcurrencyGroup); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return backup.Params{}, "", config.Config{}, errors.Join(errs...)
	}

	cfg, err := config.Load(f.Config)
	if err == nil {
		cfg, err = storeOverrides(fs, f.Store, f.S3, cfg)
	}
	if err != nil {
		return backup.Params{}, "", config.Config{}, err
	}
	if flagSet(fs, jobapi.FlagCompression) {
		c, err := tarstream.ParseCompression(f.Compression)
		if err != nil {
			return backup.Params{}, "", config.Config{}, flagErrorf(jobapi.FlagCompression, ": %w", err)
		}
		cfg.Archive.Compression = c
	}
	if flagSet(fs, jobapi.FlagFormat) {
		if err := jobapi.CheckFormat(f.Format); err != nil {
			return backup.Params{}, "", config.Config{}, flagErrorf(jobapi.FlagFormat, ": %w", err)
		}
		cfg.Archive.Format = f.Format
	}
	if !jobapi.TakesCompression(cfg.Archive.Format) {
		switch {
		case flagSet(fs, jobapi.FlagCompression):
			return backup.Params{}, "", config.Config{}, flagErrorf(jobapi.FlagCompression, "%q: %s: leave it out, or add %s tar",
				f.Compression, jobapi.ChunkedCompresses, jobapi.Flag(jobapi.FlagFormat))
		case cfg.IsSet("archive.compression") && !flagSet(fs, jobapi.FlagFormat):
			why := "format = \"chunked\""
			if !cfg.IsSet("archive.format") {
				why = "no format, so chunked, the default"
			}
			return backup.Params{}, "", config.Config{}, fmt.Errorf("%s: [archive] compression = %q with %s: %s: remove compression, or set format = \"tar\" in [archive]",
				cfg.Path(), cfg.Archive.Compression, why, jobapi.ChunkedCompresses)
		}
	}
	if flagSet(fs, jobapi.FlagExclude) {
		cfg.Archive.Excludes = f.Excludes
		if err := tarstream.ValidateExcludes(cfg.Archive.Excludes); err != nil {
			return backup.Params{}, "", config.Config{}, flagErrorf(jobapi.FlagExclude, ": %w", err)
		}
	}
	root := cfg.Archive.LocalPath
	if f.ArchiveRoot != "" {
		root = f.ArchiveRoot
	}
	if f.ArchiveRoot == "" && cfg.Archive.S3.Enabled() {
		return s3BackupParams(f, cfg)
	}
	switch {
	case root == "":
		return backup.Params{}, "", config.Config{}, fmt.Errorf("no archive root: pass %s or set [archive] local_path in %s", jobapi.Flag(jobapi.FlagArchiveRoot), cfg.Path())
	case !filepath.IsAbs(root):
		return backup.Params{}, "", config.Config{}, fmt.Errorf("archive root %q is not an absolute path", root)
	}
	world, err := filepath.Abs(f.World)
	if err != nil {
		return backup.Params{}, "", config.Config{}, flagErrorf(jobapi.FlagWorld, ": %w", err)
	}
	if within(root, world) {
		return backup.Params{}, "", config.Config{}, fmt.Errorf("archive root %q is inside the world %q: the archive would archive itself", root, world)
	}
	if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		return backup.Params{}, "", config.Config{}, fmt.Errorf("%w: %q is not an existing folder (is the backup volume mounted?)", store.ErrNoRoot, root)
	}
	if sameFolder(root, world) {
		return backup.Params{}, "", config.Config{}, fmt.Errorf("archive root %q is the world %q (one folder, or one volume mounted twice): the archive would archive itself", root, world)
	}
	root = filepath.Clean(root)
	p := backup.Params{
		Server:           f.Server,
		RunID:            f.RunID,
		FormerOwner:      f.FormerOwner,
		Namespace:        f.Namespace,
		World:            world,
		Compression:      cfg.Archive.Compression,
		Excludes:         cfg.Archive.Excludes,
		Avoid:            []string{root, filepath.Join(root, f.Server)},
		AllowEmpty:       f.allowEmpty || cfg.Archive.AllowEmpty,
		ProgressInterval: f.progressInterval,
		Format:           cfg.Archive.Format,
		FullRead:         f.FullRead,
		FullReadEvery:    cfg.Archive.FullReadEvery,
	}
	if err := p.Validate(); err != nil {
		return backup.Params{}, "", config.Config{}, err
	}
	return p, root, cfg, nil
}

// sameFolder reports whether a and b are one folder (device and inode),
// whatever their paths.
func sameFolder(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}

// backupHooks are what a backup does around its run: quiesce the game
// server (nil: none), wait for one of slots slots of group in the catalog
// (0: start at once; catalog.Slots), prune after it (nil: no prune).
type backupHooks struct {
	quiesce backup.Quiescer
	slots   int
	group   string
	prune   *prune.Options
}

// runBackup connects to the catalog and performs the run, then, with
// pruneOpts, the prune (also when the run was already recorded). A failed
// prune does not fail the run: it is reported in the summary's Prune.
func runBackup(ctx context.Context, log hclog.Logger, cfg config.Config, spec storeSpec, p backup.Params, migrate bool,
	hooks backupHooks) (jobapi.BackupResult, error) {
	start := time.Now()
	fail := func(err error) (jobapi.BackupResult, error) {
		return jobapi.BackupResult{BackupRun: backup.Summary{
			Status: backup.StatusFailed, Server: p.Server, RunID: p.RunID, Compression: string(p.Compression),
			DurationSeconds: time.Since(start).Seconds(), Error: err.Error(),
		}}, err
	}
	db, err := catalog.Open(ctx, cfg.Database.URL, log)
	if err != nil {
		return fail(err)
	}
	defer db.Close()
	// From here on the catalog is reachable: a failed attempt is recorded.
	js, err := backupWithCatalog(ctx, log, db, spec, p, migrate, hooks, fail)
	if err != nil && js.Status == backup.StatusFailed {
		recordFailure(ctx, log, db, p, start, err, spec.secrets(cfg)...)
	}
	return js, err
}

// recordFailureTimeout bounds the recording of a failed attempt, which
// runs even when the run's context was canceled (a SIGTERM).
const recordFailureTimeout = 10 * time.Second

// recordFailure records the failed attempt of p in the catalog, its reason
// cut and with secrets masked. A failure to record it is logged, never the
// run's error.
func recordFailure(ctx context.Context, log hclog.Logger, db *catalog.DB, p backup.Params, start time.Time, cause error, secrets ...string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordFailureTimeout)
	defer cancel()
	f := catalog.Failure{RunID: p.RunID, Server: p.Server, Namespace: p.Namespace, StartedAt: start, FinishedAt: time.Now(),
		Reason: catalog.Reason(errors.New(jobapi.MaskIdentitiesString(cause.Error())), secrets...)}
	if err := db.RecordFailure(ctx, f); err != nil {
		log.Warn("the failed attempt could not be recorded in the catalog", "error", err)
		return
	}
	log.Info("recorded the failed attempt in the catalog", "server", p.Server, "run_id", p.RunID)
}

// backupWithCatalog is runBackup once the catalog is open.
func backupWithCatalog(ctx context.Context, log hclog.Logger, db *catalog.DB, spec storeSpec, p backup.Params, migrate bool,
	hooks backupHooks, fail func(error) (jobapi.BackupResult, error)) (jobapi.BackupResult, error) {
	if migrate {
		applied, err := db.Migrate(ctx)
		if err != nil {
			return fail(fmt.Errorf("migrating the catalog: %w", err))
		}
		if len(applied) > 0 {
			log.Info("applied catalog migrations", "migrations", applied)
		}
	}
	st, err := spec.open(db)
	if err != nil {
		return fail(err)
	}
	r := backup.New(st, db, log)
	if hooks.quiesce != nil {
		r = r.WithQuiescer(backup.Serialized(hooks.quiesce, func(ctx context.Context) (func(), error) {
			return db.LockServer(ctx, p.Server)
		}))
	}
	if hooks.slots > 0 {
		r = r.WithTurn(db.Slots(hooks.group, hooks.slots))
	}
	s, err := r.Run(ctx, p)
	js := jobapi.BackupResult{BackupRun: s}
	if err != nil || hooks.prune == nil {
		return js, err
	}
	rep, err := prune.Prune(ctx, db, st, *hooks.prune, log)
	ps := summaryOf(rep, err)
	js.Prune = &ps
	return js, nil
}

// rconSetup merges the --rcon flags over [rcon] and reads the password
// file. It returns nil when no game server is to be quiesced; its errors
// are usage errors, and name the flag or the felis.toml key at fault.
func rconSetup(fs *flag.FlagSet, f *backupFlags, cfg config.Config) (backup.Quiescer, error) {
	rc := cfg.Rcon
	addrName := cfg.Path() + ": [rcon] address (or " + jobapi.Flag(jobapi.FlagRcon) + ")"
	pwName := cfg.Path() + ": [rcon] password_file (or " + jobapi.Flag(jobapi.FlagRconPasswordFile) + ")"
	if flagSet(fs, jobapi.FlagRcon) {
		rc.Address, addrName = f.Rcon.Address, jobapi.Flag(jobapi.FlagRcon)
	}
	if flagSet(fs, jobapi.FlagRconPasswordFile) {
		rc.PasswordFile, pwName = f.Rcon.PasswordFile, jobapi.Flag(jobapi.FlagRconPasswordFile)
	}
	if flagSet(fs, jobapi.FlagRconRequired) {
		rc.Required = new(!f.Rcon.Optional)
	}
	if !rc.Enabled() {
		if rc.PasswordFile != "" {
			return nil, flagErrorf(jobapi.FlagRconPasswordFile, "needs %s (or [rcon] address): the game server's host:port", jobapi.Flag(jobapi.FlagRcon))
		}
		return nil, nil
	}
	if err := jobapi.CheckRconAddress(rc.Address); err != nil {
		return nil, fmt.Errorf("%s: %w", addrName, err)
	}
	if rc.PasswordFile == "" {
		return nil, flagErrorf(jobapi.FlagRcon, "needs %s (or [rcon] password_file): the file of the mounted Secret that holds the RCON password", jobapi.Flag(jobapi.FlagRconPasswordFile))
	}
	pw, err := readRconPassword(rc.PasswordFile)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pwName, err)
	}
	rcfg := rcon.Config{Addr: rc.Address, Password: pw, Required: rc.IsRequired()}
	if err := rcfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", pwName, err)
	}
	return rcon.Quiescer{Config: rcfg}, nil
}

// readRconPassword reads the RCON password from path (a file of a mounted
// Secret, bounded as every Secret file is), without its trailing line
// break. Its errors never hold the file's content.
func readRconPassword(path string) (string, error) {
	b, err := readSecretFile(path)
	if err != nil {
		return "", fmt.Errorf("reading the rcon password file: %w", err)
	}
	pw := strings.TrimRight(string(b), "\r\n")
	if pw == "" {
		return "", fmt.Errorf("rcon password file %s is empty: it must hold the server's rcon.password", path)
	}
	return pw, nil
}

// within reports whether path is dir or below it, following the symbolic
// links of the parts that exist.
func within(path, dir string) bool {
	path, dir = resolve(path), resolve(dir)
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// resolve returns p with the symbolic links of its longest existing prefix
// resolved.
func resolve(p string) string {
	p = filepath.Clean(p)
	var rest []string
	for {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(append([]string{r}, rest...)...)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return filepath.Join(append([]string{p}, rest...)...)
		}
		rest = append([]string{filepath.Base(p)}, rest...)
		p = parent
	}
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool { return jobapi.Given(fs, name) }

// flagErrorf returns an error about the flag name: the flag as given on
// the command line (jobapi.Flag) and the message, which starts with ':' or
// a word.
func flagErrorf(name, format string, args ...any) error {
	sep := " "
	if strings.HasPrefix(format, ":") {
		sep = ""
	}
	return fmt.Errorf(jobapi.Flag(name)+sep+format, args...)
}

// terminationLog is where the run's summary goes.
type terminationLog struct {
	path     string
	explicit bool // given with --termination-log
}

// maxTerminationMessage is Kubernetes' limit on a termination message.
const maxTerminationMessage = 4096

// write writes s as one JSON line, shortening its errors (the backup's and
// the prune's) to fit.
func (t terminationLog) write(log hclog.Logger, s jobapi.BackupResult) {
	errs := []*string{&s.Error}
	if s.Prune != nil {
		p := *s.Prune // a copy: the caller's summary stays whole
		s.Prune = &p
		errs = append(errs, &p.Error)
	}
	t.writeBounded(log, &s, errs...)
}

// writeBounded writes v as one JSON line of at most maxTerminationMessage
// bytes, shortening the strings errs point to (fields of v), longest first,
// as needed. Kubernetes truncates a longer termination message, which would
// leave it unparsable.
func (t terminationLog) writeBounded(log hclog.Logger, v any, errs ...*string) {
	if t.path == "" {
		return
	}
	for _, e := range errs { // before they are cut, which could leave part of a key
		*e = jobapi.MaskIdentitiesString(*e)
	}
	b, err := json.Marshal(v)
	// Escaping may make a cut string longer than expected: a few rounds.
	for range 16 {
		excess := len(b) + 1 - maxTerminationMessage
		if err != nil || excess <= 0 {
			break
		}
		var p *string
		for _, e := range errs {
			if p == nil || len(*e) > len(*p) {
				p = e
			}
		}
		if p == nil || *p == "" {
			break
		}
		*p = (*p)[:max(len(*p)-excess-3, 0)] + "..."
		b, err = json.Marshal(v)
	}
	if err != nil {
		log.Error("encoding the summary", "error", err)
		return
	}
	t.writeLine(log, b)
}

// writeLine writes b and a newline. It writes only when the path's folder
// exists, and, for the default path, only when the file exists (the kubelet
// creates it), so a run outside a pod never litters /dev.
func (t terminationLog) writeLine(log hclog.Logger, b []byte) {
	if t.path == "" {
		return
	}
	if _, err := os.Stat(filepath.Dir(t.path)); err != nil {
		log.Debug("no termination log folder; summary not written", "path", t.path)
		return
	}
	flags := os.O_WRONLY | os.O_TRUNC
	if t.explicit {
		flags |= os.O_CREATE
	}
	f, err := os.OpenFile(t.path, flags, 0o644)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) || t.explicit {
			log.Warn("cannot open the termination log; summary not written", "path", t.path, "error", err)
		}
		return
	}
	defer f.Close()
	// Whoever reads the pod reads this: no key pasted into a value shows.
	if _, err := f.Write(append(jobapi.MaskIdentities(b), '\n')); err != nil {
		log.Warn("writing the termination log", "path", t.path, "error", err)
	}
}
