// Package naming holds the one set of naming rules of the worldbackup
// components: the world claim of a server, the Kubernetes names of backup and
// restore Jobs, and label values derived from free-form strings. Every rule is
// deterministic, so render mode writes stable file names and the same inputs
// always give the same Job.
package naming

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"

	"github.com/worldbackup/worldbackup/jobapi"
)

// MaxNameLen is the longest Kubernetes Job name (a DNS-1123 label; the Job
// controller also puts it in a pod label, which allows 63).
const MaxNameLen = jobapi.MaxLabelLen

// HashLen is the length of the hexadecimal hash that keeps shortened names
// and label values unique.
const HashLen = jobapi.JobHashLen

// MaxServerLen is the longest server name the components accept
// (jobapi.MaxJobServerLen): the longest Job kind and the shortest suffix (a
// bare hash) must still fit in MaxNameLen: len("<server>-restore-<hash>") ≤ 63.
const MaxServerLen = jobapi.MaxJobServerLen

var (
	dnsLabelRE   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	labelValueRE = regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`)
)

// WorldClaim returns the name of the world PersistentVolumeClaim of server,
// in the StatefulSet form "world-<server>-0" (claim template "world",
// StatefulSet <server>, ordinal 0).
func WorldClaim(server string) string {
	return "world-" + server + "-0"
}

// GamePod returns the name of the game server's pod, "<server>-0": the first
// pod of its StatefulSet, which mounts WorldClaim(server).
func GamePod(server string) string {
	return server + "-0"
}

// JobName returns the Job name "<server>-<kind>-<suffix>", a DNS-1123 label of
// at most 63 characters when server is a DNS-1123 label of at most
// MaxServerLen characters. The suffix is derived from runID: the run ID itself
// when it is already a valid lowercase label part that fits; otherwise its
// sanitized form (lower-cased, other characters turned into '-'), truncated to
// fit, followed by '-' and a short hash of the exact run ID. Run IDs that
// differ only in case or in replaced characters therefore still give
// different names, and a new run ID always gives a new Job name.
//
// Names are not unique across all inputs, and stay so, since another rule
// would rename every existing Job (each a replacement at the next up):
// a run ID that is itself a hashed suffix ("nightly-ab6b5a4d", the suffix
// of "Nightly") gives the name of the run ID it was hashed from, and '-'
// joins server, kind and suffix, so server "a", kind backup, run ID
// "restore-x" and server "a-backup", kind restore, run ID "x" share a name.
// Both need run IDs or server names made to meet, and a new run ID avoids
// them. The one collision ordinary inputs meet, with the Jobs a schedule's
// CronJob names (a-backup-sched-29412345), the components refuse
// (jobspec.IsScheduledJobName).
func JobName(server, kind, runID string) string {
	prefix := server + "-" + kind + "-"
	budget := MaxNameLen - len(prefix)
	if len(runID) <= budget && dnsLabelRE.MatchString(runID) {
		return prefix + runID
	}
	h := shortHash(runID)
	keep := budget - len(h) - 1
	s := strings.Trim(sanitize(strings.ToLower(runID), isDNSChar), "-")
	if keep <= 0 || s == "" {
		return prefix + h
	}
	if len(s) > keep {
		s = strings.TrimRight(s[:keep], "-")
	}
	return prefix + s + "-" + h
}

// LabelValue returns s when it is a valid Kubernetes label value (at most 63
// characters from A-Z a-z 0-9 '-' '_' '.', starting and ending with a letter
// or digit, or empty). Otherwise it returns a valid label value derived from
// s: its sanitized form, truncated, followed by '-' and a short hash of s.
func LabelValue(s string) string {
	if len(s) <= MaxNameLen && labelValueRE.MatchString(s) {
		return s
	}
	h := shortHash(s)
	keep := MaxNameLen - len(h) - 1
	v := strings.Trim(sanitize(s, isLabelChar), "-_.")
	if len(v) > keep {
		v = strings.TrimRight(v[:keep], "-_.")
	}
	if v == "" {
		return h
	}
	return v + "-" + h
}

// IsDNSLabel reports whether s is a DNS-1123 label of at most max characters.
func IsDNSLabel(s string, max int) bool {
	return len(s) <= max && dnsLabelRE.MatchString(s)
}

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:HashLen]
}

// sanitize replaces each run of characters that ok rejects with one '-'.
func sanitize(s string, ok func(byte) bool) string {
	var b strings.Builder
	dash := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if ok(c) {
			b.WriteByte(c)
			dash = false
			continue
		}
		if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	return b.String()
}

func isDNSChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-'
}

func isLabelChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
}
