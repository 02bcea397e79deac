package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBackupS3SettingsRefused: S3 settings that can never work (a garbage
// region, an endpoint with a query, a fragment, a bad port or credentials
// in it) are configuration errors (exit 2) before anything runs, naming
// the flag or the felis.toml key, and a secret typed into the endpoint is
// never echoed: not on stderr, not in the termination message.
func TestBackupS3SettingsRefused(t *testing.T) {
	dir := t.TempDir()
	world := filepath.Join(dir, "world")
	if err := os.MkdirAll(world, 0o755); err != nil {
		t.Fatal(err)
	}
	access, secretFile := filepath.Join(dir, "access-key"), filepath.Join(dir, "secret-key")
	writeConfig(t, access, "AKIDEXAMPLE\n")
	writeConfig(t, secretFile, "wJalrXUtnFEMI\n")
	const typed = "Typed-S3cret" // the secret a user typed into the endpoint URL
	withArchive := func(name, archive string) string {
		p := filepath.Join(dir, name+".toml")
		writeConfig(t, p, fmt.Sprintf("[database]\nurl = \"postgres://u@127.0.0.1:1/x\"\n[archive]\nstore = \"s3://felis-backups/worlds\"\n"+
			"access_key_file = %q\nsecret_key_file = %q\n%s\n", access, secretFile, archive))
		return p
	}
	plain := withArchive("plain", "")
	tests := []struct {
		name   string
		config string
		flags  []string
		want   []string
	}{
		{"flag endpoint with a query", plain, []string{"--s3-endpoint", "http://127.0.0.1:9000?x=1"}, []string{"--s3-endpoint", "no path, query or fragment"}},
		{"flag endpoint with a fragment", plain, []string{"--s3-endpoint", "http://127.0.0.1:9000#x"}, []string{"--s3-endpoint", "no path, query or fragment"}},
		{"flag endpoint with a bad port", plain, []string{"--s3-endpoint", "http://127.0.0.1:99999"}, []string{"--s3-endpoint", "port must be"}},
		{"flag endpoint with credentials", plain, []string{"--s3-endpoint", "http://AKID:" + typed + "@127.0.0.1:9000/x"}, []string{"--s3-endpoint", "has credentials in it"}},
		{"flag endpoint with credentials holding a slash", plain, []string{"--s3-endpoint", "http://AKID:ab/" + typed + "@127.0.0.1:9000"}, []string{"--s3-endpoint", "has credentials in it"}},
		{"flag garbage region", plain, []string{"--s3-region", "us east 1/../x"}, []string{"--s3-region", "is not a region name"}},
		{"key endpoint with a query", withArchive("query", `endpoint = "http://127.0.0.1:9000?x=1"`), nil, []string{"query.toml", "[archive] endpoint", "no path, query or fragment"}},
		{"key endpoint with credentials", withArchive("creds", `endpoint = "http://AKID:`+typed+`@127.0.0.1:9000/x"`), nil, []string{"creds.toml", "[archive] endpoint", "has credentials in it"}},
		{"key garbage region", withArchive("region", `region = "us east 1"`), nil, []string{"region.toml", "[archive] region", "is not a region name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tlog := filepath.Join(t.TempDir(), "termination-log")
			args := append([]string{"backup", "--server", "survival", "--run-id", "r1", "--world", world,
				"--config", tt.config, "--termination-log", tlog}, tt.flags...)
			r := archiver(t, args...)
			out := r.stdout + r.stderr
			if b, err := os.ReadFile(tlog); err == nil {
				out += string(b)
			}
			if r.code != 2 {
				t.Fatalf("exit %d, want 2:\n%s", r.code, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if strings.Contains(out, typed) {
				t.Errorf("the output echoes the secret typed into the endpoint:\n%s", out)
			}
		})
	}
}
