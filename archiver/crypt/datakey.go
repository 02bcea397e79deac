package crypt

import (
	"bytes"
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/worldbackup/worldbackup/archiver/regfile"
	"github.com/worldbackup/worldbackup/jobapi"
)

// Opener reads a server's data key object (restore, verify, export: a
// store read without locks).
type Opener interface {
	Open(ctx context.Context, key string) (io.ReadCloser, error)
}

// Store holds a server's data key object (store.Local, store.S3,
// store.Mem): written atomically, read whole, and locked while it is
// created or rewrapped so two runs of a server agree on one key. A Put
// that fails may remove what it was writing (S3 takes back an object it
// cannot confirm), so the key object is never replaced without a spare.
type Store interface {
	Put(ctx context.Context, key string, write func(io.Writer) error) (size int64, err error)
	Open(ctx context.Context, key string) (io.ReadCloser, error)
	Lock(ctx context.Context, key string) (unlock func(), err error)
	Remove(ctx context.Context, key string) error
	CleanTemps(ctx context.Context, key string) (removed []string, err error)
}

// DataKeySize is the size of a data key.
const DataKeySize = 32

// DataKey is a server's data key: the key its chunked runs are sealed
// with (see chunked.NewSealer).
type DataKey [DataKeySize]byte

// String hides the key.
func (DataKey) String() string { return "DataKey(…)" }

// GoString hides the key.
func (DataKey) GoString() string { return "DataKey(…)" }

// maxKeyObject bounds a data key object read from the store: an age
// header with a few stanzas and 40 bytes of payload.
const maxKeyObject = 16 << 10

// The plaintext of a data key object, format 2: keyObjectMagic, the
// server name (a byte of length, then it), the key, then an HMAC-SHA256 of
// all that under the MAC key of the identity it is wrapped to
// (objectMACKey). age does not say who encrypted a file and a server's
// recipient is public, so without the MAC anyone who can write to the
// store could wrap a key of their own to it and read every later run; the
// MAC needs the identity's secret. Format 1 (keyObjectV1: no MAC), which
// earlier archivers wrote, is still read; a backup seals with its key only
// once a recorded run vouches for it, and then rewrites it in format 2.
const (
	keyObjectMagic = "WBDK\x02"
	keyObjectV1    = "WBDK\x01"
	infoObjectMAC  = "worldbackup data key object mac"
)

// objectMACKey derives the key that authenticates the data key objects
// wrapped to identity (its AGE-SECRET-KEY-1... line).
func objectMACKey(identity string) []byte {
	k, err := hkdf.Key(sha256.New, []byte(identity), nil, infoObjectMAC, sha256.Size)
	if err != nil {
		panic(err) // only for lengths hkdf refuses
	}
	return k
}

func objectMAC(key, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(body)
	return m.Sum(nil)
}

// splitKeyObject checks that pt is server's data key object, format 2 or
// 1, and returns what its MAC covers (ending with the key) and the MAC
// (nil in format 1).
func splitKeyObject(pt []byte, server string) (body, tag []byte, legacy, ok bool) {
	head := len(keyObjectMagic) + 1 + len(server)
	switch {
	case len(pt) == head+DataKeySize+sha256.Size && string(pt[:len(keyObjectMagic)]) == keyObjectMagic:
		body, tag = pt[:head+DataKeySize], pt[head+DataKeySize:]
	case len(pt) == head+DataKeySize && string(pt[:len(keyObjectV1)]) == keyObjectV1:
		body, legacy = pt, true
	default:
		return nil, nil, false, false
	}
	if int(body[len(keyObjectMagic)]) != len(server) || string(body[len(keyObjectMagic)+1:head]) != server {
		return nil, nil, false, false
	}
	return body, tag, legacy, true
}

// authentic reports whether tag is body's MAC under one of k's identities.
func (k *Keys) authentic(body, tag []byte) bool {
	for _, mk := range k.macKeys {
		if hmac.Equal(objectMAC(mk, body), tag) {
			return true
		}
	}
	return false
}

