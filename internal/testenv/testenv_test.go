package testenv

import (
	"strings"
	"testing"
)

// recorder is a testing.TB that records Fatalf and Skip instead of ending
// the test, so Require's two outcomes can be observed.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper()                        {}
func (r *recorder) Fatalf(format string, a ...any) { r.fatal = format }
func (r *recorder) Skip(a ...any)                  { r.skip = a[0].(string) }

func TestRequire(t *testing.T) {
	tests := []struct {
		name      string
		ci        string
		ok        bool
		wantFatal bool
		wantSkip  bool
	}{
		{"present in CI", "true", true, false, false},
		{"present elsewhere", "", true, false, false},
		{"missing in CI fails", "true", false, true, false},
		{"missing elsewhere skips", "", false, false, true},
		{"CI=false is not CI", "false", false, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			r := &recorder{TB: t}
			Require(r, tc.ok, "no frobnicator", "apt-get install -y frob")
			if (r.fatal != "") != tc.wantFatal || (r.skip != "") != tc.wantSkip {
				t.Fatalf("fatal=%q skip=%q, want fatal=%v skip=%v", r.fatal, r.skip, tc.wantFatal, tc.wantSkip)
			}
			if tc.wantSkip && !strings.Contains(r.skip, "apt-get install -y frob") {
				t.Errorf("skip message %q does not say how to install it", r.skip)
			}
		})
	}
}

func TestRequireCommandsNamesTheMissingOnes(t *testing.T) {
	t.Setenv("CI", "")
	r := &recorder{TB: t}
	RequireCommands(r, "sh", "sh", "no-such-command-worldbackup")
	if !strings.Contains(r.skip, "no-such-command-worldbackup") || strings.Contains(r.skip, "sh,") {
		t.Errorf("skip message %q should name only the missing command", r.skip)
	}
}
