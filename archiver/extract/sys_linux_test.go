//go:build linux

package extract

import "testing"

func TestIsMountPoint(t *testing.T) {
	if !isMountPoint("/") {
		t.Error(`isMountPoint("/") = false`)
	}
	if isMountPoint(t.TempDir()) {
		t.Error("a fresh temp folder is reported as a mount point")
	}
	if got := unescapeMountinfo(`/mnt/with\040space\134x`); got != `/mnt/with space\x` {
		t.Errorf("unescapeMountinfo = %q", got)
	}
}
