package backup

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/worldbackup/worldbackup/archiver/catalog"
	"github.com/worldbackup/worldbackup/archiver/chunked"
	"github.com/worldbackup/worldbackup/archiver/crypt"
	"github.com/worldbackup/worldbackup/jobapi"
)

// warnClear is the warning of a run in the clear whose server's previous
// run is encrypted: encryption was switched off, on purpose or not (the key
// file's setting or the component's encryption input dropped).
func warnClear(log hclog.Logger, prev catalog.Record, what string) {
	log.Warn("the server's previous run is encrypted and this one is not: "+what+" in the clear; "+
		jobapi.NeedKeyAdvice()+" to keep the server's runs encrypted",
		"previous_run", prev.RunID)
}

// checkClear warns when a run of p without a key follows an encrypted run
// of its server, which a tar run cannot tell otherwise (a chunked run
// learns it from the previous chunked run it reads: previous), and when a
// run with a key follows a tar archive encrypted to another one
// (warnKeyChanged). The newest run decides: a tar archive by its name
// (jobapi.EncryptedExt), a chunked run by its manifest, read only when
// this run is a tar one.
func (r *Runner) checkClear(ctx context.Context, log hclog.Logger, p Params) error {
	newest, err := r.cat.NewestRuns(ctx, p.Server, p.Namespace, 1)
	if err != nil {
		return fmt.Errorf("looking up the server's previous run: %w", err)
	}
	if len(newest) == 0 {
		return nil
	}
	prev := newest[0]
	if p.Keys != nil {
		r.warnKeyChanged(ctx, log, p, prev)
		return nil
	}
	if prev.Format != jobapi.FormatChunked {
		if strings.HasSuffix(prev.ArchiveRef, jobapi.EncryptedExt) {
			warnClear(log, prev, "this run is stored")
		}
		return nil
	}
	if p.Format == jobapi.FormatChunked {
		return nil // previous() reads that run
	}
	key, err := jobapi.ManifestKey(prev.Server, prev.RunID)
	if err != nil {
		return nil // a row no run of this archiver wrote: nothing to tell
	}
	if _, err := chunked.OpenSealed(ctx, r.store, key, prev.SHA256, nil); errors.Is(err, chunked.ErrNeedKey) {
		warnClear(log, prev, "this run is stored")
	}
	return nil
}

// keyCheckTimeout bounds warnKeyChanged's read of the previous archive's
// header.
const keyCheckTimeout = 30 * time.Second

// warnKeyChanged warns when prev, the server's newest run, is a tar archive
// in this store encrypted to none of the identities of p's key file: the
// file was replaced where it should have been rotated (the new identity
// first, the old one on a later line), so that archive, and the older ones
// encrypted to the same key, can no longer be read with the Secret (a
// chunked run's key object tells the same by itself: DataKey). Only the
// archive's header is read. A previous archive that cannot be read is the
// business of verify and restore, not of this run: nothing is said.
func (r *Runner) warnKeyChanged(ctx context.Context, log hclog.Logger, p Params, prev catalog.Record) {
	if prev.Format == jobapi.FormatChunked || !strings.HasSuffix(prev.ArchiveRef, jobapi.EncryptedExt) {
		return
	}
	key, err := jobapi.SealedRunKey(prev.Server, prev.RunID, prev.Format, prev.Compression, true)
	if err != nil || r.store.Ref(key) != prev.ArchiveRef {
		return // a row no run of this archiver wrote, or another store's run
	}
	// Advice, not the run's business: a store slow to answer does not hold
	// the run up for long.
	ctx, cancel := context.WithTimeout(ctx, keyCheckTimeout)
	defer cancel()
	rc, err := r.store.Open(ctx, key)
	if err != nil {
		return
	}
	defer rc.Close()
	if _, err := p.Keys.Decrypt(rc); errors.Is(err, crypt.ErrWrongKey) {
		log.Warn("the server's previous run is encrypted to none of the key file's identities: the key was "+
			"replaced, not rotated, and that run (and any older one encrypted to the same key) needs the old identity "+
			"to be read; keep it on a later line of the key file, after the new one, while such runs are kept",
			"previous_run", prev.RunID, "key_file", p.Keys.Path())
	}
}