// ErrNoDataKey is wrapped by the error of a server that has no data key
// object: it never wrote an encrypted chunked run, or its key was removed
// (crypto-shredded).
var ErrNoDataKey = errors.New("the server has no data key")

// ErrUnvouchedKey is wrapped by the error of a backup that refuses to seal
// with a format-1 data key object (which does not say who wrote it) that
// no recorded run of the server was sealed with, and of a rekey that
// refuses to rewrap one to another identity: it may have been planted.
var ErrUnvouchedKey = errors.New("the data key object is in format 1 and no recorded run vouches for its key")

// Unvouched returns the error, wrapping ErrUnvouchedKey, of the format-1
// data key object obj whose key no recorded run vouches for; why says what
// the catalog shows. It says what to do: the one wording of the backup's
// refusal and rekey's.
func Unvouched(obj, why string) error {
	return fmt.Errorf("%w: %s was written by an earlier archiver, whose key objects do not say who wrote them, and %s, "+
		"so it may have been planted: if the object the runs were sealed with was replaced, put it back from a copy "+
		"(a .key.unopened-* object beside it, a backup of the store); if no kept run needs it, remove it to have a new "+
		"key made", ErrUnvouchedKey, obj, why)
}

// OpenDataKey returns server's data key from its key object in st, opened
// with any of k's identities, and whether the object is in format 1
// (legacy: nothing says who wrote it, so a key it holds that a run was not
// sealed with may have been planted). Errors: ErrWrongKey (no identity
// opens it), ErrCorrupt, ErrNoDataKey (the server has none).
func (k *Keys) OpenDataKey(ctx context.Context, st Opener, server string) (dk DataKey, legacy bool, err error) {
	names, err := keyNames(server)
	if err != nil {
		return DataKey{}, false, err
	}
	dk, o, err := k.readDataKey(ctx, st, names)
	return dk, o.legacy, err
}

// opened says how readObject opened a data key object.
type opened struct {
	first  bool // k's first identity opened it (the one k writes for)
	legacy bool // format 1: nothing says who wrote it
	// unopened: the key object is there but did not open (another
	// identity's, or damaged), and the data key came from its spare.
	unopened bool
}

// objectNames are the store keys of a server's data key object and of its
// spare (jobapi.DataKeyKey, jobapi.DataKeySpareKey), and the server.
type objectNames struct{ key, spare, server string }

func keyNames(server string) (objectNames, error) {
	key, err := jobapi.DataKeyKey(server)
	if err != nil {
		return objectNames{}, err
	}
	spare, err := jobapi.DataKeySpareKey(server)
	if err != nil {
		return objectNames{}, err
	}
	return objectNames{key, spare, server}, nil
}

// KeyEvent says what DataKey did besides opening the server's data key.
type KeyEvent int

const (
	// KeyOpened: the key object was opened with the key file's first
	// identity, as it is.
	KeyOpened KeyEvent = iota
	// KeyCreated: the server had none; a new data key was made and stored.
	KeyCreated
	// KeyRewrapped: a later identity of the key file opened the object,
	// which is now rewrapped to the first (the Secret was rotated).
	KeyRewrapped
	// KeyUnauthenticated: the object is in format 1, which does not say
	// who wrote it. The caller seals with the key only if a recorded run
	// was sealed with it, and then rewrites the object in format 2
	// (Authenticate).
	KeyUnauthenticated
)

