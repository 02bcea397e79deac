package main

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/worldbackup/worldbackup/internal/pgtest"
)

// TestFlagOverridingConfigWarns shows that a key of felis.toml that a flag
// replaces is named in a warning (a Job's arguments always give
// --archive-root, --format and --compression, so those keys of its config Secret
// never take effect), and that the flag wins.
func TestFlagOverridingConfigWarns(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateWorld(t, e.world)
	writeConfig(t, e.config, fmt.Sprintf("[database]\nurl = %q\n[archive]\nlocal_path = \"/nonexistent\"\ncompression = \"gzip\"\nformat = \"chunked\"\n", e.url))

	res := archiver(t, e.backupArgs("run-override", "--compression", "zstd", "--format", "tar")...)
	if res.code != 0 {
		t.Fatalf("backup exited %d:\n%s", res.code, res.stderr)
	}
	for _, key := range []string{"archive.compression", "archive.local_path", "archive.format"} {
		if !strings.Contains(res.stderr, `"key":"`+key+`"`) || !strings.Contains(res.stderr, "overrides a key of felis.toml") {
			t.Errorf("no warning names %s:\n%s", key, res.stderr)
		}
	}
	if _, err := os.Stat(e.archivePath("run-override", ".tar.zst")); err != nil {
		t.Errorf("the flags' format and compression did not win: %v", err)
	}

	// A key no flag replaces draws no warning.
	writeConfig(t, e.config, fmt.Sprintf("[database]\nurl = %q\n[archive]\ncompression = \"gzip\"\n", e.url))
	res = archiver(t, e.backupArgs("run-no-override")...)
	if res.code != 0 {
		t.Fatalf("backup exited %d:\n%s", res.code, res.stderr)
	}
	if strings.Contains(res.stderr, "overrides a key of felis.toml") {
		t.Errorf("a warning without an overriding flag:\n%s", res.stderr)
	}
}
