package backup

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sync/errgroup"

	"github.com/worldbackup/worldbackup/archiver/catalog"
	"github.com/worldbackup/worldbackup/archiver/chunked"
	"github.com/worldbackup/worldbackup/archiver/crypt"
	"github.com/worldbackup/worldbackup/archiver/store"
	"github.com/worldbackup/worldbackup/archiver/tarstream"
	"github.com/worldbackup/worldbackup/jobapi"
)

// written is what a run wrote to the store, before its row is inserted.
type written struct {
	ref   string
	res   tarstream.Result // Size and SHA256 are what the row records
	added int64            // bytes the run added to the store
	packs []string         // a chunked run's packs, by ID
	// newPacks are the packs the run wrote (registered in the catalog), by
	// ID: removed with the run, or kept when its row may exist.
	newPacks []string
	// remove discards what the run wrote.
	remove func(ctx context.Context) error
}

// writeTar writes the run as one tar archive under key.
func (r *Runner) writeTar(ctx context.Context, log hclog.Logger, p Params, key string, prog *tarstream.Progress) (written, error) {
	ref := r.store.Ref(key)
	log.Info("backup started", "world", p.World, "archive", ref, "compression", p.Compression, "encrypted", p.Keys != nil)
	var seal func(io.Writer) (io.WriteCloser, error)
	if p.Keys != nil {
		seal = p.Keys.Encrypt
	}
	var res tarstream.Result
	size, err := r.store.Put(ctx, key, func(w io.Writer) error {
		var err error
		res, err = tarstream.Write(ctx, w, p.World, tarstream.Options{
			Compression: p.Compression,
			Excludes:    p.Excludes,
			Log:         log.Named("tar"),
			Progress:    prog,
			Avoid:       p.Avoid,
			Seal:        seal,
		})
		if err == nil {
			err = checkEmpty(p, res)
		}
		return err
	})
	if err != nil {
		return written{}, fmt.Errorf("writing archive %s: %w", ref, err)
	}
	w := written{ref: ref, res: res, added: size, remove: func(ctx context.Context) error { return r.store.Remove(ctx, key) }}
	if size != res.Size {
		return written{}, r.discard(ctx, log, w, fmt.Errorf("archive %s holds %d bytes, but %d were streamed", ref, size, res.Size))
	}
	return w, nil
}