// DataKey is OpenDataKey for a run that writes. With create, a server
// without one gets a new random key, wrapped to k's first identity and
// stored (under the store's lock of the object, so concurrent first runs
// share one key). An object that only a later identity of k opens is
// rewrapped to the first, atomically and read back (Rewrap): rotating the
// Secret (the new identity first, the old on a later line) rotates the
// envelope at the next backup, and no pack is touched. The data key itself
// is never replaced, and the key returned is the one checked: a rewrap
// that finds another in the object under the lock fails (ErrCorrupt). A
// format-1 object is returned as it is (KeyUnauthenticated): the caller
// checks it first. Errors: ErrWrongKey
// (no identity opens it), ErrCorrupt (damaged, or its MAC is not one of
// k's identities': replaced), ErrNoDataKey (none, and not create).
func (k *Keys) DataKey(ctx context.Context, st Store, server string, create bool) (DataKey, KeyEvent, error) {
	names, err := keyNames(server)
	if err != nil {
		return DataKey{}, 0, err
	}
	dk, o, err := k.readDataKey(ctx, st, names)
	switch {
	case err == nil && o.legacy:
		return dk, KeyUnauthenticated, nil
	case err == nil && o.first:
		return dk, KeyOpened, nil
	case err == nil:
		// dk is the key checked (its object's MAC is one of k's): the
		// rewrap goes on only if the object still holds it under the lock,
		// and the run seals with it, never with what a later read finds.
		wrote, err := rewrap(ctx, st, names, k, k, &dk, nil)
		if err != nil {
			clear(dk[:])
			return DataKey{}, 0, err
		}
		ev := KeyRewrapped
		if !wrote {
			ev = KeyOpened // a concurrent run rewrapped it first
		}
		return dk, ev, nil
	case !create || !errors.Is(err, ErrNoDataKey):
		return DataKey{}, 0, err
	}
	unlock, err := lockKey(ctx, st, names)
	if err != nil {
		return DataKey{}, 0, err
	}
	defer unlock()
	dk, o, err = k.readDataKey(ctx, st, names) // another run may have made it meanwhile
	switch {
	case err == nil && o.legacy:
		return dk, KeyUnauthenticated, nil
	case !errors.Is(err, ErrNoDataKey):
		return dk, KeyOpened, err
	}
	if _, err := rand.Read(dk[:]); err != nil {
		return DataKey{}, 0, err
	}
	// A new key seals nothing yet: a failed write that the store takes
	// back loses nothing, and the next run makes another.
	if err := k.writeDataKey(ctx, st, names.key, names.server, dk); err != nil {
		return DataKey{}, 0, err
	}
	return dk, KeyCreated, nil
}

// lockKey takes the store's lock of the server's data key object and
// removes the temp files that earlier writes of it or of its spare, killed
// before they committed, left in the store (each holds a wrapping of the
// key, which crypto-shredding must not miss). Nothing else writes them
// while the lock is held.
func lockKey(ctx context.Context, st Store, names objectNames) (unlock func(), err error) {
	unlock, err = st.Lock(ctx, names.key)
	if err != nil {
		return nil, fmt.Errorf("locking the data key object %s: %w", names.key, err)
	}
	for _, key := range []string{names.key, names.spare} {
		if _, err := st.CleanTemps(ctx, key); err != nil {
			unlock()
			return nil, fmt.Errorf("removing the temp files of earlier writes of %s: %w", key, err)
		}
	}
	return unlock, nil
}

// Rewrap rewraps server's data key object from the identities of old to
// the first identity of next: the rotation of the key file. No pack or
// manifest is touched; until the object is replaced old opens it, and
// after it next does (see rewrap); wrote is false when next's first
// identity opened it already (nothing to do). An object in format 1 (no
// MAC: anyone who knows the server's recipient could have written it) is
// rewritten only when old's and next's first identities are the same and
// vouch accepts the key it holds (a recorded run of the server was sealed
// with it: the backup's own check), which authenticates it in place; to
// another identity it is refused (ErrUnvouchedKey), as that would vouch
// for a planted key without anyone having said so. vouch's error wraps
// ErrUnvouchedKey when it refuses the key.
func Rewrap(ctx context.Context, st Store, server string, old, next *Keys, vouch func(context.Context, DataKey) error) (wrote bool, err error) {
	names, err := keyNames(server)
	if err != nil {
		return false, err
	}
	return rewrap(ctx, st, names, old, next, nil, vouch)
}

