package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name        string
		args        []string
		epoch       string
		wantErr     string
		wantCreated time.Time
		wantTag     string
	}{
		{
			name:        "unix seconds",
			args:        []string{"-binary", "a", "-version", "v1.2.3", "-created", "1700000000"},
			wantCreated: time.Unix(1700000000, 0),
			wantTag:     "worldbackup-archiver:v1.2.3",
		},
		{
			name:        "RFC 3339",
			args:        []string{"-binary", "a", "-created", "2025-01-31T12:00:00+01:00"},
			wantCreated: time.Date(2025, 1, 31, 11, 0, 0, 0, time.UTC),
			wantTag:     "worldbackup-archiver:dev",
		},
		{
			name:        "SOURCE_DATE_EPOCH when -created is absent",
			args:        []string{"-binary", "a", "-tag", "example.test/x:y"},
			epoch:       "1600000000",
			wantCreated: time.Unix(1600000000, 0),
			wantTag:     "example.test/x:y",
		},
		{
			name:        "-created wins over SOURCE_DATE_EPOCH",
			args:        []string{"-binary", "a", "-created", "5"},
			epoch:       "1600000000",
			wantCreated: time.Unix(5, 0),
			wantTag:     "worldbackup-archiver:dev",
		},
		{name: "no binary", args: []string{"-version", "v1"}, wantErr: "-binary is required"},
		{name: "bad time", args: []string{"-binary", "a", "-created", "yesterday"}, wantErr: "neither Unix seconds nor RFC 3339"},
		{name: "negative time", args: []string{"-binary", "a", "-created", "-5"}, wantErr: "negative"},
		{name: "positional arguments", args: []string{"-binary", "a", "extra"}, wantErr: "unexpected arguments"},
		{name: "push needs no binary", args: []string{"-push", "example.test/x:y"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			c, err := parse(tt.args, tt.epoch, &stderr)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.wantCreated.IsZero() && !c.build.Created.Equal(tt.wantCreated) {
				t.Errorf("created %s, want %s", c.build.Created, tt.wantCreated)
			}
			if tt.wantTag != "" && c.tag != tt.wantTag {
				t.Errorf("tag %q, want %q", c.tag, tt.wantTag)
			}
		})
	}
}

func TestRunExitCodes(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		args []string
		want int
	}{
		{"usage error", []string{"-created", "x"}, 2},
		{"bad tag", []string{"-binary", "a", "-tag", "UPPER/Case:x"}, 2},
		{"missing binary", []string{"-binary", dir + "/nope", "-out", dir}, 1},
		{"push a digest", []string{"-push", "example.test/x@sha256:" + strings.Repeat("0", 64)}, 2},
		{"push without a layout", []string{"-push", "example.test/x:y", "-out", dir}, 1},
		{"help", []string{"-h"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if got := run(t.Context(), tt.args, "", &stdout, &stderr); got != tt.want {
				t.Errorf("exit %d, want %d; stderr:\n%s", got, tt.want, stderr.String())
			}
		})
	}
}
