package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	t.Parallel()
	nonEmpty := t.TempDir()
	if err := os.WriteFile(filepath.Join(nonEmpty, "keep"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		args       func(dir string) []string
		code       int
		wantOut    string
		wantErrOut string
	}{
		{"writes a world", func(d string) []string { return []string{"-size", "2MiB", "-seed", "3", d} }, 0, "files", ""},
		{"no folder", func(string) []string { return []string{"-size", "2MiB"} }, 2, "", "exactly one DIR"},
		{"two folders", func(d string) []string { return []string{d, d} }, 2, "", "exactly one DIR"},
		{"bad size", func(d string) []string { return []string{"-size", "lots", d} }, 2, "", "-size"},
		{"too small", func(d string) []string { return []string{"-size", "1KiB", d} }, 2, "", "below the minimum"},
		{"negative players", func(d string) []string { return []string{"-players", "-1", d} }, 2, "", "negative"},
		{"unknown flag", func(d string) []string { return []string{"-frobnicate", d} }, 2, "", "frobnicate"},
		{"non-empty folder", func(string) []string { return []string{"-size", "2MiB", nonEmpty} }, 1, "", "not empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "server")
			var out, errOut bytes.Buffer
			code := run(tc.args(dir), &out, &errOut)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tc.code, errOut.String())
			}
			if !strings.Contains(out.String(), tc.wantOut) || !strings.Contains(errOut.String(), tc.wantErrOut) {
				t.Errorf("stdout %q (want %q), stderr %q (want %q)", out.String(), tc.wantOut, errOut.String(), tc.wantErrOut)
			}
			if tc.code == 0 {
				if _, err := os.Stat(filepath.Join(dir, "world", "level.dat")); err != nil {
					t.Errorf("no world written: %v", err)
				}
			}
		})
	}
}