// Authenticate rewrites server's data key object, found in format 1, in
// format 2 wrapped to k's first identity, provided it still holds dk: the
// key a recorded run of the server was sealed with, which vouches for it
// (the backup's check). An object that holds another key now was replaced
// since dk was read: ErrCorrupt, the object left as it is.
func (k *Keys) Authenticate(ctx context.Context, st Store, server string, dk DataKey) error {
	names, err := keyNames(server)
	if err != nil {
		return err
	}
	_, err = rewrap(ctx, st, names, k, k, &dk, nil)
	return err
}

// rewrap replaces the server's data key object, under the store's lock of
// it: opened with any identity of old, wrapped to the first of next, in
// format 2. The
// new wrapping is written to the spare first and read back, then over the
// object and read back, then the spare is removed: a store's failed write
// may remove the object it was writing (S3 takes back what it cannot
// confirm), and at every step the object or the spare holds the key, which
// readDataKey finds in either. An object in format 2 that the first of
// next opens already is left as it is (a rotation done already, or by a
// concurrent run), so a retried rekey succeeds; a spare left by a rewrap
// that failed after writing the object is removed then. wrote says whether
// this call replaced the object.
//
// With want (the key a caller checked before: a MAC it verified, a run it
// found sealed with it), what the object holds under the lock must be
// want, or it was replaced meanwhile (ErrCorrupt, nothing written): the
// caller's check is not carried over to another key. Without want (a
// rekey), a format-1 object is rewritten only when old's and next's first
// identities are the same and vouch (nil: none) accepts its key (see
// Rewrap), else ErrUnvouchedKey.
func rewrap(ctx context.Context, st Store, names objectNames, old, next *Keys, want *DataKey,
	vouch func(context.Context, DataKey) error) (wrote bool, err error) {
	unlock, err := lockKey(ctx, st, names)
	if err != nil {
		return false, err
	}
	defer unlock()
	replaced := func() error {
		return fmt.Errorf("%w: the data key object %s holds another key than the one checked before its rewrap: replaced meanwhile; "+
			"it is left as it is and nothing was sealed with it", ErrCorrupt, names.key)
	}
	if got, o, err := next.readObject(ctx, st, names.key, names.server); err == nil && o.first && !o.legacy {
		same := want == nil || got == *want
		clear(got[:])
		if !same {
			return false, replaced()
		}
		return false, removeSpare(ctx, st, names)
	}
	dk, o, err := old.readDataKey(ctx, st, names)
	if err != nil {
		return false, err
	}
	defer clear(dk[:])
	switch {
	case want != nil && dk != *want:
		return false, replaced()
	case want == nil && o.legacy && !sameFirst(old, next):
		return false, fmt.Errorf("%w: %s was written by an earlier archiver (format 1), which does not say who wrote it: "+
			"anyone who knows the server's recipient could have, and rewrapping it to another identity would vouch for it; "+
			"if the server's newest recorded chunked run was sealed with its key, authenticate it first (archiver rekey %s %s "+
			"with %s and %s both naming the old key file, which checks that, as a backup also does by itself), then rekey",
			ErrUnvouchedKey, names.key, jobapi.Flag(jobapi.FlagServer), names.server,
			jobapi.Flag(jobapi.FlagEncryptionKeyFile), jobapi.Flag(jobapi.FlagNewEncryptionKeyFile))
	case want == nil && o.legacy && vouch == nil:
		return false, fmt.Errorf("%w: %s was written by an earlier archiver (format 1), which does not say who wrote it, "+
			"and nothing was given to check it against a recorded run", ErrUnvouchedKey, names.key)
	case want == nil && o.legacy:
		if err := vouch(ctx, dk); err != nil {
			return false, err
		}
	}
	if o.unopened {
		if err := keepUnopened(ctx, st, names); err != nil {
			return false, err
		}
	}
	if err := next.replace(ctx, st, names.spare, names.server, dk); err != nil {
		return false, err
	}
	if err := next.replace(ctx, st, names.key, names.server, dk); err != nil {
		return true, fmt.Errorf("%w (the data key is safe in %s, which the key file's first identity opens: run the backup or archiver rekey again to finish the rewrap)", err, names.spare)
	}
	return true, removeSpare(ctx, st, names)
}

