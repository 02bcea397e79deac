package jobapi

import (
	"strings"
	"testing"
)

func TestArchiveRef(t *testing.T) {
	tests := []struct {
		name, root, server, runID, compression string
		format                                 string
		want                                   string
		wantErr                                string
	}{
		{name: "zstd", root: "/backups", server: "survival", runID: "r1", format: "tar", compression: "zstd", want: "/backups/survival/r1.tar.zst"},
		{name: "gzip", root: "/backups", server: "survival", runID: "r1", format: "tar", compression: "gzip", want: "/backups/survival/r1.tar.gz"},
		{name: "none", root: "/backups", server: "survival", runID: "r1", format: "tar", compression: "none", want: "/backups/survival/r1.tar"},
		{name: "root cleaned", root: "/data/backups/", server: "s", runID: "2025-06-01T03.00_Z", format: "tar", compression: "zstd", want: "/data/backups/s/2025-06-01T03.00_Z.tar.zst"},
		{name: "relative root", root: "backups", server: "s", runID: "r", format: "tar", compression: "zstd", wantErr: "not an absolute path"},
		{name: "unknown compression", root: "/b", server: "s", runID: "r", format: "tar", compression: "xz", wantErr: `compression "xz" is not supported`},
		{name: "run ID with slash", root: "/b", server: "s", runID: "a/b", format: "tar", compression: "zstd", wantErr: `run ID "a/b" is invalid`},
		{name: "run ID dot-dot", root: "/b", server: "s", runID: "..", format: "tar", compression: "zstd", wantErr: "run ID"},
		{name: "run ID leading dot", root: "/b", server: "s", runID: ".hidden", format: "tar", compression: "zstd", wantErr: "run ID"},
		{name: "run ID too long", root: "/b", server: "s", runID: strings.Repeat("a", 129), format: "tar", compression: "zstd", wantErr: "run ID"},
		{name: "run ID longest", root: "/b", server: "s", runID: strings.Repeat("a", 128), format: "tar", compression: "none", want: "/b/s/" + strings.Repeat("a", 128) + ".tar"},
		{name: "server upper case", root: "/b", server: "Survival", runID: "r", format: "tar", compression: "zstd", wantErr: `server name "Survival" is invalid`},
		{name: "server traversal", root: "/b", server: "..", runID: "r", format: "tar", compression: "zstd", wantErr: "server name"},
		{name: "server too long", root: "/b", server: strings.Repeat("s", 64), runID: "r", format: "tar", compression: "zstd", wantErr: "server name"},
		{name: "server empty", root: "/b", server: "", runID: "r", format: "tar", compression: "zstd", wantErr: "server name"},
		{name: "default is chunked", root: "/b", server: "s", runID: "r", want: "/b/_chunked/runs/s/r.manifest"},
		{name: "tar explicit", root: "/b", server: "s", runID: "r", format: "tar", compression: "gzip", want: "/b/s/r.tar.gz"},
		{name: "chunked manifest", root: "/backups/", server: "survival", runID: "r1", format: "chunked", want: "/backups/_chunked/runs/survival/r1.manifest"},
		{name: "chunked ignores compression", root: "/b", server: "s", runID: "r", format: "chunked", compression: "gzip", want: "/b/_chunked/runs/s/r.manifest"},
		{name: "chunked bad run ID", root: "/b", server: "s", runID: "..", format: "chunked", wantErr: "run ID"},
		{name: "chunked bad server", root: "/b", server: "S", runID: "r", format: "chunked", wantErr: "server name"},
		{name: "unknown format", root: "/b", server: "s", runID: "r", format: "zip", compression: "zstd", wantErr: `archive format "zip" is not supported`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ArchiveRef(tt.root, tt.server, tt.runID, tt.format, tt.compression)
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

// TestRunKeyManifest: a chunked run's key is the one SplitManifestRef
// takes apart, the ref the archiver's restore reads.
func TestRunKeyManifest(t *testing.T) {
	key, err := RunKey("survival", "r1", FormatChunked, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, root := range []string{"/backups", "s3://felis/worlds"} {
		gotRoot, gotKey, ok := SplitManifestRef(root + "/" + key)
		if !ok || gotRoot != root || gotKey != key {
			t.Errorf("SplitManifestRef(%q) = %q, %q, %v; want %q, %q, true", root+"/"+key, gotRoot, gotKey, ok, root, key)
		}
	}
}

func TestArchiveName(t *testing.T) {
	got, err := ArchiveName("creative", "nightly-42", CompressionGzip)
	if err != nil || got != "creative/nightly-42.tar.gz" {
		t.Fatalf("ArchiveName() = %q, %v; want creative/nightly-42.tar.gz", got, err)
	}
}

func TestParseArchiveName(t *testing.T) {
	tests := []struct {
		name, file, runID, compression string
		ok                             bool
	}{
		{name: "zstd", file: "r1.tar.zst", runID: "r1", compression: "zstd", ok: true},
		{name: "gzip", file: "r1.tar.gz", runID: "r1", compression: "gzip", ok: true},
		{name: "none", file: "r1.tar", runID: "r1", compression: "none", ok: true},
		{name: "run ID ending in .tar", file: "x.tar.tar.zst", runID: "x.tar", compression: "zstd", ok: true},
		{name: "temp file", file: ".r1.tar.zst.tmp-0123456789abcdef"},
		{name: "lock file", file: ".r1.lock"},
		{name: "other file", file: "notes.txt"},
		{name: "bare extension", file: ".tar.zst"},
		{name: "empty", file: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runID, compression, ok := ParseArchiveName(tt.file)
			if ok != tt.ok || runID != tt.runID || compression != tt.compression {
				t.Fatalf("ParseArchiveName(%q) = %q, %q, %v; want %q, %q, %v", tt.file, runID, compression, ok, tt.runID, tt.compression, tt.ok)
			}
			if ok {
				if name, err := ArchiveName("s", runID, compression); err != nil || name != "s/"+tt.file {
					t.Fatalf("round trip: ArchiveName = %q, %v; want %q", name, err, "s/"+tt.file)
				}
			}
		})
	}
}

func TestValidBucket(t *testing.T) {
	tests := []struct {
		name   string
		bucket string
		want   bool
	}{
		{"plain", "world-backups", true},
		{"dots and digits", "a.b-1", true},
		{"shortest", "abc", true},
		{"too short", "ab", false},
		{"longest", strings.Repeat("a", 63), true},
		{"too long", strings.Repeat("a", 64), false},
		{"uppercase", "World", false},
		{"underscore", "world_backups", false},
		{"leading dash", "-world", false},
		{"trailing dot", "world.", false},
		{"empty", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ValidBucket(tt.bucket); got != tt.want {
				t.Errorf("ValidBucket(%q) = %v, want %v", tt.bucket, got, tt.want)
			}
		})
	}
}

func TestCheckRconAddress(t *testing.T) {
	tests := []struct{ name, addr, wantErr string }{
		{name: "service", addr: "survival:25575"},
		{name: "ip", addr: "127.0.0.1:1"},
		{name: "ipv6", addr: "[::1]:65535"},
		{name: "no port", addr: "survival", wantErr: "want host:port"},
		{name: "empty host", addr: ":25575", wantErr: "want host:port"},
		{name: "port not a number", addr: "127.0.0.1:abc", wantErr: "port must be a number from 1 to 65535"},
		{name: "port too large", addr: "127.0.0.1:99999", wantErr: "port must be a number from 1 to 65535"},
		{name: "port zero", addr: "survival:0", wantErr: "port must be"},
		{name: "host with a slash", addr: "a/b:25575", wantErr: "not a host name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckRconAddress(tt.addr)
			if (err != nil) != (tt.wantErr != "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("CheckRconAddress(%q) = %v, want %q", tt.addr, err, tt.wantErr)
			}
		})
	}
}

func TestCheckS3Endpoint(t *testing.T) {
	tests := []struct{ name, endpoint, wantErr string }{
		{name: "https with port", endpoint: "https://minio.example:9000"},
		{name: "http slash", endpoint: "http://minio.storage:9000/"},
		{name: "query", endpoint: "http://minio:9000?x=1", wantErr: "no path, query or fragment"},
		{name: "empty query", endpoint: "http://minio:9000?", wantErr: "no path, query or fragment"},
		{name: "fragment", endpoint: "http://minio:9000#f", wantErr: "no path, query or fragment"},
		{name: "empty fragment", endpoint: "http://minio:9000#", wantErr: "no path, query or fragment"},
		{name: "path", endpoint: "http://minio:9000/x", wantErr: "no path"},
		{name: "ftp", endpoint: "ftp://minio", wantErr: "want http(s)"},
		{name: "no host", endpoint: "http://", wantErr: "want http(s)"},
		{name: "bad port", endpoint: "http://minio:99999", wantErr: "port must be"},
		{name: "userinfo", endpoint: "http://key:topsecret@minio/x", wantErr: "has credentials in it"},
		{name: "userinfo, secret with a slash", endpoint: "http://key:top/secret@minio", wantErr: "has credentials in it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckS3Endpoint(tt.endpoint)
			if (err != nil) != (tt.wantErr != "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("CheckS3Endpoint(%q) = %v, want %q", tt.endpoint, err, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Fatalf("the error shows the secret: %v", err)
			}
		})
	}
}

