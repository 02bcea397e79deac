package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/worldbackup/worldbackup/archiver/backup"
	"github.com/worldbackup/worldbackup/archiver/catalog"
	"github.com/worldbackup/worldbackup/archiver/chunked"
	"github.com/worldbackup/worldbackup/archiver/crypt"
	"github.com/worldbackup/worldbackup/jobapi"
)

// loadKeys reads the key file path: nil, nil when path is empty and
// --encryption-key-file was not given on fs (no encryption). The flag
// given empty (a variable that expanded to nothing) is an error: it would
// turn encryption off without a word. Its errors wrap crypt.ErrKeyFile
// (exit 2) and never hold the file's content.
func loadKeys(fs *flag.FlagSet, path string) (*crypt.Keys, error) {
	if path == "" && flagSet(fs, jobapi.FlagEncryptionKeyFile) {
		return nil, fmt.Errorf("%w: given empty: name the file holding the age identity, or leave the flag out to store the run in the clear", crypt.ErrKeyFile)
	}
	if path == "" {
		return nil, nil
	}
	return crypt.LoadKeyFile(path)
}

// decryptOf returns keys' Decrypt, or nil without keys.
func decryptOf(keys *crypt.Keys) func(io.Reader) (io.Reader, error) {
	if keys == nil {
		return nil
	}
	return keys.Decrypt
}

