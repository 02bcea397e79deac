package safelink

import "testing"

func TestCheckSymlinkTarget(t *testing.T) {
	for _, tc := range []struct {
		name, target string
		ok           bool
	}{
		{"l", "region/r.0.0.mca", true},
		{"l", "./a", true},
		{"l", "missing", true}, // dangling inside is fine
		{"a/l", "../b", true},
		{"a/b/l", "../../c/d", true},
		{"a/b/l", "../..", true},
		{"l", "..", false},
		{"l", "../x", false},
		{"a/l", "../../x", false},
		{"l", "/etc/passwd", false},
		{"l", "a/../b", false},
		{"l", "up/..", false},
		{"a/l", ".././../x", false},
		{"l", "", false},
		{"l", "a\x00", false},
	} {
		err := Check(tc.name, tc.target)
		if (err == nil) != tc.ok {
			t.Errorf("Check(%q, %q) = %v, want ok=%v", tc.name, tc.target, err, tc.ok)
		}
	}
}
