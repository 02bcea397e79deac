package backup

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/worldbackup/worldbackup/archiver/catalog"
	"github.com/worldbackup/worldbackup/archiver/chunked"
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
// learns it from the previous chunked run it reads: previous). The newest
// run decides: a tar archive by its name (jobapi.EncryptedExt), a chunked
// run by its manifest, read only when this run is a tar one.
func (r *Runner) checkClear(ctx context.Context, log hclog.Logger, p Params) error {
	if p.Keys != nil {
		return nil
	}
	newest, err := r.cat.NewestRuns(ctx, p.Server, p.Namespace, 1)
	if err != nil {
		return fmt.Errorf("looking up the server's previous run: %w", err)
	}
	if len(newest) == 0 {
		return nil
	}
	prev := newest[0]
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
