package main

import (
	"bytes"
	"encoding/json"
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

func TestMutate(t *testing.T) {
	t.Parallel()
	world := filepath.Join(t.TempDir(), "server")
	var out, errOut bytes.Buffer
	if code := run([]string{"-size", "4MiB", "-seed", "2", world}, &out, &errOut); code != 0 {
		t.Fatalf("generating: exit %d: %s", code, errOut.String())
	}
	for _, tc := range []struct {
		name       string
		args       []string
		code       int
		wantErrOut string
	}{
		{"no world", []string{"-seed", "1"}, 2, "want -world DIR"},
		{"extra argument", []string{"-world", world, "more"}, 2, "no other arguments"},
		{"share above 100%", []string{"-world", world, "-regions", "120%"}, 2, "want a share"},
		{"share not a number", []string{"-world", world, "-chunks", "some"}, 2, "want a share"},
		{"too many new chunks", []string{"-world", world, "-new-chunks", "5000"}, 2, "new chunks"},
		{"not a world", []string{"-world", t.TempDir()}, 2, "no world/ folder"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := run(append([]string{"mutate"}, tc.args...), &out, &errOut); code != tc.code || !strings.Contains(errOut.String(), tc.wantErrOut) {
				t.Errorf("exit %d (want %d), stderr %q (want %q)", code, tc.code, errOut.String(), tc.wantErrOut)
			}
		})
	}
	t.Run("reports JSON", func(t *testing.T) {
		var out, errOut bytes.Buffer
		code := run([]string{"mutate", "-world", world, "-seed", "4", "-regions", "50%", "-chunks", "0.2", "-new-players", "0"}, &out, &errOut)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut.String())
		}
		var rep struct {
			RegionFiles  int   `json:"region_files"`
			PlayersNew   int   `json:"players_new"`
			ChangedBytes int64 `json:"changed_bytes"`
		}
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatalf("stdout %q: %v", out.String(), err)
		}
		if rep.RegionFiles < 1 || rep.PlayersNew != 0 || rep.ChangedBytes <= 0 {
			t.Errorf("report %+v: want region files touched, no new players, bytes changed", rep)
		}
	})
}