// sameFirst reports whether a's and b's first identities are the same
// (their MAC keys are derived from them).
func sameFirst(a, b *Keys) bool { return hmac.Equal(a.macKeys[0], b.macKeys[0]) }

// keepUnopened copies the server's key object, which did not open while
// its spare did, to jobapi.DataKeyUnopenedKey (named by the first 12 hex
// digits of its SHA-256, so a retried rewrap writes the same copy) before
// a rewrap replaces it with the spare's key. After a rewrap that failed
// half-way the two hold one key; a spare copied in from elsewhere, or
// left by another key file, may hold another, and the object would be the
// only wrapping of the key its runs were sealed with.
func keepUnopened(ctx context.Context, st Store, names objectNames) error {
	b, err := readKeyObject(ctx, st, names.key)
	if err != nil {
		return fmt.Errorf("keeping the data key object %s that did not open: %w", names.key, err)
	}
	sum := sha256.Sum256(b)
	copyKey, err := jobapi.DataKeyUnopenedKey(names.server, hex.EncodeToString(sum[:6]))
	if err != nil {
		return err
	}
	if _, err := st.Put(ctx, copyKey, func(w io.Writer) error { _, err := w.Write(b); return err }); err != nil {
		return fmt.Errorf("keeping the data key object %s that did not open, as %s: %w", names.key, copyKey, err)
	}
	return nil
}

// removeSpare removes the spare of a rewrapped key object, if there is one.
func removeSpare(ctx context.Context, st Store, names objectNames) error {
	if err := st.Remove(ctx, names.spare); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("the data key object %s is rewrapped; removing its spare %s: %w", names.key, names.spare, err)
	}
	return nil
}

// replace writes dk wrapped to k's first identity under key, then reads it
// back with that identity alone.
func (k *Keys) replace(ctx context.Context, st Store, key, server string, dk DataKey) error {
	if err := k.writeDataKey(ctx, st, key, server, dk); err != nil {
		return err
	}
	got, o, err := k.readObject(ctx, st, key, server)
	defer clear(got[:])
	switch {
	case err != nil:
		return fmt.Errorf("reading back the rewrapped data key object %s: %w", key, err)
	case !o.first || o.legacy:
		return fmt.Errorf("the rewrapped data key object %s does not open with the new key file's first identity", key)
	case got != dk:
		return fmt.Errorf("the rewrapped data key object %s does not hold the same key", key)
	}
	return nil
}

// readDataKey opens the server's data key: its key object, or, when that
// is gone or opens with none of k's identities, its spare (a rewrap that
// failed half-way), with o.first false for the spare.
func (k *Keys) readDataKey(ctx context.Context, st Opener, names objectNames) (dk DataKey, o opened, err error) {
	dk, o, err = k.readObject(ctx, st, names.key, names.server)
	if err == nil || !(errors.Is(err, ErrNoDataKey) || errors.Is(err, ErrWrongKey) || errors.Is(err, ErrCorrupt)) {
		return dk, o, err
	}
	spare, so, serr := k.readObject(ctx, st, names.spare, names.server)
	switch {
	case serr == nil:
		return spare, opened{legacy: so.legacy, unopened: !errors.Is(err, ErrNoDataKey)}, nil
	case errors.Is(err, ErrNoDataKey) && !errors.Is(serr, ErrNoDataKey):
		return DataKey{}, opened{}, serr // only the spare is left, and it does not open
	}
	return DataKey{}, opened{}, err
}

