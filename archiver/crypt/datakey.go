package crypt

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/worldbackup/worldbackup/jobapi"
)

// Opener reads a server's data key object (restore, verify, export: a
// store read without locks).
type Opener interface {
	Open(ctx context.Context, key string) (io.ReadCloser, error)
}

// Store holds a server's data key object (store.Local, store.S3,
// store.Mem): written atomically, read whole, and locked while it is
// created so two first runs of a server agree on one key.
type Store interface {
	Put(ctx context.Context, key string, write func(io.Writer) error) (size int64, err error)
	Open(ctx context.Context, key string) (io.ReadCloser, error)
	Lock(ctx context.Context, key string) (unlock func(), err error)
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

// keyObjectMagic starts the plaintext of a data key object, version 1:
// "WBDK" 0x01, the server name (a byte of length, then it), the key.
const keyObjectMagic = "WBDK\x01"

// ErrNoDataKey is wrapped by the error of a server that has no data key
// object: it never wrote an encrypted chunked run, or its key was removed
// (crypto-shredded).
var ErrNoDataKey = errors.New("the server has no data key")

// OpenDataKey returns server's data key from its key object in st, opened
// with any of k's identities. Errors: ErrWrongKey (no identity opens it),
// ErrCorrupt, ErrNoDataKey (the server has none).
func (k *Keys) OpenDataKey(ctx context.Context, st Opener, server string) (DataKey, error) {
	key, err := jobapi.DataKeyKey(server)
	if err != nil {
		return DataKey{}, err
	}
	dk, _, err := k.readDataKey(ctx, st, key, server)
	return dk, err
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
)

// DataKey is OpenDataKey for a run that writes. With create, a server
// without one gets a new random key, wrapped to k's first identity and
// stored (under the store's lock of the object, so concurrent first runs
// share one key). An object that only a later identity of k opens is
// rewrapped to the first, atomically and read back (Rewrap): rotating the
// Secret (the new identity first, the old on a later line) rotates the
// envelope at the next backup, and no pack is touched. The data key itself
// is never replaced. Errors: ErrWrongKey (no identity opens it),
// ErrCorrupt, ErrNoDataKey (none, and not create).
func (k *Keys) DataKey(ctx context.Context, st Store, server string, create bool) (DataKey, KeyEvent, error) {
	key, err := jobapi.DataKeyKey(server)
	if err != nil {
		return DataKey{}, 0, err
	}
	dk, first, err := k.readDataKey(ctx, st, key, server)
	switch {
	case err == nil && first:
		return dk, KeyOpened, nil
	case err == nil:
		clear(dk[:])
		wrote, err := rewrap(ctx, st, key, server, k, k)
		if err != nil {
			return DataKey{}, 0, err
		}
		ev := KeyRewrapped
		if !wrote {
			ev = KeyOpened // a concurrent run rewrapped it first
		}
		dk, _, err = k.readDataKey(ctx, st, key, server)
		return dk, ev, err
	case !create || !errors.Is(err, ErrNoDataKey):
		return DataKey{}, 0, err
	}
	unlock, err := st.Lock(ctx, key)
	if err != nil {
		return DataKey{}, 0, fmt.Errorf("locking the data key object %s: %w", key, err)
	}
	defer unlock()
	dk, _, err = k.readDataKey(ctx, st, key, server) // another run may have made it meanwhile
	if !errors.Is(err, ErrNoDataKey) {
		return dk, KeyOpened, err
	}
	if _, err := rand.Read(dk[:]); err != nil {
		return DataKey{}, 0, err
	}
	if err := k.writeDataKey(ctx, st, key, server, dk); err != nil {
		return DataKey{}, 0, err
	}
	return dk, KeyCreated, nil
}

// Rewrap rewraps server's data key object from the identities of old to
// the first identity of next: the rotation of the key file. No pack or
// manifest is touched; the object is replaced atomically, so until then
// old opens it, and after it next does.
func Rewrap(ctx context.Context, st Store, server string, old, next *Keys) error {
	key, err := jobapi.DataKeyKey(server)
	if err != nil {
		return err
	}
	_, err = rewrap(ctx, st, key, server, old, next)
	return err
}

// rewrap replaces the data key object key, under the store's lock of it:
// opened with any identity of old, wrapped to the first of next, then read
// back with that identity alone before it is said to be done. An object
// that the first of next opens already is left as it is (a rotation done
// already, or by a concurrent run), so a retried rekey succeeds; wrote
// says whether this call replaced it.
func rewrap(ctx context.Context, st Store, key, server string, old, next *Keys) (wrote bool, err error) {
	unlock, err := st.Lock(ctx, key)
	if err != nil {
		return false, fmt.Errorf("locking the data key object %s: %w", key, err)
	}
	defer unlock()
	if _, first, err := next.readDataKey(ctx, st, key, server); err == nil && first {
		return false, nil
	}
	dk, _, err := old.readDataKey(ctx, st, key, server)
	if err != nil {
		return false, err
	}
	defer clear(dk[:])
	if err := next.writeDataKey(ctx, st, key, server, dk); err != nil {
		return false, err
	}
	got, first, err := next.readDataKey(ctx, st, key, server)
	defer clear(got[:])
	switch {
	case err != nil:
		return true, fmt.Errorf("reading back the rewrapped data key object %s: %w", key, err)
	case !first:
		return true, fmt.Errorf("the rewrapped data key object %s does not open with the new key file's first identity", key)
	case got != dk:
		return true, fmt.Errorf("the rewrapped data key object %s does not hold the same key", key)
	}
	return true, nil
}

// readDataKey opens the data key object key with k's identities; first
// reports whether k's first identity opened it (the one k writes for).
func (k *Keys) readDataKey(ctx context.Context, st Opener, key, server string) (dk DataKey, first bool, err error) {
	rc, err := st.Open(ctx, key)
	if errors.Is(err, fs.ErrNotExist) {
		return DataKey{}, false, fmt.Errorf("%w: %s is not in the store", ErrNoDataKey, key)
	}
	if err != nil {
		return DataKey{}, false, fmt.Errorf("opening the data key object %s: %w", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxKeyObject+1))
	if err != nil {
		return DataKey{}, false, fmt.Errorf("reading the data key object %s: %w", key, err)
	}
	if len(b) > maxKeyObject {
		return DataKey{}, false, fmt.Errorf("%w: the data key object %s is larger than %d bytes", ErrCorrupt, key, maxKeyObject)
	}
	// The first identity alone, then (when the file holds more) every one.
	r, err := k.first().Decrypt(bytes.NewReader(b))
	first = err == nil
	if errors.Is(err, ErrWrongKey) && len(k.identities) > 1 {
		r, err = k.Decrypt(bytes.NewReader(b))
	}
	if errors.Is(err, ErrWrongKey) {
		return DataKey{}, false, fmt.Errorf("data key object %s: %w (after a rotation, keep the old identity on a later line of the key file until a backup or archiver rekey has rewrapped it)", key, err)
	}
	if err != nil {
		return DataKey{}, false, fmt.Errorf("data key object %s: %w", key, err)
	}
	pt, err := io.ReadAll(io.LimitReader(r, 1024))
	defer clear(pt)
	if err != nil {
		return DataKey{}, false, fmt.Errorf("data key object %s: %w", key, err)
	}
	want := len(keyObjectMagic) + 1 + len(server) + DataKeySize
	if len(pt) != want || string(pt[:len(keyObjectMagic)]) != keyObjectMagic ||
		int(pt[len(keyObjectMagic)]) != len(server) || string(pt[len(keyObjectMagic)+1:want-DataKeySize]) != server {
		return DataKey{}, false, fmt.Errorf("%w: the data key object %s is not server %s's key object", ErrCorrupt, key, server)
	}
	copy(dk[:], pt[want-DataKeySize:])
	return dk, first, nil
}

func (k *Keys) writeDataKey(ctx context.Context, st Store, key, server string, dk DataKey) error {
	pt := make([]byte, 0, len(keyObjectMagic)+1+len(server)+DataKeySize)
	pt = append(pt, keyObjectMagic...)
	pt = append(pt, byte(len(server)))
	pt = append(pt, server...)
	pt = append(pt, dk[:]...)
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
