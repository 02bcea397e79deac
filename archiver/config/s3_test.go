package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestS3Settings(t *testing.T) {
	const db = "[database]\nurl = \"postgres://u@h/d\"\n"
	for _, tc := range []struct {
		name, archive string
		wantErr       []string // substrings of the error; none: valid
	}{
		{"full", `store = "s3://felis-backups/worlds"
endpoint = "https://minio.example:9000"
region = "eu-west-1"
path_style = true
access_key_file = "/etc/felis-s3/access-key"
secret_key_file = "/etc/felis-s3/secret-key"`, nil},
		{"aws, bucket only", `store = "s3://felis-backups"
access_key_file = "/s/a"
secret_key_file = "/s/b"`, nil},
		{"no key files", `store = "s3://felis-backups"`, []string{"[archive] access_key_file: missing", "[archive] secret_key_file: missing"}},
		{"relative key file", `store = "s3://felis-backups"
access_key_file = "a"
secret_key_file = "/s/b"`, []string{`access_key_file: is not an absolute path`}},
		{"not s3", `store = "gs://felis"
access_key_file = "/s/a"
secret_key_file = "/s/b"`, []string{"[archive] store", "want s3://bucket"}},
		{"bad bucket", `store = "s3://Felis_Backups"
access_key_file = "/s/a"
secret_key_file = "/s/b"`, []string{"not a valid bucket name"}},
		{"bad endpoint", `store = "s3://felis"
endpoint = "minio:9000"
access_key_file = "/s/a"
secret_key_file = "/s/b"`, []string{"[archive] endpoint", "want http(s)://host[:port]"}},
		{"endpoint with a query", `store = "s3://felis"
endpoint = "https://minio:9000?versionId=1"
access_key_file = "/s/a"
secret_key_file = "/s/b"`, []string{"[archive] endpoint", "no path, query or fragment"}},
		{"endpoint with a fragment", `store = "s3://felis"
endpoint = "https://minio:9000#x"
access_key_file = "/s/a"
secret_key_file = "/s/b"`, []string{"[archive] endpoint", "no path, query or fragment"}},
		{"endpoint with credentials", `store = "s3://felis"
endpoint = "http://AKIAKEY:wJalr/Secret@minio:9000/x"
access_key_file = "/s/a"
secret_key_file = "/s/b"`, []string{"[archive] endpoint", "has credentials in it"}},
		{"garbage region", `store = "s3://felis"
region = "us east 1/../x"
access_key_file = "/s/a"
secret_key_file = "/s/b"`, []string{"[archive] region", "is not a region name"}},
		{"both stores", `store = "s3://felis"
local_path = "/backups"
access_key_file = "/s/a"
secret_key_file = "/s/b"`, []string{"[archive] local_path: set together with store"}},
		{"part size", `store = "s3://felis-backups"
part_size_mib = 65
access_key_file = "/s/a"
secret_key_file = "/s/b"`, []string{"[archive] part_size_mib: 65: want 5 to 64"}},
		{"s3 settings without a store", `local_path = "/backups"
endpoint = "https://minio:9000"`, []string{"[archive] endpoint: is set but [archive] store is not"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "felis.toml")
			if err := os.WriteFile(p, []byte(db+"[archive]\n"+tc.archive+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := Load(p)
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				if !c.Archive.S3.Enabled() || !strings.HasPrefix(c.Archive.Store, "s3://felis-backups") {
					t.Fatalf("store = %q, want the s3 URL", c.Archive.Store)
				}
				return
			}
			if err == nil {
				t.Fatalf("Load succeeded, want an error with %q", tc.wantErr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "Secret@") || strings.Contains(err.Error(), "AKIAKEY") {
				t.Errorf("error %q shows the endpoint's credentials", err)
			}
		})
	}
	t.Run("full values", func(t *testing.T) {
		c, err := Parse("felis.toml", db+`[archive]
store = "s3://b-1/p"
endpoint = "http://127.0.0.1:7070"
region = "r"
path_style = true
access_key_file = "/a"
secret_key_file = "/b"
`)
		if err != nil {
			t.Fatal(err)
		}
		want := S3{Store: "s3://b-1/p", Endpoint: "http://127.0.0.1:7070", Region: "r", PathStyle: true, AccessKeyFile: "/a", SecretKeyFile: "/b"}
		if c.Archive.S3 != want {
			t.Fatalf("S3 = %+v, want %+v", c.Archive.S3, want)
		}
	})
}
