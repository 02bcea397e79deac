package naming

import (
	"regexp"
	"strings"
	"testing"

	"github.com/worldbackup/worldbackup/jobapi"
)

var dns1123Label = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

func TestWorldClaim(t *testing.T) {
	if got := WorldClaim("survival"); got != "world-survival-0" {
		t.Fatalf("WorldClaim(survival) = %q, want world-survival-0", got)
	}
}

func TestJobName(t *testing.T) {
	longServer := strings.Repeat("s", MaxServerLen)
	tests := []struct {
		name, server, kind, runID string
		want                      string // exact, or "" to check only validity
		wantPrefix                string
	}{
		{name: "valid run ID kept", server: "survival", kind: jobapi.KindBackup, runID: "20250601-0300", want: "survival-backup-20250601-0300"},
		{name: "upper case hashed", server: "survival", kind: jobapi.KindBackup, runID: "Nightly", wantPrefix: "survival-backup-nightly-"},
		{name: "dots and underscores", server: "survival", kind: jobapi.KindBackup, runID: "v1.2_3", wantPrefix: "survival-backup-v1-2-3-"},
		{name: "leading dash-like chars", server: "s", kind: jobapi.KindBackup, runID: "_x_", wantPrefix: "s-backup-x-"},
		{name: "only symbols", server: "s", kind: jobapi.KindBackup, runID: "0._", wantPrefix: "s-backup-0-"},
		{name: "long run ID truncated", server: "survival", kind: jobapi.KindBackup, runID: strings.Repeat("a", 128), wantPrefix: "survival-backup-aaaa"},
		{name: "longest server backup", server: longServer, kind: jobapi.KindBackup, runID: strings.Repeat("b", 100)},
		{name: "longest server restore", server: longServer, kind: jobapi.KindRestore, runID: strings.Repeat("B", 100)},
		{name: "restore kind", server: "creative", kind: jobapi.KindRestore, runID: "r1", want: "creative-restore-r1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := JobName(tt.server, tt.kind, tt.runID)
			if len(got) > MaxNameLen || !dns1123Label.MatchString(got) {
				t.Fatalf("JobName() = %q (%d chars): not a DNS-1123 label of at most 63", got, len(got))
			}
			if tt.want != "" && got != tt.want {
				t.Fatalf("JobName() = %q, want %q", got, tt.want)
			}
			if !strings.HasPrefix(got, tt.wantPrefix) {
				t.Fatalf("JobName() = %q, want prefix %q", got, tt.wantPrefix)
			}
			if again := JobName(tt.server, tt.kind, tt.runID); again != got {
				t.Fatalf("JobName() not deterministic: %q then %q", got, again)
			}
		})
	}
}

func TestJobNameDistinct(t *testing.T) {
	runIDs := []string{"nightly", "Nightly", "NIGHTLY", "night.ly", "night_ly", "night-ly",
		strings.Repeat("a", 127) + "b", strings.Repeat("a", 127) + "c"}
	seen := map[string]string{}
	for _, r := range runIDs {
		n := JobName("survival", jobapi.KindBackup, r)
		if prev, ok := seen[n]; ok {
			t.Fatalf("run IDs %q and %q both give Job name %q", prev, r, n)
		}
		seen[n] = r
	}
}

func TestLabelValue(t *testing.T) {
	valid := regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`)
	tests := []struct {
		name, in, want string
	}{
		{name: "valid kept", in: "Survival_1.2", want: "Survival_1.2"},
		{name: "empty kept", in: "", want: ""},
		{name: "63 kept", in: strings.Repeat("x", 63), want: strings.Repeat("x", 63)},
		{name: "64 hashed", in: strings.Repeat("x", 64)},
		{name: "slash", in: "a/b"},
		{name: "leading dot", in: ".a"},
		{name: "only symbols", in: "///"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := LabelValue(tt.in)
			if len(got) > 63 || !valid.MatchString(got) {
				t.Fatalf("LabelValue(%q) = %q: not a valid label value", tt.in, got)
			}
			if tt.want != "" || tt.in == "" {
				if got != tt.want {
					t.Fatalf("LabelValue(%q) = %q, want %q", tt.in, got, tt.want)
				}
			} else if got == tt.in {
				t.Fatalf("LabelValue(%q) returned its invalid input", tt.in)
			}
		})
	}
}
