package config

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/worldbackup/worldbackup/archiver/tarstream"
)

const secret = "s3cr3t-pa55"

func TestLoad(t *testing.T) {
	tests := []struct {
		name    string
		toml    *string // nil: no file
		want    []string
		check   func(t *testing.T, c Config)
		wantErr []string // substrings of the error; "" cases must succeed
	}{
		{
			name:    "missing file",
			wantErr: []string{"felis.toml", "does not exist"},
		},
		{
			name: "minimal",
			toml: ptr(`[database]
url = "postgres://felis:` + secret + `@db:5432/felis"
`),
			check: func(t *testing.T, c Config) {
				if c.Archive.Compression != tarstream.Zstd {
					t.Errorf("compression %q, want zstd", c.Archive.Compression)
				}
				if !slices.Equal(c.Archive.Excludes, tarstream.DefaultExcludes) {
					t.Errorf("excludes %q, want the defaults", c.Archive.Excludes)
				}
				if c.Archive.LocalPath != "" {
					t.Errorf("local_path %q, want empty", c.Archive.LocalPath)
				}
				if c.Archive.Format != "chunked" {
					t.Errorf("format %q, want the default chunked", c.Archive.Format)
				}
			},
		},
		{
			name: "full",
			toml: ptr(`[database]
url = "host=db user=felis password=` + secret + ` dbname=felis"
[archive]
local_path = "/backups"
compression = "gzip"
excludes = []
allow_empty = true
`),
			check: func(t *testing.T, c Config) {
				if !c.Archive.AllowEmpty {
					t.Error("allow_empty not read")
				}
				if c.Archive.Compression != tarstream.Gzip || c.Archive.LocalPath != "/backups" {
					t.Errorf("archive %+v", c.Archive)
				}
				if c.Archive.Excludes == nil || len(c.Archive.Excludes) != 0 {
					t.Errorf("excludes %q, want an explicit empty list", c.Archive.Excludes)
				}
			},
		},
		{
			name:    "bad toml",
			toml:    ptr("[archive]\ncompression = \"zstd\"\nexcludes = [\"a\",\n"),
			wantErr: []string{"felis.toml", "line 3", "archive.excludes", "expected value"},
		},
		{
			name:    "bad toml in the url",
			toml:    ptr("[database]\nurl = \"postgres://u:" + secret + "@db/x\n"),
			wantErr: []string{"felis.toml", "line 2", "url", "quoted string"},
		},
		{
			name:    "bare url",
			toml:    ptr("[database]\nurl = postgres://u:" + secret + "@db/x\n"),
			wantErr: []string{"felis.toml", "line 2"},
		},
		{
			name:    "url set twice",
			toml:    ptr("[database]\nurl = \"postgres://u:" + secret + "@db/x\"\nurl = \"postgres://u:" + secret + "@db/y\"\n"),
			wantErr: []string{"felis.toml", "line 3", "database.url", "already been defined", "twice"},
		},
		{
			name:    "oversized file",
			toml:    ptr("[database]\nurl = \"postgres://db/x\"\n" + strings.Repeat("# padding\n", 1<<20/10+1)),
			wantErr: []string{"felis.toml", "larger than 1 MiB"},
		},
		{
			name:    "url of the wrong type",
			toml:    ptr("[database]\nurl = 5\n"),
			wantErr: []string{"felis.toml", "database.url"},
		},
		{
			name: "unknown key",
			toml: ptr(`[database]
url = "postgres://u:` + secret + `@db/x"
password = "x"
[archive]
local_pth = "/backups"
`),
			wantErr: []string{"felis.toml", "unknown key", `"database.password"`, `"archive.local_pth"`},
		},
		{
			name:    "unknown table",
			toml:    ptr("[database]\nurl = \"postgres://db/x\"\n[s3]\nbucket = \"b\"\n"),
			wantErr: []string{"felis.toml", `unknown key "s3"`},
		},
		{
			name:    "missing url",
			toml:    ptr("[archive]\nlocal_path = \"/backups\"\n"),
			wantErr: []string{"felis.toml", "[database] url", "missing"},
		},
		{
			name:    "empty url",
			toml:    ptr("[database]\nurl = \"  \"\n"),
			wantErr: []string{"felis.toml", "[database] url", "missing"},
		},
		{
			name:    "wrong scheme",
			toml:    ptr("[database]\nurl = \"mysql://u:" + secret + "@db/x\"\n"),
			wantErr: []string{"felis.toml", "[database] url", "postgres://"},
		},
		{
			name:    "unparsable url",
			toml:    ptr("[database]\nurl = \"postgres://u:" + secret + "%zz@db/x\"\n"),
			wantErr: []string{"felis.toml", "[database] url", "not a valid URL"},
		},
		{
			name:    "url without host",
			toml:    ptr("[database]\nurl = \"postgres:///felis?user=" + secret + "\"\n"),
			wantErr: []string{"felis.toml", "[database] url", "no host"},
		},
		{
			name:    "not a connection string",
			toml:    ptr("[database]\nurl = \"" + secret + "\"\n"),
			wantErr: []string{"felis.toml", "[database] url", "neither"},
		},
		{
			name:    "bad sslmode",
			toml:    ptr("[database]\nurl = \"postgres://u:" + secret + "@db/x?sslmode=bogus\"\n"),
			wantErr: []string{"felis.toml", "[database] url", "sslmode is invalid"},
		},
		{
			name:    "bad connect_timeout",
			toml:    ptr("[database]\nurl = \"postgres://u:" + secret + "@db/x?connect_timeout=abc\"\n"),
			wantErr: []string{"felis.toml", "[database] url", "invalid connect_timeout"},
		},
		{
			name:    "bad port",
			toml:    ptr("[database]\nurl = \"postgres://u:" + secret + "@db:99999/x\"\n"),
			wantErr: []string{"felis.toml", "[database] url", "invalid port"},
		},
		{
			name:    "bad sslmode, key=value form",
			toml:    ptr("[database]\nurl = \"host=db password=" + secret + " sslmode=bogus\"\n"),
			wantErr: []string{"felis.toml", "[database] url", "sslmode is invalid"},
		},
		{
			name:    "bad port, key=value form",
			toml:    ptr("[database]\nurl = \"host=db password=" + secret + " port=99999\"\n"),
			wantErr: []string{"felis.toml", "[database] url", "invalid port"},
		},
		{
			name:    "relative local_path",
			toml:    ptr("[database]\nurl = \"postgres://db/x\"\n[archive]\nlocal_path = \"backups\"\n"),
			wantErr: []string{"felis.toml", "[archive] local_path", "absolute"},
		},
		{
			name:    "bad compression",
			toml:    ptr("[database]\nurl = \"postgres://db/x\"\n[archive]\ncompression = \"xz\"\n"),
			wantErr: []string{"felis.toml", "[archive] compression", `"xz"`, "zstd, gzip or none"},
		},
		{
			name:    "bad format",
			toml:    ptr("[database]\nurl = \"postgres://db/x\"\n[archive]\nformat = \"zip\"\n"),
			wantErr: []string{"felis.toml", "[archive] format", `"zip"`, "tar or chunked"},
		},
		{
			name:    "negative full_read_every",
			toml:    ptr("[database]\nurl = \"postgres://db/x\"\n[archive]\nformat = \"chunked\"\nfull_read_every = -1\n"),
			wantErr: []string{"felis.toml", "[archive] full_read_every", "-1"},
		},
		{
			name: "chunked format",
			toml: ptr("[database]\nurl = \"postgres://db/x\"\n[archive]\nformat = \"chunked\"\nfull_read_every = 7\n"),
			check: func(t *testing.T, c Config) {
				if c.Archive.Format != "chunked" || c.Archive.FullReadEvery != 7 {
					t.Errorf("archive %+v", c.Archive)
				}
			},
		},
		{
			name:    "bad exclude",
			toml:    ptr("[database]\nurl = \"postgres://db/x\"\n[archive]\nexcludes = [\"[\"]\n"),
			wantErr: []string{"felis.toml", "[archive] excludes", `"["`},
		},
		{
			name: "rcon",
			toml: ptr("[database]\nurl = \"postgres://db/x\"\n[rcon]\naddress = \"survival:25575\"\npassword_file = \"/etc/felis-rcon/rcon-password\"\n"),
			check: func(t *testing.T, c Config) {
				if !c.Rcon.Enabled() || !c.Rcon.IsRequired() || c.Rcon.PasswordFile != "/etc/felis-rcon/rcon-password" {
					t.Errorf("rcon %+v: want enabled and required by default", c.Rcon)
				}
			},
		},
		{
			name: "rcon not required",
			toml: ptr("[database]\nurl = \"postgres://db/x\"\n[rcon]\naddress = \"mc:25575\"\npassword_file = \"/p\"\nrequired = false\n"),
			check: func(t *testing.T, c Config) {
				if c.Rcon.IsRequired() {
					t.Error("required = false was not read")
				}
			},
		},
		{
			name:    "rcon without password file",
			toml:    ptr("[database]\nurl = \"postgres://db/x\"\n[rcon]\naddress = \"mc:25575\"\n"),
			wantErr: []string{"[rcon] password_file", "missing"},
		},
		{
			name:    "rcon password in the file",
			toml:    ptr("[database]\nurl = \"postgres://db/x\"\n[rcon]\naddress = \"mc:25575\"\npassword = \"hunter2\"\n"),
			wantErr: []string{"unknown key", "rcon.password", "rcon.password_file"},
		},
		{
			name:    "rcon port not a number",
			toml:    ptr("[database]\nurl = \"postgres://db/x\"\n[rcon]\naddress = \"127.0.0.1:abc\"\npassword_file = \"/p\"\nrequired = false\n"),
			wantErr: []string{"[rcon] address", "port must be a number from 1 to 65535"},
		},
		{
			name:    "rcon port too large",
			toml:    ptr("[database]\nurl = \"postgres://db/x\"\n[rcon]\naddress = \"127.0.0.1:99999\"\npassword_file = \"/p\"\n"),
			wantErr: []string{"[rcon] address", "port must be a number from 1 to 65535"},
		},
		{
			name:    "rcon bad address",
			toml:    ptr("[database]\nurl = \"postgres://db/x\"\n[rcon]\naddress = \"mc\"\npassword_file = \"p\"\n"),
			wantErr: []string{"[rcon] address", "host:port", "[rcon] password_file", "absolute"},
		},
		{
			name:    "the key itself as encryption_key_file",
			toml:    ptr("[database]\nurl = \"postgres://db/x\"\n[archive]\nencryption_key_file = \"AGE-SECRET-KEY-1" + secret + "\"\n"),
			wantErr: []string{"[archive] encryption_key_file", "absolute", "not printed"},
		},
		{
			name:    "the password itself as rcon password_file",
			toml:    ptr("[database]\nurl = \"postgres://db/x\"\n[rcon]\naddress = \"mc:25575\"\npassword_file = \"" + secret + "\"\n"),
			wantErr: []string{"[rcon] password_file", "absolute", "not printed"},
		},
		{
			name:    "the secret key itself as secret_key_file",
			toml:    ptr("[database]\nurl = \"postgres://db/x\"\n[archive]\nstore = \"s3://felis\"\naccess_key_file = \"/s/a\"\nsecret_key_file = \"" + secret + "\"\n"),
			wantErr: []string{"[archive] secret_key_file", "absolute", "not printed"},
		},
		{
			name:    "several errors at once",
			toml:    ptr("[archive]\ncompression = \"xz\"\nlocal_path = \"rel\"\n"),
			wantErr: []string{"[database] url", "[archive] compression", "[archive] local_path"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "felis.toml")
			if tt.toml != nil {
				if err := os.WriteFile(path, []byte(*tt.toml), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			c, err := Load(path)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				if c.Path() != path {
					t.Errorf("Path() = %q, want %q", c.Path(), path)
				}
				tt.check(t, c)
				for _, f := range []string{"%v", "%+v", "%#v", "%s"} {
					if s := fmt.Sprintf(f, c); strings.Contains(s, secret) {
						t.Errorf("Sprintf(%q, config) reveals the password: %s", f, s)
					}
				}
				return
			}
			if err == nil {
				t.Fatalf("Load succeeded, want an error containing %q", tt.wantErr)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error reveals the password: %q", err)
			}
		})
	}
}

func ptr(s string) *string { return &s }

// A FIFO as felis.toml (no writer) is refused at once, not waited on.
func TestLoadFIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "felis.toml")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := Load(path); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("Load: %v", err)
		}
	case <-time.After(10 * time.Second):
		// Release the blocked open so that the test binary can end.
		if f, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		<-done
		t.Fatal("Load blocked on a FIFO")
	}
}
