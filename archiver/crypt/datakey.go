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
	return k.readDataKey(ctx, st, key, server)
}

// DataKey is OpenDataKey for a run that writes: with create, a server without one gets a
// new random key, wrapped to k's first identity and stored (under the
// store's lock of the object, so concurrent first runs share one key);
// an object that exists is never replaced. Errors: ErrWrongKey (no
// identity opens it), ErrCorrupt, ErrNoDataKey (none, and not create).
func (k *Keys) DataKey(ctx context.Context, st Store, server string, create bool) (DataKey, error) {
	key, err := jobapi.DataKeyKey(server)
	if err != nil {
		return DataKey{}, err
	}
	dk, err := k.readDataKey(ctx, st, key, server)
	if !create || !errors.Is(err, ErrNoDataKey) {
		return dk, err
	}
	unlock, err := st.Lock(ctx, key)
	if err != nil {
		return DataKey{}, fmt.Errorf("locking the data key object %s: %w", key, err)
	}
	defer unlock()
	dk, err = k.readDataKey(ctx, st, key, server) // another run may have made it meanwhile
	if !errors.Is(err, ErrNoDataKey) {
		return dk, err
	}
	if _, err := rand.Read(dk[:]); err != nil {
		return DataKey{}, err
	}
	if err := k.writeDataKey(ctx, st, key, server, dk); err != nil {
		return DataKey{}, err
	}
	return dk, nil
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
	unlock, err := st.Lock(ctx, key)
	if err != nil {
		return fmt.Errorf("locking the data key object %s: %w", key, err)
	}
	defer unlock()
	dk, err := old.readDataKey(ctx, st, key, server)
	if err != nil {
		return err
	}
	defer clear(dk[:])
	if err := next.writeDataKey(ctx, st, key, server, dk); err != nil {
		return err
	}
	// Read it back with the new identity before saying it is done.
	got, err := next.readDataKey(ctx, st, key, server)
	if err != nil {
		return fmt.Errorf("reading back the rewrapped data key object %s: %w", key, err)
	}
	if got != dk {
		return fmt.Errorf("the rewrapped data key object %s does not hold the same key", key)
	}
	return nil
}

func (k *Keys) readDataKey(ctx context.Context, st Opener, key, server string) (DataKey, error) {
	rc, err := st.Open(ctx, key)
	if errors.Is(err, fs.ErrNotExist) {
		return DataKey{}, fmt.Errorf("%w: %s is not in the store", ErrNoDataKey, key)
	}
	if err != nil {
		return DataKey{}, fmt.Errorf("opening the data key object %s: %w", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxKeyObject+1))
	if err != nil {
		return DataKey{}, fmt.Errorf("reading the data key object %s: %w", key, err)
	}
	if len(b) > maxKeyObject {
		return DataKey{}, fmt.Errorf("%w: the data key object %s is larger than %d bytes", ErrCorrupt, key, maxKeyObject)
	}
	r, err := k.Decrypt(bytes.NewReader(b))
	if err != nil {
		return DataKey{}, fmt.Errorf("data key object %s: %w", key, err)
	}
	pt, err := io.ReadAll(io.LimitReader(r, 1024))
	defer clear(pt)
	if err != nil {
		return DataKey{}, fmt.Errorf("data key object %s: %w", key, err)
	}
	want := len(keyObjectMagic) + 1 + len(server) + DataKeySize
	if len(pt) != want || string(pt[:len(keyObjectMagic)]) != keyObjectMagic ||
		int(pt[len(keyObjectMagic)]) != len(server) || string(pt[len(keyObjectMagic)+1:want-DataKeySize]) != server {
		return DataKey{}, fmt.Errorf("%w: the data key object %s is not server %s's key object", ErrCorrupt, key, server)
	}
	var dk DataKey
	copy(dk[:], pt[want-DataKeySize:])
	return dk, nil
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
