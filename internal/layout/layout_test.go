package layout

import (
	"strings"
	"testing"
)

func TestArchiveRef(t *testing.T) {
	tests := []struct {
		name, root, server, runID, compression string
		want                                   string
		wantErr                                string
	}{
		{name: "zstd", root: "/backups", server: "survival", runID: "r1", compression: "zstd", want: "/backups/survival/r1.tar.zst"},
		{name: "gzip", root: "/backups", server: "survival", runID: "r1", compression: "gzip", want: "/backups/survival/r1.tar.gz"},
		{name: "none", root: "/backups", server: "survival", runID: "r1", compression: "none", want: "/backups/survival/r1.tar"},
		{name: "root cleaned", root: "/data/backups/", server: "s", runID: "2025-06-01T03.00_Z", compression: "zstd", want: "/data/backups/s/2025-06-01T03.00_Z.tar.zst"},
		{name: "relative root", root: "backups", server: "s", runID: "r", compression: "zstd", wantErr: "not an absolute path"},
		{name: "unknown compression", root: "/b", server: "s", runID: "r", compression: "xz", wantErr: `compression "xz" is not supported`},
		{name: "run ID with slash", root: "/b", server: "s", runID: "a/b", compression: "zstd", wantErr: `run ID "a/b" is invalid`},
		{name: "run ID dot-dot", root: "/b", server: "s", runID: "..", compression: "zstd", wantErr: "run ID"},
		{name: "run ID leading dot", root: "/b", server: "s", runID: ".hidden", compression: "zstd", wantErr: "run ID"},
		{name: "run ID too long", root: "/b", server: "s", runID: strings.Repeat("a", 129), compression: "zstd", wantErr: "run ID"},
		{name: "run ID longest", root: "/b", server: "s", runID: strings.Repeat("a", 128), compression: "none", want: "/b/s/" + strings.Repeat("a", 128) + ".tar"},
		{name: "server upper case", root: "/b", server: "Survival", runID: "r", compression: "zstd", wantErr: `server name "Survival" is invalid`},
		{name: "server traversal", root: "/b", server: "..", runID: "r", compression: "zstd", wantErr: "server name"},
		{name: "server too long", root: "/b", server: strings.Repeat("s", 64), runID: "r", compression: "zstd", wantErr: "server name"},
		{name: "server empty", root: "/b", server: "", runID: "r", compression: "zstd", wantErr: "server name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ArchiveRef(tt.root, tt.server, tt.runID, tt.compression)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ArchiveRef() = %q, %v; want error containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ArchiveRef() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestArchiveName(t *testing.T) {
	got, err := ArchiveName("creative", "nightly-42", CompressionGzip)
	if err != nil || got != "creative/nightly-42.tar.gz" {
		t.Fatalf("ArchiveName() = %q, %v; want creative/nightly-42.tar.gz", got, err)
	}
}
