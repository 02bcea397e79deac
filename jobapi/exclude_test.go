package jobapi

import (
	"strings"
	"testing"
)

func TestParseExclude(t *testing.T) {
	tests := []struct {
		name, pattern, glob string
		dirOnly             bool
		wantErr             string
	}{
		{name: "file glob", pattern: "*.jar", glob: "*.jar"},
		{name: "directory", pattern: "cache/", glob: "cache", dirOnly: true},
		{name: "rooted", pattern: "/logs/", glob: "logs", dirOnly: true},
		{name: "dot slash", pattern: "./region/r.[0-9]*.mca", glob: "region/r.[0-9]*.mca"},
		{name: "empty", pattern: "", wantErr: "matches nothing"},
		{name: "only slash", pattern: "/", wantErr: "matches nothing"},
		{name: "only dot slash", pattern: "./", wantErr: "matches nothing"},
		{name: "unclosed bracket", pattern: "[abc", wantErr: `"[abc" is not a glob`},
		{name: "bad range", pattern: "[a-", wantErr: `"[a-" is not a glob`},
		{name: "lone backslash", pattern: `cache\`, wantErr: "is not a glob"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			glob, dirOnly, err := ParseExclude(tt.pattern)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseExclude(%q) = %v, want an error containing %q", tt.pattern, err, tt.wantErr)
				}
				return
			}
			if err != nil || glob != tt.glob || dirOnly != tt.dirOnly {
				t.Fatalf("ParseExclude(%q) = %q, %v, %v; want %q, %v", tt.pattern, glob, dirOnly, err, tt.glob, tt.dirOnly)
			}
		})
	}
}
