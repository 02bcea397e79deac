package jobapi

import (
	"strings"
	"testing"

	"filippo.io/age"
)

func TestMaskIdentities(t *testing.T) {
	x, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	pq, err := age.GenerateHybridIdentity()
	if err != nil {
		t.Fatal(err)
	}
	key := x.String()
	for _, tc := range []struct {
		name, in, want string
	}{
		{"a key", "server name \"" + key + "\" is invalid", "server name \"" + MaskedIdentity + "\" is invalid"},
		{"a hybrid key", "/tmp/" + pq.String() + "/felis.toml", "/tmp/" + MaskedIdentity + "/felis.toml"},
		{"lower case", "unknown command " + strings.ToLower(key), "unknown command " + MaskedIdentity},
		{"two keys", key + " " + key, MaskedIdentity + " " + MaskedIdentity},
		{"a cut key", "x" + key[:len("AGE-SECRET-KEY-1")+8], "x" + MaskedIdentity},
		// What does not hide a key stays readable.
		{"the hint", "put age-keygen's output there (AGE-SECRET-KEY-1...)", "put age-keygen's output there (AGE-SECRET-KEY-1...)"},
		{"masked already", MaskedIdentity, MaskedIdentity},
		{"seven characters", key[:len("AGE-SECRET-KEY-1")+7] + ".", key[:len("AGE-SECRET-KEY-1")+7] + "."},
		{"a recipient", x.Recipient().String(), x.Recipient().String()},
		// A hand-copied key with letters Bech32 does not use.
		{"a typo", "AGE-SECRET-KEY-1OBI" + key[len("AGE-SECRET-KEY-1")+3:], MaskedIdentity},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := MaskIdentitiesString(tc.in); got != tc.want {
				t.Errorf("MaskIdentitiesString(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if got := string(MaskIdentities([]byte(tc.in))); got != tc.want {
				t.Errorf("MaskIdentities(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if got, want := HoldsIdentity(tc.in), tc.want != tc.in; got != want {
				t.Errorf("HoldsIdentity(%q) = %v, want %v", tc.in, got, want)
			}
		})
	}
}

// TestRunIDHoldingAKey: a run ID that holds an age identity (it fits the
// run ID's characters) is refused without being quoted.
func TestRunIDHoldingAKey(t *testing.T) {
	x, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{x.String(), "nightly-" + x.String(), strings.ToLower(x.String())} {
		err := CheckRunID(id)
		if err == nil || !strings.Contains(err.Error(), "holds an age secret key") || HoldsIdentity(err.Error()) {
			t.Errorf("CheckRunID(a key) = %v, want it refused, the key not quoted", err)
		}
	}
	if err := CheckRunID("age-secret-key-1"); err != nil {
		t.Errorf("CheckRunID(the prefix alone) = %v, want ok", err)
	}
}
