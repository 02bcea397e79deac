package crypt

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
		{"a key", "server name \"" + key + "\" is invalid", "server name \"" + Masked + "\" is invalid"},
		{"a hybrid key", "/tmp/" + pq.String() + "/felis.toml", "/tmp/" + Masked + "/felis.toml"},
		{"lower case", "unknown command " + strings.ToLower(key), "unknown command " + Masked},
		{"two keys", key + " " + key, Masked + " " + Masked},
		{"a cut key", "x" + key[:len("AGE-SECRET-KEY-1")+8], "x" + Masked},
		// What does not hide a key stays readable.
		{"the hint", "put age-keygen's output there (AGE-SECRET-KEY-1...)", "put age-keygen's output there (AGE-SECRET-KEY-1...)"},
		{"masked already", Masked, Masked},
		{"seven characters", key[:len("AGE-SECRET-KEY-1")+7] + ".", key[:len("AGE-SECRET-KEY-1")+7] + "."},
		{"a recipient", x.Recipient().String(), x.Recipient().String()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := MaskIdentitiesString(tc.in); got != tc.want {
				t.Errorf("MaskIdentitiesString(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if got := string(MaskIdentities([]byte(tc.in))); got != tc.want {
				t.Errorf("MaskIdentities(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