// readKeyObject reads the data key object key, at most maxKeyObject+1
// bytes (the caller refuses more). A FIFO or a folder put in its place is
// damage (ErrCorrupt: no retry helps); one that is gone wraps
// fs.ErrNotExist.
func readKeyObject(ctx context.Context, st Opener, key string) ([]byte, error) {
	rc, err := st.Open(ctx, key)
	if errors.Is(err, regfile.ErrNotRegular) {
		return nil, fmt.Errorf("%w: the data key object %w", ErrCorrupt, err)
	}
	if err != nil {
		return nil, fmt.Errorf("opening the data key object %s: %w", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxKeyObject+1))
	if err != nil {
		return nil, fmt.Errorf("reading the data key object %s: %w", key, err)
	}
	return b, nil
}

// readObject opens the data key object key with k's identities and checks
// its MAC (format 2) against theirs.
func (k *Keys) readObject(ctx context.Context, st Opener, key, server string) (dk DataKey, o opened, err error) {
	b, err := readKeyObject(ctx, st, key)
	if errors.Is(err, fs.ErrNotExist) {
		return DataKey{}, o, fmt.Errorf("%w: %s is not in the store", ErrNoDataKey, key)
	}
	if err != nil {
		return DataKey{}, o, err
	}
	if len(b) > maxKeyObject {
		return DataKey{}, o, fmt.Errorf("%w: the data key object %s is larger than %d bytes", ErrCorrupt, key, maxKeyObject)
	}
	// The first identity alone, then (when the file holds more) every one.
	r, err := k.first().Decrypt(bytes.NewReader(b))
	o.first = err == nil
	if errors.Is(err, ErrWrongKey) && len(k.identities) > 1 {
		r, err = k.Decrypt(bytes.NewReader(b))
	}
	if errors.Is(err, ErrWrongKey) {
		return DataKey{}, opened{}, fmt.Errorf("data key object %s: %w (after a rotation, keep the old identity on a later line of the key file until a backup or archiver rekey has rewrapped it)", key, err)
	}
	if err != nil {
		return DataKey{}, opened{}, fmt.Errorf("data key object %s: %w", key, err)
	}
	pt, err := io.ReadAll(io.LimitReader(r, 1024))
	defer clear(pt)
	if err != nil {
		return DataKey{}, opened{}, fmt.Errorf("data key object %s: %w", key, err)
	}
	body, tag, legacy, ok := splitKeyObject(pt, server)
	switch {
	case !ok:
		return DataKey{}, opened{}, fmt.Errorf("%w: the data key object %s is not server %s's key object", ErrCorrupt, key, server)
	case !legacy && !k.authentic(body, tag):
		return DataKey{}, opened{}, fmt.Errorf("%w: the data key object %s opens, but was not written with an identity of the key file: "+
			"replaced by someone who knows only the server's recipient, or damaged", ErrCorrupt, key)
	}
	o.legacy = legacy
	copy(dk[:], body[len(body)-DataKeySize:])
	return dk, o, nil
}

// writeDataKey writes dk as server's data key object key, format 2,
// wrapped to k's first identity and authenticated with its MAC key.
func (k *Keys) writeDataKey(ctx context.Context, st Store, key, server string, dk DataKey) error {
	pt := make([]byte, 0, len(keyObjectMagic)+1+len(server)+DataKeySize+sha256.Size)
	pt = append(pt, keyObjectMagic...)
	pt = append(pt, byte(len(server)))
	pt = append(pt, server...)
	pt = append(pt, dk[:]...)
	pt = append(pt, objectMAC(k.macKeys[0], pt)...)
	defer clear(pt)
	_, err := st.Put(ctx, key, func(w io.Writer) error {
		ew, err := k.Encrypt(w)
		if err != nil {
			return err
		}
		if _, err := ew.Write(pt); err != nil {
			return err
		}
		return ew.Close()
	})
	if err != nil {
		return fmt.Errorf("writing the data key object %s: %w", key, err)
	}
	return nil
}