func TestCheckS3Region(t *testing.T) {
	for _, ok := range []string{"us-east-1", "eu_west", "garage"} {
		if err := CheckS3Region(ok); err != nil {
			t.Errorf("CheckS3Region(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "us east", "us-east-1/x", "ré", strings.Repeat("a", MaxRegionLen+1)} {
		if err := CheckS3Region(bad); err == nil {
			t.Errorf("CheckS3Region(%q) = nil, want an error", bad)
		}
	}
}

func TestRedactURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"http://key:secret@host/x", "http://<redacted>@host/x"},
		{"http://key:se/cr@et@host:9000", "http://<redacted>@host:9000"},
		{"https://host:9000", "https://host:9000"},
		{"key:secret@host", "<redacted>@host"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := RedactURL(tt.in); got != tt.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestChunkedKeys(t *testing.T) {
	id := strings.Repeat("ab", 32)
	k, err := PackKey(id)
	if err != nil || k != "_chunked/packs/ab/"+id {
		t.Fatalf("PackKey = %q, %v", k, err)
	}
	for _, bad := range []string{"", "AB" + id[2:], id[:63], id + "0", "../" + id[3:]} {
		if _, err := PackKey(bad); err == nil {
			t.Errorf("PackKey(%q) accepted", bad)
		}
	}
	mk, err := ManifestKey("survival", "run-1")
	if err != nil || mk != "_chunked/runs/survival/run-1.manifest" {
		t.Fatalf("ManifestKey = %q, %v", mk, err)
	}
	if _, err := ManifestKey("Bad_Server", "run-1"); err == nil {
		t.Error("ManifestKey accepted a bad server name")
	}
	tests := []struct {
		name, ref, root, key string
		ok                   bool
	}{
		{"folder", "/archives/" + mk, "/archives", mk, true},
		{"s3", "s3://bucket/prefix/" + mk, "s3://bucket/prefix", mk, true},
		{"tar archive", "/archives/survival/run-1.tar.zst", "", "", false},
		{"bad run id", "/archives/_chunked/runs/survival/.x.manifest", "", "", false},
		{"no suffix", "/archives/_chunked/runs/survival/run-1", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, key, ok := SplitManifestRef(tt.ref)
			if ok != tt.ok || root != tt.root || key != tt.key {
				t.Errorf("SplitManifestRef(%q) = %q, %q, %v", tt.ref, root, key, ok)
			}
		})
	}
	if ChunkedDir[0] == '.' || CheckServer(ChunkedDir) == nil {
		t.Error("the chunked folder could clash with a server's folder or a temp file")
	}
}