// writeChunked writes the run in the chunked format: the blobs its
// server's previous chunked run lacks, then its manifest under key.
func (r *Runner) writeChunked(ctx context.Context, log hclog.Logger, p Params, key string, prog *tarstream.Progress) (written, error) {
	ref := r.store.Ref(key)
	var sl *chunked.Sealer
	var ev crypt.KeyEvent // what opening the server's data key did, when sl is set
	var dk crypt.DataKey  // sl's key, until vouch is done with it
	defer clear(dk[:])
	if p.Keys != nil {
		// The server's data key, made on its first encrypted run and
		// wrapped by the key file's identity beside the manifests.
		// A key object only an older identity of the file opens is
		// rewrapped to the first: the Secret was rotated.
		var err error
		dk, ev, err = p.Keys.DataKey(ctx, r.store, p.Server, true)
		if err != nil {
			return written{}, fmt.Errorf("the server's data key: %w", err)
		}
		switch ev {
		case crypt.KeyCreated:
			log.Info("made the server's data key", "key_file", p.Keys.Path())
		case crypt.KeyRewrapped:
			log.Info("rewrapped the server's data key to the key file's first identity", "key_file", p.Keys.Path())
		}
		sl = chunked.NewSealer(dk)
	}
	prev, err := r.previous(ctx, log, p.Server, p.Namespace, sl, ev)
	if err != nil {
		return written{}, err
	}
	if sl != nil && ev == crypt.KeyUnauthenticated {
		// Its key object is in format 1, which does not say who wrote it.
		if err := r.vouch(ctx, log, p, prev, sl, dk); err != nil {
			return written{}, err
		}
	}
	clear(dk[:])
	previousRun := "" // none: every file is read and stored
	if prev != nil {
		previousRun = prev.RunID
	}
	log.Info("backup started", "world", p.World, "archive", ref, "format", jobapi.FormatChunked, "encrypted", sl != nil,
		"previous_run", previousRun)
	res, err := chunked.Write(ctx, r.store, p.World, chunked.Options{
		Server:        p.Server,
		RunID:         p.RunID,
		Previous:      prev,
		FullRead:      p.FullRead,
		FullReadEvery: p.FullReadEvery,
		Tar: tarstream.Options{
			Excludes: p.Excludes,
			Log:      log.Named("tar"),
			Progress: prog,
			Avoid:    p.Avoid,
		},
		Register: func(ctx context.Context, id chunked.ID) error {
			return r.cat.RegisterPack(ctx, id.String(), store.PacksRef(r.store))
		},
		Log:    log.Named("chunked"),
		Now:    r.now,
		Sealer: sl,
	})
	if err != nil {
		return written{}, fmt.Errorf("writing chunked run %s: %w", ref, err)
	}
	w := written{ref: ref, res: res.Result, added: res.AddedBytes, remove: func(ctx context.Context) error {
		errs := []error{r.store.Remove(ctx, key)}
		for _, id := range res.NewPacks {
			k, err := jobapi.PackKey(id.String())
			if err == nil {
				err = r.store.Remove(ctx, k)
			}
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	}}
	for _, id := range res.Packs {
		w.packs = append(w.packs, id.String())
	}
	for _, id := range res.NewPacks {
		w.newPacks = append(w.newPacks, id.String())
	}
	if err := checkEmpty(p, res.Result); err != nil {
		return written{}, r.discard(ctx, log, w, err)
	}
	log.Info("chunked run written", "manifest", ref, "added_bytes", res.AddedBytes, "new_blobs", res.NewBlobs,
		"reused_files", res.ReusedFiles, "full_read", res.FullRead, "packs", len(res.Packs), "new_packs", len(res.NewPacks))
	return w, nil
}

// previous returns the server's newest chunked run that namespace sees
// (catalog.InNamespace), checked against its row, or nil when it has none.
// A previous run that cannot be read is a warning: this run then reads and
// stores everything. So is one sealed
// with another data key than sl's, which ev (what opening sl's key did)
// explains: the key object was removed (crypto-shredded) and this run made
// a new key; or an earlier run did, and a run still going with the old key
// finished after it; or the object was put back from elsewhere. A key
// object in format 2 carries a MAC only a holder of the key file's
// identity can make, who could read the runs anyway; one in format 1 does
// not, and vouch refuses it when prev is nil.
func (r *Runner) previous(ctx context.Context, log hclog.Logger, server, namespace string, sl *chunked.Sealer, ev crypt.KeyEvent) (*chunked.Manifest, error) {
	// A run of another store (a catalog shared by a folder store and an S3
	// one, backed up to in turn) is passed over: its manifest is not here,
	// and building on nothing would store the whole world again each time.
	rec, err := LatestChunkedIn(ctx, r.cat, r.store, server, namespace)
	if errors.Is(err, catalog.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("looking up the previous chunked run: %w", err)
	}
	key, err := jobapi.ManifestKey(rec.Server, rec.RunID)
	if err != nil {
		return nil, err
	}
	m, err := chunked.OpenSealed(ctx, r.store, key, rec.SHA256, sl)
	switch {
	case errors.Is(err, chunked.ErrWrongKey) && ev == crypt.KeyCreated:
		// The key object was gone: removed (crypto-shredded) or lost.
		log.Error("the server's data key object was gone, and this run made a new key: "+
			"its earlier encrypted chunked runs cannot be read with it; every file is read and stored again",
			"previous_run", rec.RunID, "error", err)
		return nil, nil
	case errors.Is(err, chunked.ErrWrongKey) && ev == crypt.KeyUnauthenticated:
		return nil, nil // vouch refuses the key object
	case errors.Is(err, chunked.ErrWrongKey):
		log.Warn("the server's previous chunked run was sealed with another data key than its key object holds: "+
			"the object was made again with the key file's identity (after it was removed, while a run with the old "+
			"key was still going) or put back from elsewhere; that run is readable only with its own key object, "+
			"and this one reads and stores every file again",
			"previous_run", rec.RunID, "key_object", r.store.Ref(dataKeyKey(server)))
		return nil, nil
	case errors.Is(err, chunked.ErrNeedKey):
		warnClear(log, rec, "this run stores every file")
		return nil, nil
	}
	if err != nil {
		log.Warn("the previous chunked run cannot be read; every file is read and stored again",
			"previous_run", rec.RunID, "error", err)
		return nil, nil
	}
	switch gone, err := lostPack(ctx, r.store, m.Packs); {
	case err != nil:
		log.Warn("checking that the store holds the previous chunked run's packs failed; every file is read and stored again",
			"previous_run", rec.RunID, "error", err)
		return nil, nil
	case gone != "":
		// Building on it would reference the lost pack again in every run
		// from now on, each recorded as a backup that cannot be restored.
		log.Error("a pack of the previous chunked run is gone from the store (a bucket lifecycle rule, a deletion by hand, "+
			"a volume rolled back): that run cannot be restored in full, so this run builds on nothing and reads and stores "+
			"every file again; verify the older runs (archiver verify --run-id)", "previous_run", rec.RunID, "pack", r.store.Ref(gone))
		return nil, nil
	}
	return m, nil
}

// lostPack returns the key of a pack of packs (a manifest's pack table)
// that st does not hold, "" when it holds every one: asked for each, a few
// at a time (a head request each on S3; a manifest names one pack per 32
// MiB of the world, so a few hundred for a large one).
func lostPack(ctx context.Context, st Store, packs []chunked.ID) (string, error) {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	var mu sync.Mutex
	var gone string
	for _, id := range packs {
		key, err := jobapi.PackKey(id.String())
		if err != nil {
			return "", err
		}
		g.Go(func() error {
			held, err := st.Holds(ctx, key)
			if err == nil && !held {
				mu.Lock()
				gone = cmp.Or(gone, key)
				mu.Unlock()
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return "", err
	}
	return gone, nil
}

// vouch rewrites the server's data key object, found in format 1 (no MAC:
// anyone who can write to the store could have wrapped a key of their own
// to the server's recipient), in format 2, when its previous run prev,
// which its catalog row vouches for, was sealed with the same key;
// otherwise it refuses to seal the run. dk is sl's key: the object is
// rewritten only if it still holds that key, the one vouched for.
func (r *Runner) vouch(ctx context.Context, log hclog.Logger, p Params, prev *chunked.Manifest, sl *chunked.Sealer, dk crypt.DataKey) error {
	obj := r.store.Ref(dataKeyKey(p.Server))
	if !sealedWith(prev, sl) {
		return fmt.Errorf("refusing to seal the run: %w", crypt.Unvouched(obj, notSealedWith))
	}
	if err := p.Keys.Authenticate(ctx, r.store, p.Server, dk); err != nil {
		return fmt.Errorf("rewriting the server's data key object in format 2: %w", err)
	}
	log.Info("the server's data key object is now authenticated (format 2)", "key_object", obj, "vouched_by", prev.RunID)
	return nil
}

// notSealedWith is what the catalog shows of a key object no run vouches
// for (crypt.Unvouched).
const notSealedWith = "the server's newest recorded chunked run was not sealed with its key"

// sealedWith reports whether m, a server's newest chunked run, was sealed
// with sl's key: the run, which its row vouches for, vouches for that key.
func sealedWith(m *chunked.Manifest, sl *chunked.Sealer) bool {
	return m != nil && bytes.Equal(m.KeyID, sl.KeyID())
}

// ChunkedRuns finds a server's newest chunked run (catalog.DB).
type ChunkedRuns interface {
	LatestChunked(ctx context.Context, server, namespace string, in func(catalog.Record) bool) (catalog.Record, error)
}

var _ ChunkedRuns = (*catalog.DB)(nil)

// LatestChunkedIn returns the newest chunked run of server that namespace
// sees (catalog.InNamespace; "" every namespace) whose manifest is in st,
// or an error wrapping catalog.ErrNotFound. A run of another store (a
// catalog shared by a folder store and an S3 one, backed up to in turn) is
// passed over: its manifest is not here.
func LatestChunkedIn(ctx context.Context, cat ChunkedRuns, st interface{ Ref(key string) string }, server, namespace string) (catalog.Record, error) {
	return cat.LatestChunked(ctx, server, namespace, func(rec catalog.Record) bool {
		key, err := jobapi.ManifestKey(rec.Server, rec.RunID)
		return err == nil && st.Ref(key) == rec.ArchiveRef
	})
}

// Vouch checks dk, the key a format-1 data key object of server in st
// holds, as a backup does before it seals with it (rekey's check): the
// server's newest chunked run in st that namespace sees must have been
// sealed with it. Its refusals wrap crypt.ErrUnvouchedKey, a newest run
// whose manifest is missing or damaged included (then nothing vouches);
// its other errors are the catalog's or the store's.
func Vouch(ctx context.Context, cat ChunkedRuns, st Store, server, namespace string, dk crypt.DataKey) error {
	obj := st.Ref(dataKeyKey(server))
	rec, err := LatestChunkedIn(ctx, cat, st, server, namespace)
	if errors.Is(err, catalog.ErrNotFound) {
		return crypt.Unvouched(obj, "the catalog records no chunked run of the server in this store")
	}
	if err != nil {
		return fmt.Errorf("looking up the server's newest chunked run: %w", err)
	}
	key, err := jobapi.ManifestKey(rec.Server, rec.RunID)
	if err != nil {
		return err
	}
	sl := chunked.NewSealer(dk)
	m, err := chunked.OpenSealed(ctx, st, key, rec.SHA256, sl)
	switch {
	case errors.Is(err, chunked.ErrWrongKey) || err == nil && !sealedWith(m, sl):
		return crypt.Unvouched(obj, fmt.Sprintf("the server's newest recorded chunked run, %s, was not sealed with its key", rec.RunID))
	case errors.Is(err, chunked.ErrNeedKey), errors.Is(err, chunked.ErrCorrupt), errors.Is(err, chunked.ErrMissing):
		return crypt.Unvouched(obj, fmt.Sprintf("the server's newest recorded chunked run, %s, cannot be read to check it (%v)", rec.RunID, err))
	case err != nil:
		return fmt.Errorf("reading the server's newest chunked run %s: %w", rec.RunID, err)
	}
	return nil
}

// checkEmpty refuses a world without files unless p allows it.
func checkEmpty(p Params, res tarstream.Result) error {
	if res.Files == 0 && !p.AllowEmpty {
		return fmt.Errorf("%w: %s holds no file%s; restored with --replace, this archive would empty the world: "+
			"check the world folder and the excludes, or pass --allow-empty to record it anyway",
			ErrEmptyWorld, p.World, excludedNote(res.Excluded))
	}
	return nil
}

// dataKeyKey is the store key of server's data key object, for messages;
// server was checked before.
func dataKeyKey(server string) string {
	key, _ := jobapi.DataKeyKey(server)
	return key
}
