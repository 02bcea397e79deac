package crypt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"filippo.io/age"

	"github.com/worldbackup/worldbackup/archiver/store"
	"github.com/worldbackup/worldbackup/internal/s3test"
	"github.com/worldbackup/worldbackup/jobapi"
)

// newOnly loads a key file holding id alone: the key file once a rotation
// is done and the old identity dropped.
func newOnly(t *testing.T, id interface{ String() string }) *Keys {
	t.Helper()
	p := filepath.Join(t.TempDir(), "new.txt")
	if err := os.WriteFile(p, []byte(id.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := LoadKeyFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// rotation makes server survival's data key in st with a key file (old)
// and returns it with the key file of the Secret rotated: a new identity
// first (newID), the old one on a later line.
func rotation(t *testing.T, st Store) (old *Keys, dk DataKey, rotated *Keys, newID *age.X25519Identity) {
	t.Helper()
	old, oldID := keysOf(t)
	dk, _, err := old.DataKey(t.Context(), st, "survival", true)
	if err != nil {
		t.Fatal(err)
	}
	rotated, newID = keysOf(t, oldID.String())
	return old, dk, rotated, newID
}

// TestRewrapSurvivesAFailedWrite: an S3 server that stores the rewrapped
// key object and answers 500 (the answer lost), every time, makes the
// store take the object back; the rewrap fails, and the server's data key
// is still there: the new identity alone opens it (from the spare), and
// the next run finishes the rewrap, with the same key, and removes the
// spare. Before the spare, that failure left the server without its data
// key, every encrypted chunked run of it unreadable.
func TestRewrapSurvivesAFailedWrite(t *testing.T) {
	ctx := t.Context()
	srv := s3test.New(t)
	bucket := srv.NewBucket(t)
	mainKey, _ := jobapi.DataKeyKey("survival")
	spareKey, _ := jobapi.DataKeySpareKey("survival")
	var mu sync.Mutex // the lock is not what is tested: one process, one mutex
	var lock oneLock = func(context.Context, string) (func(), error) { mu.Lock(); return mu.Unlock, nil }
	open := func(endpoint string) *store.S3 {
		s, err := store.NewS3(store.S3Options{URL: "s3://" + bucket + "/pre", Endpoint: endpoint, Region: s3test.Region, PathStyle: true,
			AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey, Locker: lock})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	p := srv.Proxy(t, func(r s3test.Request) s3test.Action {
		if r.Op == "PutObject" && strings.HasSuffix(r.HTTP.URL.Path, "/"+mainKey) {
			return s3test.ForwardThenFail(http.StatusInternalServerError)
		}
		return nil
	})
	direct, failing := open(srv.Endpoint), open(p.Endpoint)
	exists := func(key string) bool {
		rc, err := direct.Open(ctx, key)
		if err == nil {
			rc.Close()
			return true
		}
		if !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		return false
	}

	_, dk, rotated, newID := rotation(t, direct)
	_, _, err := rotated.DataKey(ctx, failing, "survival", true)
	if err == nil || !strings.Contains(err.Error(), "the data key is safe in "+spareKey) {
		t.Fatalf("the run whose key object write failed: %v, want an error naming the spare", err)
	}
	if exists(mainKey) {
		t.Fatal("the key object is still there: the failure did not take it back, so this test proves nothing")
	}
	if p.Count("PutObject") < 2 {
		t.Fatalf("%d PutObject requests: the spare and the key object were not both written", p.Count("PutObject"))
	}
	next := newOnly(t, newID)
	if got, _, err := next.OpenDataKey(ctx, direct, "survival"); err != nil || got != dk {
		t.Fatalf("the new identity alone after the failed rewrap: same key %v, %v", got == dk, err)
	}
	if got, _, err := rotated.OpenDataKey(ctx, direct, "survival"); err != nil || got != dk {
		t.Fatalf("the rotated key file after the failed rewrap: same key %v, %v", got == dk, err)
	}

	got, ev, err := next.DataKey(ctx, direct, "survival", true)
	if err != nil || got != dk || ev != KeyRewrapped {
		t.Fatalf("the next run: event %v, same key %v, %v; want the rewrap finished with the same key", ev, got == dk, err)
	}
	if !exists(mainKey) || exists(spareKey) {
		t.Errorf("after the rewrap: key object there %v, spare there %v; want the object and no spare", exists(mainKey), exists(spareKey))
	}
	if got, o, err := next.readObject(ctx, direct, mainKey, "survival"); err != nil || !o.first || o.legacy || got != dk {
		t.Errorf("the key object after the rewrap: first identity %v, format 1 %v, same key %v, %v", o.first, o.legacy, got == dk, err)
	}
}

// TestSpareOpensWhenTheObjectDoesNot: a rewrap that wrote the spare and
// failed before the key object changed leaves the object wrapped to the
// old identity only; a key file without it reads the spare, and its next
// run rewraps the object from there. A key object that opens with no
// identity and no spare is still ErrWrongKey; a spare that does not open
// while the object is gone is the spare's error.
func TestSpareOpensWhenTheObjectDoesNot(t *testing.T) {
	ctx := t.Context()
	st := store.NewMem()
	old, dk, rotated, newID := rotation(t, st)
	refusing := &failPut{Store: st, key: "_chunked/keys/survival.key"}
	if _, err := Rewrap(ctx, refusing, "survival", old, rotated, acceptKey); err == nil {
		t.Fatal("the rewrap whose key object write failed succeeded")
	}
	if got, _, err := old.OpenDataKey(ctx, st, "survival"); err != nil || got != dk {
		t.Fatalf("the old identity: the key object changed: %v", err)
	}
	next := newOnly(t, newID)
	if got, _, err := next.OpenDataKey(ctx, st, "survival"); err != nil || got != dk {
		t.Fatalf("the new identity alone: same key %v, %v; want the spare's key", got == dk, err)
	}
	before, _ := st.Bytes("_chunked/keys/survival.key")
	if got, ev, err := next.DataKey(ctx, st, "survival", true); err != nil || got != dk || ev != KeyRewrapped {
		t.Fatalf("the next run with the new identity alone: event %v, same key %v, %v", ev, got == dk, err)
	}
	if _, _, err := old.OpenDataKey(ctx, st, "survival"); !errors.Is(err, ErrWrongKey) {
		t.Errorf("the old identity after the finished rewrap: %v, want ErrWrongKey", err)
	}
	// The object the new identity did not open is kept beside it (keepUnopened).
	keys := st.Keys()
	if len(keys) != 2 || keys[0] != "_chunked/keys/survival.key" || !strings.HasPrefix(keys[1], "_chunked/keys/survival.key.unopened-") {
		t.Fatalf("the store holds %v, want the key object and the copy of the one that did not open", keys)
	}
	if kept, _ := st.Bytes(keys[1]); !bytes.Equal(kept, before) {
		t.Errorf("the copy is not the object that did not open")
	}
	if err := st.Remove(ctx, keys[1]); err != nil {
		t.Fatal(err)
	}

	stranger, _ := keysOf(t)
	if _, _, err := stranger.OpenDataKey(ctx, st, "survival"); !errors.Is(err, ErrWrongKey) {
		t.Errorf("another identity: %v, want ErrWrongKey", err)
	}
	// Only a spare left, which this identity does not open.
	if _, err := st.Put(ctx, "_chunked/keys/survival.key.spare", func(w io.Writer) error {
		rc, err := st.Open(ctx, "_chunked/keys/survival.key")
		if err != nil {
			return err
		}
		defer rc.Close()
		_, err = io.Copy(w, rc)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := st.Remove(ctx, "_chunked/keys/survival.key"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := stranger.OpenDataKey(ctx, st, "survival"); !errors.Is(err, ErrWrongKey) {
		t.Errorf("another identity, only the spare left: %v, want ErrWrongKey", err)
	}
	if got, _, err := next.OpenDataKey(ctx, st, "survival"); err != nil || got != dk {
		t.Errorf("only the spare left: same key %v, %v", got == dk, err)
	}
}

// failPut is a Store whose Puts of key fail before they write.
type failPut struct {
	Store
	key string
}

func (f *failPut) Put(ctx context.Context, key string, write func(io.Writer) error) (int64, error) {
	if key == f.key {
		return 0, errors.New("the store refused the write")
	}
	return f.Store.Put(ctx, key, write)
}

// oneLock is a store.Locker of a function.
type oneLock func(ctx context.Context, name string) (func(), error)

func (f oneLock) Lock(ctx context.Context, name string) (func(), error) { return f(ctx, name) }

// plant writes server's data key object as one who can write to the store
// but holds no identity of the server would: dk wrapped to the server's
// recipient with age, in format 1 (no MAC), or in format 2 with a MAC
// under macKey (a key of the planter's own).
func plant(t *testing.T, st Store, server string, to age.Recipient, dk DataKey, macKey []byte) {
	t.Helper()
	magic := keyObjectMagic
	if macKey == nil {
		magic = keyObjectV1
	}
	pt := append([]byte(magic), byte(len(server)))
	pt = append(append(pt, server...), dk[:]...)
	if macKey != nil {
		pt = append(pt, objectMAC(macKey, pt)...)
	}
	key, _ := jobapi.DataKeyKey(server)
	if _, err := st.Put(t.Context(), key, func(w io.Writer) error {
		ew, err := age.Encrypt(w, to)
		if err != nil {
			return err
		}
		if _, err := ew.Write(pt); err != nil {
			return err
		}
		return ew.Close()
	}); err != nil {
		t.Fatal(err)
	}
}

// TestKeyObjectAuthenticated: age does not say who encrypted, so a key
// object wrapped to the server's (public) recipient by someone else opens
// with the server's identity. In format 2 its MAC, which needs the
// identity's secret, gives it away: ErrCorrupt for readers and writers,
// the object left as it is. In format 1 (what archivers wrote before the
// MAC) a writer is told KeyUnauthenticated, to check it before it seals;
// Rewrap with the same key file rewrites it in format 2 with the same key,
// and a second Rewrap writes nothing.
func TestKeyObjectAuthenticated(t *testing.T) {
	ctx := t.Context()
	victim, id := keysOf(t)
	planted := DataKey{7, 7, 7}
	key, _ := jobapi.DataKeyKey("survival")

	t.Run("format 2 with a MAC of another key", func(t *testing.T) {
		st := store.NewMem()
		plant(t, st, "survival", id.Recipient(), planted, objectMACKey("AGE-SECRET-KEY-1PLANTER"))
		before := objectBytes(t, st, key)
		if _, _, err := victim.OpenDataKey(ctx, st, "survival"); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "replaced") {
			t.Errorf("a reader: %v, want ErrCorrupt saying the object was replaced", err)
		}
		if _, ev, err := victim.DataKey(ctx, st, "survival", true); !errors.Is(err, ErrCorrupt) {
			t.Errorf("a writer: event %v, %v; want ErrCorrupt", ev, err)
		}
		if _, err := Rewrap(ctx, st, "survival", victim, victim, acceptKey); !errors.Is(err, ErrCorrupt) {
			t.Errorf("a rekey: %v, want ErrCorrupt", err)
		}
		if after := objectBytes(t, st, key); !bytes.Equal(after, before) {
			t.Error("the planted object was changed")
		}
	})
	t.Run("format 1", func(t *testing.T) {
		st := store.NewMem()
		plant(t, st, "survival", id.Recipient(), planted, nil)
		if got, legacy, err := victim.OpenDataKey(ctx, st, "survival"); err != nil || got != planted || !legacy {
			t.Errorf("a reader: same key %v, legacy %v, %v; want format 1 read, and said", got == planted, legacy, err)
		}
		got, ev, err := victim.DataKey(ctx, st, "survival", true)
		if err != nil || got != planted || ev != KeyUnauthenticated {
			t.Fatalf("a writer: event %v, same key %v, %v; want KeyUnauthenticated", ev, got == planted, err)
		}
		// Authenticated in place only when a recorded run vouches for its
		// key (vouch), never on the operator's word alone.
		before := objectBytes(t, st, key)
		refuse := func(_ context.Context, dk DataKey) error {
			if dk != planted {
				t.Errorf("vouch was asked about another key than the object's")
			}
			return fmt.Errorf("%w: no recorded run was sealed with it", ErrUnvouchedKey)
		}
		for name, vouch := range map[string]func(context.Context, DataKey) error{"refused": refuse, "not checked": nil} {
			if wrote, err := Rewrap(ctx, st, "survival", victim, victim, vouch); !errors.Is(err, ErrUnvouchedKey) || wrote {
				t.Errorf("a rekey whose key is %s: wrote %v, %v; want ErrUnvouchedKey", name, wrote, err)
			}
			if after := objectBytes(t, st, key); !bytes.Equal(after, before) {
				t.Errorf("a rekey whose key is %s changed the object", name)
			}
		}
		if wrote, err := Rewrap(ctx, st, "survival", victim, victim, acceptKey); err != nil || !wrote {
			t.Fatalf("a rekey whose key a run vouches for: wrote %v, %v", wrote, err)
		}
		if got, o, err := victim.readObject(ctx, st, key, "survival"); err != nil || o.legacy || !o.first || got != planted {
			t.Fatalf("after Rewrap: format 1 %v, first %v, same key %v, %v; want format 2, the same key", o.legacy, o.first, got == planted, err)
		}
		if got, ev, err := victim.DataKey(ctx, st, "survival", true); err != nil || got != planted || ev != KeyOpened {
			t.Errorf("a writer after Rewrap: event %v, same key %v, %v; want KeyOpened", ev, got == planted, err)
		}
		before = objectBytes(t, st, key)
		if wrote, err := Rewrap(ctx, st, "survival", victim, victim, refuse); err != nil || wrote {
			t.Fatalf("a second rekey: wrote %v, %v; want nothing to do, and no vouch asked", wrote, err)
		}
		if after := objectBytes(t, st, key); !bytes.Equal(after, before) {
			t.Error("a second Rewrap rewrote an object already in format 2")
		}
	})
	// A rekey to another identity would authenticate a planted object
	// under that identity's MAC, and every later run would be sealed with
	// the planter's key: refused, the object left as it is. The same
	// identity in another key file authenticates it in place.
	t.Run("format 1, rekeyed", func(t *testing.T) {
		next, _ := keysOf(t)
		for _, tc := range []struct {
			name string
			next *Keys
			want error // nil: rewritten in format 2, the same key
		}{
			{"to another identity", next, ErrUnvouchedKey},
			{"to the same identity, another file", newOnly(t, id), nil},
		} {
			t.Run(tc.name, func(t *testing.T) {
				st := store.NewMem()
				plant(t, st, "survival", id.Recipient(), planted, nil)
				before := objectBytes(t, st, key)
				_, err := Rewrap(ctx, st, "survival", victim, tc.next, acceptKey)
				if tc.want != nil {
					if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), "authenticate it first") {
						t.Fatalf("Rewrap: %v, want %v saying how to authenticate it first", err, tc.want)
					}
					if after := objectBytes(t, st, key); !bytes.Equal(after, before) {
						t.Error("the refused rekey changed the object")
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if got, o, err := tc.next.readObject(ctx, st, key, "survival"); err != nil || o.legacy || !o.first || got != planted {
					t.Errorf("after Rewrap: format 1 %v, first %v, same key %v, %v; want format 2, the same key", o.legacy, o.first, got == planted, err)
				}
			})
		}
	})
}

// swapStore is a Store on which one who can write to the store, and knows
// only the server's recipient, replaces the key object once: when a rewrap
// takes its lock (after the caller checked the key, before the locked
// read), or, with afterUnlock, when the rewrap releases it.
type swapStore struct {
	Store
	afterUnlock bool
	once        sync.Once
	swap        func()
}

func (s *swapStore) Lock(ctx context.Context, key string) (func(), error) {
	if !s.afterUnlock {
		s.once.Do(s.swap)
	}
	unlock, err := s.Store.Lock(ctx, key)
	if err != nil || !s.afterUnlock {
		return unlock, err
	}
	return func() { unlock(); s.once.Do(s.swap) }, nil
}

// TestRewrapKeepsToTheKeyChecked: a rewrap done for a key its caller
// checked (DataKey's rotation: the object's MAC; a backup's vouch: a
// recorded run sealed with it) rewrites the object only if it still holds
// that key under the lock. A format-1 object planted between the check
// and the locked read is refused (ErrCorrupt, replaced meanwhile), left in
// format 1 and not sealed with; one planted after the rewrap is not what
// the run seals with either: DataKey returns the key it checked, not what
// a later read finds, and the next run finds the planted object
// unauthenticated. Before, the rewrap took whatever it read and wrote it
// in format 2, authenticating the planter's key.
func TestRewrapKeepsToTheKeyChecked(t *testing.T) {
	key, _ := jobapi.DataKeyKey("survival")
	planted := DataKey{6, 6, 6}
	for _, tc := range []struct {
		name        string
		vouch       bool // Authenticate a format-1 object; else DataKey's rotation
		afterUnlock bool // the object replaced after the rewrap, not before its locked read
	}{
		{"rotation, replaced before the locked read", false, false},
		{"rotation, replaced after the rewrap", false, true},
		{"vouch, replaced before the locked read", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			st := store.NewMem()
			var k, after *Keys // the run's key file; the next run's
			var id *age.X25519Identity
			var dk DataKey
			if tc.vouch {
				k, id = keysOf(t)
				after, dk = k, DataKey{1, 2, 3}
				plant(t, st, "survival", id.Recipient(), dk, nil) // an earlier archiver's object
			} else {
				_, dk, k, id = rotation(t, st)
				after = newOnly(t, id)
			}
			swapping := &swapStore{Store: st, afterUnlock: tc.afterUnlock, swap: func() {
				plant(t, st, "survival", id.Recipient(), planted, nil)
			}}
			var got DataKey
			var ev KeyEvent
			var err error
			if tc.vouch {
				err = k.Authenticate(ctx, swapping, "survival", dk)
			} else {
				got, ev, err = k.DataKey(ctx, swapping, "survival", true)
			}
			if tc.afterUnlock {
				if err != nil || got != dk || ev != KeyRewrapped {
					t.Fatalf("the rotating run: event %v, the key checked %v, the planted one %v, %v; want the key checked, rewrapped",
						ev, got == dk, got == planted, err)
				}
			} else {
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "replaced meanwhile") {
					t.Fatalf("the rewrap: event %v, planted key returned %v, %v; want ErrCorrupt saying replaced meanwhile", ev, got == planted, err)
				}
				if got != (DataKey{}) {
					t.Error("a refused rewrap returned a key")
				}
			}
			if inObject, o, err := after.readObject(ctx, st, key, "survival"); err != nil || inObject != planted || !o.legacy {
				t.Errorf("the key object after: the planted key %v, format 1 %v, %v; want the planted object left in format 1", inObject == planted, o.legacy, err)
			}
			if _, ev, err := after.DataKey(ctx, st, "survival", true); err != nil || ev != KeyUnauthenticated {
				t.Errorf("the next run: event %v, %v; want KeyUnauthenticated (its vouch judges the planted key)", ev, err)
			}
		})
	}
}

// TestLeftSpareRemoved: a spare left by a rewrap that replaced the object
// and failed to remove the spare (a second copy of the key, which
// crypto-shredding must find) is removed by the next rewrap, which finds
// the object done.
func TestLeftSpareRemoved(t *testing.T) {
	ctx := t.Context()
	st := store.NewMem()
	old, dk, rotated, _ := rotation(t, st)
	keepSpare := &failRemove{Store: st}
	if _, err := Rewrap(ctx, keepSpare, "survival", old, rotated, acceptKey); err == nil {
		t.Fatal("a rewrap whose spare could not be removed succeeded")
	}
	spare, _ := jobapi.DataKeySpareKey("survival")
	if rc, err := st.Open(ctx, spare); err != nil {
		t.Fatalf("the spare is not there to be left: %v", err)
	} else {
		rc.Close()
	}
	if _, err := Rewrap(ctx, st, "survival", old, rotated, acceptKey); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Open(ctx, spare); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the spare after the next rewrap: %v, want it gone", err)
	}
	if got, _, err := rotated.OpenDataKey(ctx, st, "survival"); err != nil || got != dk {
		t.Errorf("the data key after: same %v, %v", got == dk, err)
	}
}

// failRemove is a Store whose Remove fails.
type failRemove struct{ Store }

func (f *failRemove) Remove(context.Context, string) error { return errors.New("remove refused") }

func objectBytes(t *testing.T, st Opener, key string) []byte {
	t.Helper()
	rc, err := st.Open(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRewrapKeepsAnObjectItCannotOpen: a key object that the key file does
// not open, beside a spare that it does (a spare copied in from another
// store or a snapshot, holding another data key), is not lost when the
// rewrap replaces it with the spare's key: it is kept as
// <server>.key.unopened-<digest>, which its own identity still opens to
// the key its runs were sealed with. A retried rewrap keeps the same copy.
func TestRewrapKeepsAnObjectItCannotOpen(t *testing.T) {
	ctx := t.Context()
	st := store.NewMem()
	b, bID := keysOf(t) // the identity the object is wrapped to
	d2, _, err := b.DataKey(ctx, st, "survival", true)
	if err != nil {
		t.Fatal(err)
	}
	object, _ := st.Bytes("_chunked/keys/survival.key")
	// A stale spare: another data key, wrapped to another identity.
	other := store.NewMem()
	a, _ := keysOf(t)
	d1, _, err := a.DataKey(ctx, other, "survival", true)
	if err != nil || d1 == d2 {
		t.Fatalf("another data key: %v (same %v)", err, d1 == d2)
	}
	spare, _ := other.Bytes("_chunked/keys/survival.key")
	if _, err := st.Put(ctx, "_chunked/keys/survival.key.spare", func(w io.Writer) error { _, err := w.Write(spare); return err }); err != nil {
		t.Fatal(err)
	}
	c, _ := keysOf(t)
	for range 2 {
		if _, err := Rewrap(ctx, st, "survival", a, c, acceptKey); err != nil {
			t.Fatal(err)
		}
	}
	var copies []string
	for _, k := range st.Keys() {
		if strings.HasPrefix(k, "_chunked/keys/survival.key.unopened-") {
			copies = append(copies, k)
		}
	}
	if len(copies) != 1 {
		t.Fatalf("copies %v in %v, want one", copies, st.Keys())
	}
	if kept, _ := st.Bytes(copies[0]); !bytes.Equal(kept, object) {
		t.Fatal("the copy is not the object that did not open")
	}
	if got, _, err := newOnly(t, bID).readObject(ctx, st, copies[0], "survival"); err != nil || got != d2 {
		t.Errorf("the copy with its own identity: same key %v, %v", got == d2, err)
	}
	if got, _, err := c.OpenDataKey(ctx, st, "survival"); err != nil || got != d1 {
		t.Errorf("the rewrapped object: the spare's key %v, %v", got == d1, err)
	}
}
