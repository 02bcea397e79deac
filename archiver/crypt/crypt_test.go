package crypt

import (
	"bytes"
	"context"
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

// keysOf writes an identity file (identityFile) and loads it.
func keysOf(t testing.TB, extra ...string) (*Keys, *age.X25519Identity) {
	t.Helper()
	p, id := identityFile(t, extra...)
	k, err := LoadKeyFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return k, id
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
	other, _ := keysOf(t)
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
	old, oldID := keysOf(t)
	if _, _, err := old.OpenDataKey(ctx, st, "survival"); !errors.Is(err, ErrNoDataKey) {
		t.Fatalf("no key object yet: %v", err)
	}
	if _, _, err := old.DataKey(ctx, st, "survival", false); !errors.Is(err, ErrNoDataKey) {
		t.Fatalf("no key object, not create: %v", err)
	}
	dk, ev, err := old.DataKey(ctx, st, "survival", true)
	if err != nil || ev != KeyCreated {
		t.Fatalf("first run: %v, %v", ev, err)
	}
	again, ev, err := old.DataKey(ctx, st, "survival", true)
	if err != nil || again != dk || ev != KeyOpened {
		t.Fatalf("a second run got another key or event %v (%v)", ev, err)
	}
	next, _ := keysOf(t, oldID.String()) // the new identity first, the old kept
	if got, _, err := next.OpenDataKey(ctx, st, "survival"); err != nil || got != dk {
		t.Fatalf("the old identity on the new file's second line: %v", err)
	}
	if _, err := Rewrap(ctx, st, "survival", old, next, acceptKey); err != nil {
		t.Fatal(err)
	}
	if _, _, err := old.OpenDataKey(ctx, st, "survival"); !errors.Is(err, ErrWrongKey) {
		t.Errorf("the old identity after rewrap: %v, want ErrWrongKey", err)
	}
	if got, _, err := next.OpenDataKey(ctx, st, "survival"); err != nil || got != dk {
		t.Errorf("the new identity after rewrap: %v", err)
	}
	if _, _, err := next.OpenDataKey(ctx, st, "creative"); !errors.Is(err, ErrNoDataKey) {
		t.Errorf("another server: %v", err)
	}
	// A retried rekey (the new identity opens it already) succeeds and
	// leaves the object as it is.
	if wrote, err := Rewrap(ctx, st, "survival", old, next, acceptKey); err != nil || wrote {
		t.Errorf("a retried rekey: wrote %v, %v; want nothing to do", wrote, err)
	}
	if got, _, err := next.OpenDataKey(ctx, st, "survival"); err != nil || got != dk {
		t.Errorf("after a retried rekey: %v", err)
	}
}

// TestDataKeyRotatesWithTheSecret: a backup's DataKey, given a key file
// whose first identity is new and whose later line is the identity the
// object is wrapped to (the Secret rotated), rewraps the object to the new
// identity, keeps the data key, and then the new identity alone opens it;
// the next run only opens it. A file without the old identity is refused
// and the object left as it was.
func TestDataKeyRotatesWithTheSecret(t *testing.T) {
	ctx := t.Context()
	for _, tc := range []struct {
		name string
		st   Store
	}{
		{"mem", store.NewMem()},
		{"local", mustLocal(t)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, oldID := keysOf(t)
			dk, _, err := old.DataKey(ctx, tc.st, "survival", true)
			if err != nil {
				t.Fatal(err)
			}
			stranger, _ := keysOf(t)
			if _, _, err := stranger.DataKey(ctx, tc.st, "survival", true); !errors.Is(err, ErrWrongKey) ||
				!strings.Contains(err.Error(), "keep the old identity on a later line") {
				t.Fatalf("a key file without the old identity: %v, want ErrWrongKey saying how to rotate", err)
			}
			if got, _, err := old.OpenDataKey(ctx, tc.st, "survival"); err != nil || got != dk {
				t.Fatalf("the refused run changed the object: %v", err)
			}

			rotated, newID := keysOf(t, "# the old one, until the rotation is done", oldID.String())
			got, ev, err := rotated.DataKey(ctx, tc.st, "survival", true)
			if err != nil || got != dk || ev != KeyRewrapped {
				t.Fatalf("the first run after the rotation: event %v, same key %v, %v", ev, got == dk, err)
			}
			next := newOnly(t, newID)
			if got, _, err := next.OpenDataKey(ctx, tc.st, "survival"); err != nil || got != dk {
				t.Errorf("the new identity alone after the rotation: %v", err)
			}
			if _, _, err := old.OpenDataKey(ctx, tc.st, "survival"); !errors.Is(err, ErrWrongKey) {
				t.Errorf("the old identity alone after the rotation: %v, want ErrWrongKey", err)
			}
			if got, ev, err := rotated.DataKey(ctx, tc.st, "survival", true); err != nil || got != dk || ev != KeyOpened {
				t.Errorf("the next run: event %v, %v", ev, err)
			}
		})
	}
}

