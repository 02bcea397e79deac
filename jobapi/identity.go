package jobapi

import "regexp"

// identityText matches an age identity (a secret key) in any case, whole,
// cut or mistyped: its prefix (AGE-SECRET-KEY-1, AGE-SECRET-KEY-PQ-1) and
// at least 8 letters or digits of its data (Bech32 has no 1, b, i or o,
// which a hand-copied key may hold all the same). A hint that shows the
// prefix alone ("AGE-SECRET-KEY-1...") is not one.
var identityText = regexp.MustCompile(`(?i)AGE-SECRET-KEY-[A-Z0-9-]*?1[0-9A-Z]{8,}`)

// MaskedIdentity is what MaskIdentities puts where an identity was.
const MaskedIdentity = "AGE-SECRET-KEY-(masked)"

// HoldsIdentity reports whether s holds an age identity (a key pasted
// where another value goes): CheckRunID refuses such a run ID, which would
// name a file in the store and a row in the catalog.
func HoldsIdentity(s string) bool { return identityText.MatchString(s) }

// MaskIdentities returns b with every age identity in it replaced by
// MaskedIdentity: the one rule for what the archiver writes where others
// read it (its stderr and logs, a termination message, a failure's reason,
// a notification), whatever value a key was pasted into (a server name, a
// path, a stray argument).
func MaskIdentities(b []byte) []byte { return identityText.ReplaceAll(b, []byte(MaskedIdentity)) }

// MaskIdentitiesString is MaskIdentities for a string.
func MaskIdentitiesString(s string) string { return identityText.ReplaceAllString(s, MaskedIdentity) }
