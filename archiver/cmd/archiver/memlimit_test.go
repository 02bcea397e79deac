package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSoftMemoryLimit(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name  string
		files []string
		want  int64
	}{
		{"no cgroup file", []string{filepath.Join(dir, "missing")}, DefaultSoftMemoryLimit},
		{"v2 without a limit", []string{file("v2max", "max\n")}, DefaultSoftMemoryLimit},
		{"v1 without a limit", []string{file("v1", "9223372036854771712\n")}, DefaultSoftMemoryLimit},
		{"a limit above the default", []string{file("1gi", "1073741824\n")}, DefaultSoftMemoryLimit},
		{"a limit below the default: 90% of it", []string{file("64mi", "67108864\n")}, 67108864 / 10 * 9},
		{"garbage, then a limit", []string{file("junk", "lots"), file("32mi", "33554432")}, 33554432 / 10 * 9},
		{"a huge file is read bounded", []string{file("huge", string(make([]byte, 1<<20)))}, DefaultSoftMemoryLimit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := softMemoryLimit(containerMemoryLimit(tt.files)); got != tt.want {
				t.Fatalf("soft memory limit = %d, want %d", got, tt.want)
			}
		})
	}
}