// TestDataKeyRotationRace: two runs after a rotation both find the object
// wrapped to the old identity; the one that takes the lock second finds
// it rewrapped already, leaves it as it is and says it only opened it.
func TestDataKeyRotationRace(t *testing.T) {
	ctx := t.Context()
	st := store.NewMem()
	_, dk, rotated, _ := rotation(t, st)
	var first KeyEvent
	racing := &lockHook{Store: st, before: func() {
		var err error
		if _, first, err = rotated.DataKey(ctx, st, "survival", true); err != nil {
			t.Errorf("the first run: %v", err)
		}
	}}
	got, ev, err := rotated.DataKey(ctx, racing, "survival", true)
	if err != nil || got != dk {
		t.Fatalf("the second run: same key %v, %v", got == dk, err)
	}
	if first != KeyRewrapped || ev != KeyOpened {
		t.Errorf("events %v (first run) and %v (second), want %v and %v", first, ev, KeyRewrapped, KeyOpened)
	}
}

// lockHook is a Store whose first Lock runs before (another run's work)
// before it locks.
type lockHook struct {
	Store
	before func()
}

func (l *lockHook) Lock(ctx context.Context, key string) (func(), error) {
	if f := l.before; f != nil {
		l.before = nil
		f()
	}
	return l.Store.Lock(ctx, key)
}

func mustLocal(t *testing.T) *store.Local {
	t.Helper()
	l, err := store.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestKeyFileSaysWhatIsWrong: a key file holding one of age's other files
// (a recipient, a passphrase-encrypted identity, a plugin identity) or an
// SSH key is refused with what it is instead, never quoted.
func TestKeyFileSaysWhatIsWrong(t *testing.T) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	secret := id.String()
	for name, tc := range map[string]struct{ content, says string }{
		"recipient":           {"# public key\n" + id.Recipient().String() + "\n", "line 2 is not an age identity (AGE-SECRET-KEY-1..., as age-keygen writes it): it is a recipient"},
		"encrypted identity":  {"age-encryption.org/v1\n-> scrypt c2FsdA 18\nc2VjcmV0\n--- bWFj\n\x00\x01binary", "line 1 is not an age identity (AGE-SECRET-KEY-1..., as age-keygen writes it): the file is itself encrypted"},
		"armored identity":    {"-----BEGIN AGE ENCRYPTED FILE-----\nYWdl\n-----END AGE ENCRYPTED FILE-----\n", "the file is itself encrypted"},
		"plugin identity":     {"AGE-PLUGIN-YUBIKEY-1QQQQQQ\n", "plugin identities"},
		"ssh key":             {"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE\n", "SSH and PEM keys are not supported"},
		"lower case identity": {strings.ToLower(secret) + "\n", "written in capitals"},
		"cut identity":        {secret[:40] + "\n", "look for a typo or a cut line"},
		"something else":      {"hunter2\n", "line 1 is not an age identity (AGE-SECRET-KEY-1..., as age-keygen writes it)\n"},
	} {
		t.Run(name, func(t *testing.T) {
			path := rawKeyFile(t, tc.content)
			_, err := LoadKeyFile(path)
			if !errors.Is(err, ErrKeyFile) {
				t.Fatalf("LoadKeyFile: %v, want ErrKeyFile", err)
			}
			if !strings.Contains(err.Error()+"\n", tc.says) || !strings.Contains(err.Error(), path) {
				t.Errorf("error %q, want it to name the file and say %q", err, tc.says)
			}
			for _, line := range strings.Split(tc.content, "\n") {
				if len(line) > 8 && !strings.HasPrefix(line, "#") && strings.Contains(err.Error(), line) {
					t.Errorf("error quotes the key file's line %q", line)
				}
			}
			if strings.Contains(strings.ToUpper(err.Error()), strings.ToUpper(secret[16:40])) {
				t.Error("error holds part of the identity")
			}
		})
	}
}

