package crypt

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"

	"github.com/worldbackup/worldbackup/archiver/store"
)

func identityFile(t testing.TB, extra ...string) (string, *age.X25519Identity) {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "key.txt")
	body := "# created: now\n# public key: " + id.Recipient().String() + "\n" + id.String() + "\n" + strings.Join(extra, "\n")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p, id
}

// TestKeysNeverPrinted: a Keys or DataKey formatted by mistake shows no
// key material.
func TestKeysNeverPrinted(t *testing.T) {
	p, id := identityFile(t)
	k, err := LoadKeyFile(p)
	if err != nil {
		t.Fatal(err)
	}
	dk := DataKey{1, 2, 3}
	for _, s := range []string{fmt.Sprint(k), fmt.Sprintf("%v %+v %#v", k, k, k), fmt.Sprintf("%v %#v %x", dk, dk, dk)} {
		if strings.Contains(s, id.String()[:20]) || strings.Contains(s, "010203") {
			t.Errorf("key material printed: %s", s)
		}
	}
}

// TestTarRoundTrip: Encrypt then Decrypt gives the bytes back; another
// identity is ErrWrongKey; a flipped or cut ciphertext ErrCorrupt.
func TestTarRoundTrip(t *testing.T) {
	p, _ := identityFile(t)
	k, err := LoadKeyFile(p)
	if err != nil {
		t.Fatal(err)
	}
	plain := bytes.Repeat([]byte("a world "), 50000)
	var ct bytes.Buffer
	w, err := k.Encrypt(&ct)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(plain)
	w.Close()
	if !IsEncrypted(ct.Bytes()) {
		t.Fatal("not an age file")
	}
	read := func(k *Keys, b []byte) ([]byte, error) {
		r, err := k.Decrypt(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		return io.ReadAll(r)
	}
	if got, err := read(k, ct.Bytes()); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("round trip: %v", err)
	}
	p2, _ := identityFile(t)
	other, _ := LoadKeyFile(p2)
	if _, err := read(other, ct.Bytes()); !errors.Is(err, ErrWrongKey) {
		t.Errorf("another identity: %v, want ErrWrongKey", err)
	}
	flipped := bytes.Clone(ct.Bytes())
	flipped[len(flipped)/2] ^= 1
	for name, b := range map[string][]byte{"flipped": flipped, "cut": ct.Bytes()[:ct.Len()-70000]} {
		if _, err := read(k, b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}

// TestDataKeyRewrap: a server's data key is made once, read back, and
// after Rewrap opened by the new identity only; an old identity kept on a
// later line of the new file still opens what it wrapped.
func TestDataKeyRewrap(t *testing.T) {
	st := store.NewMem()
	ctx := t.Context()
	oldPath, oldID := identityFile(t)
	old, _ := LoadKeyFile(oldPath)
	if _, err := old.OpenDataKey(ctx, st, "survival"); !errors.Is(err, ErrNoDataKey) {
		t.Fatalf("no key object yet: %v", err)
	}
	dk, err := old.DataKey(ctx, st, "survival", true)
	if err != nil {
		t.Fatal(err)
	}
	again, err := old.DataKey(ctx, st, "survival", true)
	if err != nil || again != dk {
		t.Fatalf("a second run got another key (%v)", err)
	}
	nextPath, _ := identityFile(t, oldID.String()) // the new identity first, the old kept
	next, _ := LoadKeyFile(nextPath)
	if got, err := next.OpenDataKey(ctx, st, "survival"); err != nil || got != dk {
		t.Fatalf("the old identity on the new file's second line: %v", err)
	}
	if err := Rewrap(ctx, st, "survival", old, next); err != nil {
		t.Fatal(err)
	}
	if _, err := old.OpenDataKey(ctx, st, "survival"); !errors.Is(err, ErrWrongKey) {
		t.Errorf("the old identity after rewrap: %v, want ErrWrongKey", err)
	}
	if got, err := next.OpenDataKey(ctx, st, "survival"); err != nil || got != dk {
		t.Errorf("the new identity after rewrap: %v", err)
	}
	if _, err := next.OpenDataKey(ctx, st, "creative"); !errors.Is(err, ErrNoDataKey) {
		t.Errorf("another server: %v", err)
	}
}
