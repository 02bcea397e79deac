package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/worldbackup/worldbackup/internal/pgtest"
)

// TestFlagOverridingConfigWarns shows that a key of felis.toml that a flag
// replaces is named in a warning (a Job's arguments always give
// --archive-root, --format and --compression, so those keys of its config Secret
// never take effect; --encryption-key-file with the encryption input), and
// that the flag wins.
func TestFlagOverridingConfigWarns(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateWorld(t, e.world)
	writeConfig(t, e.config, fmt.Sprintf("[database]\nurl = %q\n[archive]\nlocal_path = \"/nonexistent\"\ncompression = \"gzip\"\nformat = \"chunked\"\n"+
		"encryption_key_file = \"/nonexistent/age-identity\"\n", e.url))
	key, _ := keyFile(t)

	res := archiver(t, e.backupArgs("run-override", "--compression", "zstd", "--format", "tar", "--encryption-key-file", key)...)
	if res.code != 0 {
		t.Fatalf("backup exited %d:\n%s", res.code, res.stderr)
	}
	for _, key := range []string{"archive.compression", "archive.local_path", "archive.format", "archive.encryption_key_file"} {
		if !strings.Contains(res.stderr, `"key":"`+key+`"`) || !strings.Contains(res.stderr, "overrides a key of felis.toml") {
			t.Errorf("no warning names %s:\n%s", key, res.stderr)
		}
	}
	if _, err := os.Stat(e.archivePath("run-override", ".tar.zst.age")); err != nil {
		t.Errorf("the flags' format, compression and key file did not win: %v", err)
	}

	// A key no flag replaces draws no warning.
	writeConfig(t, e.config, fmt.Sprintf("[database]\nurl = %q\n[archive]\nformat = \"tar\"\ncompression = \"gzip\"\n", e.url))
	res = archiver(t, e.backupArgs("run-no-override")...)
	if res.code != 0 {
		t.Fatalf("backup exited %d:\n%s", res.code, res.stderr)
	}
	if strings.Contains(res.stderr, "overrides a key of felis.toml") {
		t.Errorf("a warning without an overriding flag:\n%s", res.stderr)
	}
}

// TestCompressionWithChunked: compression is a setting of the tar format.
// With the chunked format, the default, a --compression flag or a
// felis.toml compression is refused (exit 2, naming the fix, nothing
// written); a --format chunked flag over a file that sets compression (a
// Job's arguments over its config Secret) only warns that the key has no
// effect.
func TestCompressionWithChunked(t *testing.T) {
	e := newEnv(t, pgtest.URL(t))
	generateWorld(t, e.world)
	plain := fmt.Sprintf("[database]\nurl = %q\n", e.url)
	tests := []struct {
		name, config string
		args         []string
		code         int
		want         string
	}{
		{"the flag with the default format", plain, []string{"--compression", "gzip"}, 2,
			`--compression "gzip": compression is a setting of the tar format: chunked compresses each blob with zstd when that helps: leave it out, or add --format tar`},
		{"the flag with --format chunked", plain, []string{"--compression", "zstd", "--format", "chunked"}, 2, `--compression "zstd": compression is a setting of the tar format`},
		{"the file's without a format", plain + "[archive]\ncompression = \"none\"\n", nil, 2,
			`[archive] compression = "none" with no format, so chunked, the default: compression is a setting of the tar format: ` +
				`chunked compresses each blob with zstd when that helps: remove compression, or set format = "tar" in [archive]`},
		{"the file's with its format chunked", plain + "[archive]\nformat = \"chunked\"\ncompression = \"gzip\"\n", nil, 2,
			`[archive] compression = "gzip" with format = "chunked"`},
		{"the file's under a --format chunked flag", plain + "[archive]\ncompression = \"gzip\"\n", []string{"--format", "chunked"}, 0,
			`"key":"archive.compression"`},
		{"the file's with its format tar", plain + "[archive]\nformat = \"tar\"\ncompression = \"gzip\"\n", nil, 0, ""},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			writeConfig(t, e.config, tt.config)
			runID := fmt.Sprintf("c%d", i)
			before := len(rows(t, e.url))
			res := archiver(t, e.backupArgs(runID, tt.args...)...)
			if res.code != tt.code || !strings.Contains(res.stderr, tt.want) {
				t.Fatalf("backup exited %d, want %d with %q:\n%s", res.code, tt.code, tt.want, res.stderr)
			}
			if tt.code != 0 {
				if n := len(rows(t, e.url)); n != before {
					t.Fatalf("a refused backup recorded a run: %d rows, were %d", n, before)
				}
				if _, err := os.Stat(filepath.Join(e.root, "_chunked", "runs", "survival", runID+".manifest")); !os.IsNotExist(err) {
					t.Fatalf("a refused backup wrote its manifest (%v)", err)
				}
				return
			}
			if tt.want != "" && !strings.Contains(res.stderr, "has no effect on a chunked run") {
				t.Errorf("no warning that the key has no effect:\n%s", res.stderr)
			}
		})
	}
}