// keyProblem reports whether err is about the key (exit 2): an unusable
// key file, a key that opens neither the archive nor the server's data
// key, an encrypted archive read without one, a server whose data key is
// gone. The world and the store are untouched; no retry can help.
func keyProblem(err error) bool {
	for _, e := range []error{crypt.ErrKeyFile, crypt.ErrWrongKey, crypt.ErrNoKey, crypt.ErrNoDataKey, crypt.ErrUnvouchedKey,
		chunked.ErrNeedKey, chunked.ErrWrongKey} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// openChunked opens the chunked run at key for reading its stream
// (chunked.OpenStreamSealed: the file records are decoded as the stream is
// walked), checked against sum: with keys, a sealed run is opened with its
// server's data key (read from the store's key object). The key object's
// trouble is the run's only when the run is sealed: a run in the clear
// opens whatever became of it. A key object that does not decrypt or is
// another server's is damage (chunked.ErrCorrupt, exit 3), one that is
// gone a key problem (exit 2).
func openChunked(ctx context.Context, st chunked.Store, key, sum string, keys *crypt.Keys) (*chunked.Manifest, error) {
	var sl *chunked.Sealer
	var keyErr error
	var legacy bool
	if keys != nil {
		server, _, ok := jobapi.SplitManifestKey(key)
		if !ok {
			return nil, fmt.Errorf("%q is not a chunked run's manifest key", key)
		}
		dk, l, err := keys.OpenDataKey(ctx, st, server)
		if err != nil {
			keyErr = err
		} else {
			sl = chunked.NewSealer(dk)
			clear(dk[:])
			legacy = l
		}
	}
	m, err := chunked.OpenStreamSealed(ctx, st, key, sum, sl)
	if legacy && errors.Is(err, chunked.ErrWrongKey) {
		// A format-1 object says nothing of who wrote it: one that opens
		// with the identity yet holds another key than the run's was put
		// there by someone who knows only the recipient, or is an older
		// object made again after a shred. Either way the run is refused,
		// as a planted format-2 object's is.
		return nil, fmt.Errorf("%w: the server's data key object is in format 1, which does not say who wrote it, and holds "+
			"another key than this run was sealed with (planted, or made again after the run's key was removed): %v", chunked.ErrCorrupt, err)
	}
	if !errors.Is(err, chunked.ErrNeedKey) || keyErr == nil {
		return m, err
	}
	switch {
	case errors.Is(keyErr, crypt.ErrNoDataKey):
		// The key file was given: the advice to pass one is not for here.
		return nil, fmt.Errorf("the chunked run is encrypted and %w: removed (crypto-shredded) or lost, the run cannot be read", keyErr)
	case errors.Is(keyErr, crypt.ErrCorrupt):
		return nil, fmt.Errorf("%w: the server's data key object: %w", chunked.ErrCorrupt, keyErr)
	}
	return nil, keyErr
}

const rekeyHelp = `Usage: archiver rekey --server S --encryption-key-file OLD --new-encryption-key-file NEW
                     [--archive-root DIR | --store s3://bucket/prefix [--s3-* flags]] [--config FILE]

Rotates the key of a server's encrypted chunked runs by hand: its data key
object (<root>/_chunked/keys/<server>.key) is opened with an identity of OLD and
rewrapped to the first identity of NEW, atomically, then read back with it.
No pack or manifest is touched. Until it is replaced, OLD opens it; after,
NEW does; one NEW opens already is left as it is. A backup does the same by
itself when its key file's first identity is new and a later line holds the
old one (the Secret rotated). With OLD and NEW the same file, it rewrites a
key object an earlier archiver wrote (format 1, which does not say who wrote
it) in format 2, which does, once the catalog ([database] url of --config)
shows that the server's newest chunked run was sealed with its key, as a
backup checks (exit 2 otherwise: it may have been planted). A format-1
object is never rewrapped to another identity (exit 2): authenticate it
first. Drop OLD from the Secret once no tar archive
encrypted to it is kept: a tar archive is an age file encrypted to the
identity itself.
`

func cmdRekey(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	format := jobapi.LogAuto
	fs := newFlagSet("rekey", rekeyHelp, stderr)
	server := fs.String(jobapi.FlagServer, "", "the server whose data key is rewrapped (required)")
	configPath := fs.String(jobapi.FlagConfig, jobapi.DefaultConfigPath, jobapi.ConfigFileName)
	root := fs.String(jobapi.FlagArchiveRoot, "", "archive root folder; overrides [archive] local_path")
	storeURL := fs.String(jobapi.FlagStore, "", "s3://bucket/prefix: the S3 store (settings: the --s3-* flags over [archive])")
	var oldFile, newFile string
	jobapi.BindEncryptionKeyFile(fs, &oldFile, "OLD, one of whose identities opens the server's data key object now (required)")
	fs.StringVar(&newFile, jobapi.FlagNewEncryptionKeyFile, "", "file holding the new age identity: the data key is rewrapped to its first identity (required)")
	fs.Var(&format, jobapi.FlagLogFormat, "json, text or auto (json when stderr is not a terminal)")
	var s3f jobapi.S3
	s3f.Bind(fs)
	if code := parseFlags(fs, args, stdout); code >= 0 {
		return code
	}
	switch {
	case jobapi.CheckServer(*server) != nil:
		return usageError(stderr, "rekey", "%s", flagErrorf(jobapi.FlagServer, "%q: a server name is required", *server))
	case oldFile == "" || newFile == "":
		return usageError(stderr, "rekey", "%s and %s are both required", jobapi.Flag(jobapi.FlagEncryptionKeyFile), jobapi.Flag(jobapi.FlagNewEncryptionKeyFile))
	}
	old, err := loadKeys(fs, oldFile)
	if err != nil {
		return usageError(stderr, "rekey", "%s", flagErrorf(jobapi.FlagEncryptionKeyFile, ": %s", err))
	}
	next, err := loadKeys(fs, newFile)
	if err != nil {
		return usageError(stderr, "rekey", "%s", flagErrorf(jobapi.FlagNewEncryptionKeyFile, ": %s", err))
	}
	cfg, spec, err := loadArchiveConfig(fs, *configPath, *root, *storeURL, s3f)
	if err != nil {
		return usageError(stderr, "rekey", "%s", err)
	}
	log := newLogger(format, stderr)
	var db *catalog.DB
	if spec.S3 != nil { // the S3 store locks through the catalog
		if db, err = catalog.Open(ctx, cfg.Database.URL, log); err != nil {
			log.Error("cannot open the catalog", "error", err)
			return exitFailed
		}
		defer db.Close()
	}
	st, err := spec.open(db)
	if err != nil {
		log.Error("cannot open the archive store", "error", err)
		return exitUsage
	}
	vouch := func(ctx context.Context, dk crypt.DataKey) error {
		if db == nil {
			if cfg.Database.URL == "" {
				return fmt.Errorf("%w: checking it against the server's recorded runs needs the catalog: give --config "+
					"with its [database] url", crypt.ErrUnvouchedKey)
			}
			opened, err := catalog.Open(ctx, cfg.Database.URL, log)
			if err != nil {
				return fmt.Errorf("opening the catalog to check the key object against the server's runs: %w", err)
			}
			defer opened.Close()
			return backup.Vouch(ctx, opened, st, *server, "", dk)
		}
		return backup.Vouch(ctx, db, st, *server, "", dk)
	}
	wrote, err := crypt.Rewrap(ctx, st, *server, old, next, vouch)
	if err != nil {
		log.Error("rekey failed", "server", *server, "error", err)
		if keyProblem(err) {
			return exitUsage
		}
		if errors.Is(err, crypt.ErrCorrupt) {
			return exitRefused // the key object does not decrypt, or is another server's
		}
		return exitFailed
	}
	key, _ := jobapi.DataKeyKey(*server)
	if !wrote {
		log.Info("the data key object opens with the new key file's first identity already: nothing to do",
			"server", *server, "key_object", st.Ref(key), "new_key_file", newFile)
		fmt.Fprintf(stdout, "%s is wrapped to %s already: nothing to do\n", st.Ref(key), newFile)
		return exitOK
	}
	log.Info("data key rewrapped", "server", *server, "key_object", st.Ref(key), "new_key_file", newFile)
	fmt.Fprintf(stdout, "rewrapped %s to %s\n", st.Ref(key), newFile)
	return exitOK
}
