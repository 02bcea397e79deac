package crypt

import "regexp"

// identityText matches an age identity (a secret key) in any case, whole or
// cut: its prefix (AGE-SECRET-KEY-1, AGE-SECRET-KEY-PQ-1) and at least 8
// characters of its Bech32 data. A hint that shows the prefix alone
// ("AGE-SECRET-KEY-1...") is not one.
var identityText = regexp.MustCompile(`(?i)AGE-SECRET-KEY-[A-Z0-9-]*?1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{8,}`)

// Masked is what MaskIdentities puts where an identity was.
const Masked = "AGE-SECRET-KEY-(masked)"

// MaskIdentities returns b with every age identity in it replaced by
// Masked: the one rule for what the archiver writes where others read it
// (its stderr and logs, a termination message, a failure's reason, a
// notification), whatever value a key was pasted into (a server name, a
// path, a stray argument).
func MaskIdentities(b []byte) []byte {
	return identityText.ReplaceAll(b, []byte(Masked))
}

// MaskIdentitiesString is MaskIdentities for a string.
func MaskIdentitiesString(s string) string {
	return identityText.ReplaceAllString(s, Masked)
}