// TestIdentityGivenAsThePath: the identity itself given where the key
// file's path goes (a flag or a setting filled with the key) is refused
// without quoting it, in either case.
func TestIdentityGivenAsThePath(t *testing.T) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{id.String(), strings.ToLower(id.String()), "/etc/" + id.String()} {
		_, err := LoadKeyFile(path)
		if !errors.Is(err, ErrKeyFile) || !strings.Contains(err.Error(), "an age identity was given where the key file's path goes") {
			t.Errorf("LoadKeyFile(the identity): %v, want ErrKeyFile saying so", err)
		}
		if err != nil && strings.Contains(strings.ToUpper(err.Error()), id.String()[16:40]) {
			t.Errorf("the error quotes the identity: %v", err)
		}
	}
}

// TestKeyFileFromAnotherEditor: an identity saved with a byte order mark
// and CRLF line ends (an editor on Windows) is read as the same key.
func TestKeyFileFromAnotherEditor(t *testing.T) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	k, err := LoadKeyFile(rawKeyFile(t, "\ufeff# created: today\r\n# public key: "+id.Recipient().String()+"\r\n"+id.String()+"\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := k.recipient.(*age.X25519Recipient).String(); got != id.Recipient().String() {
		t.Errorf("recipient %s, want %s", got, id.Recipient())
	}
	// And with the mark before the identity itself.
	if _, err := LoadKeyFile(rawKeyFile(t, "\ufeff"+id.String()+"\r\n")); err != nil {
		t.Fatal(err)
	}
}

// TestKeyFileUnportable: what age's own command (age -d -i) refuses, a
// byte order mark or spaces around a line, is read here but said by
// Unportable, naming the line and never quoting it; what age reads as it
// is (CRLF line ends, comments, empty lines) is not.
func TestKeyFileUnportable(t *testing.T) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, content, want string
	}{
		{"as age-keygen writes it", "# created: today\n# public key: " + id.Recipient().String() + "\n" + id.String() + "\n", ""},
		{"CRLF and an empty line", "# c\r\n\r\n" + id.String() + "\r\n", ""},
		{"a byte order mark", "\ufeff" + id.String() + "\n", "byte order mark"},
		{"a trailing space", id.String() + " \n", "line 1 has spaces"},
		{"an indented comment", id.String() + "\n  # old key\n", "line 2 has spaces"},
		{"a line of blanks", "# c\n\t\n" + id.String() + "\n", "line 2 has spaces"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			k, err := LoadKeyFile(rawKeyFile(t, tt.content))
			if err != nil {
				t.Fatal(err)
			}
			got := k.Unportable()
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("Unportable() = %q, want %q", got, tt.want)
			}
			if strings.Contains(got, "AGE-SECRET-KEY") {
				t.Errorf("Unportable quotes the key: %q", got)
			}
		})
	}
}

// rawKeyFile writes content, as it is, to a key file of its own.
func rawKeyFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "key.txt")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestHybridRotationFile: the file a rotation makes of two hybrid
// (post-quantum) identities' files as age-keygen -pq writes them, their
// long public key comments and all (`cat new.txt old.txt`), loads: the
// new identity first, the old one read too.
func TestHybridRotationFile(t *testing.T) {
	var body strings.Builder
	var ids []*age.HybridIdentity
	for range 2 {
		id, err := age.GenerateHybridIdentity()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		fmt.Fprintf(&body, "# created: 2026-12-07T00:00:00Z\n# public key: %s\n%s\n", id.Recipient(), id)
	}
	if body.Len() <= 4096 {
		t.Fatalf("the file is %d bytes, want it over the 4096 an earlier bound allowed", body.Len())
	}
	k, err := LoadKeyFile(rawKeyFile(t, body.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(k.identities) != 2 || k.recipient.(*age.HybridRecipient).String() != ids[0].Recipient().String() {
		t.Errorf("%d identities, recipient %v: want 2, the first file's", len(k.identities), k.recipient)
	}
}

// acceptKey is a vouch (Rewrap) that accepts every key: a recorded run was
// sealed with it.
func acceptKey(context.Context, DataKey) error { return nil }
