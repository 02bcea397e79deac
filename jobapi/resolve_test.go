package jobapi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckRunRef(t *testing.T) {
	for _, tt := range []struct {
		ref string
		ok  bool
	}{
		{"latest", true},
		{"2025-06-01T0300Z", true},
		{"Latest", false}, // not a run ID either: no run can be named so
		{"LATEST", false},
		{"", false},
		{".hidden", false},
		{"a/b", false},
		{strings.Repeat("x", MaxRunIDLen+1), false},
	} {
		t.Run(tt.ref, func(t *testing.T) {
			err := CheckRunRef(tt.ref)
			if (err == nil) != tt.ok {
				t.Fatalf("CheckRunRef(%q) = %v, want ok %v", tt.ref, err, tt.ok)
			}
			if err != nil && !strings.Contains(err.Error(), `"latest"`) {
				t.Errorf("the error does not offer latest: %v", err)
			}
		})
	}
}

// TestRunIDNotLatest: no run ID is a spelling of latest, which a fromRun
// would read as the newest run (or refuse, in another case).
func TestRunIDNotLatest(t *testing.T) {
	for _, id := range []string{"latest", "Latest", "LATEST", "lAtEsT"} {
		t.Run(id, func(t *testing.T) {
			if err := CheckRunID(id); err == nil || !strings.Contains(err.Error(), "spelling of") {
				t.Fatalf("CheckRunID(%q) = %v, want it refused as a spelling of latest", id, err)
			}
		})
	}
	for _, id := range []string{"latest-1", "the-latest", "latest.2026"} {
		if err := CheckRunID(id); err != nil {
			t.Errorf("CheckRunID(%q) = %v, want ok", id, err)
		}
	}
}

func TestRefWithin(t *testing.T) {
	for _, tt := range []struct {
		name, ref, within string
		want              bool
	}{
		{"anywhere", "/x/y", "", true},
		{"below the root", "/backups/survival/r.tar.zst", "/backups", true},
		{"root with slash", "/backups/survival/r.tar.zst", "/backups/", true},
		{"sibling prefix", "/backups2/survival/r.tar.zst", "/backups", false},
		{"the root itself", "/backups", "/backups", false},
		{"s3 ref, folder root", "s3://b/survival/r.tar.zst", "/backups", false},
		{"any s3 object", "s3://b/survival/r.tar.zst", "s3://", true},
		{"file ref, s3 store", "/backups/r.tar", "s3://", false},
		{"s3 prefix", "s3://b/p/survival/r.tar", "s3://b/p", true},
		{"other bucket", "s3://c/p/survival/r.tar", "s3://b/p", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := RefWithin(tt.ref, tt.within); got != tt.want {
				t.Errorf("RefWithin(%q, %q) = %v, want %v", tt.ref, tt.within, got, tt.want)
			}
		})
	}
}

func TestResolvedRunFile(t *testing.T) {
	good := ResolvedRun{Server: "survival", RunID: "r1", ArchiveRef: "/backups/survival/r1.tar.zst", SHA256: strings.Repeat("ab", 32)}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Run("round trip", func(t *testing.T) {
		got, err := ReadResolvedRun(write("good", good.Encode()))
		if err != nil || got != good {
			t.Fatalf("ReadResolvedRun = %+v, %v; want %+v", got, err, good)
		}
	})
	bad := func(mut func(*ResolvedRun)) []byte {
		r := good
		mut(&r)
		return r.Encode()
	}
	for _, tt := range []struct {
		name, want string
		b          []byte
	}{
		{"too large", "larger than", []byte(strings.Repeat(" ", MaxResolvedBytes+1))},
		{"not JSON", "not archiver resolve's JSON", []byte("ref sum")},
		{"unknown field", "unknown field", []byte(`{"server":"s","extra":1}`)},
		{"two objects", "more than one", append(good.Encode(), good.Encode()...)},
		{"upper-case sum", "sha256", bad(func(r *ResolvedRun) { r.SHA256 = strings.ToUpper(r.SHA256) })},
		{"relative ref", "absolute", bad(func(r *ResolvedRun) { r.ArchiveRef = "survival/r1.tar.zst" })},
		{"dotted ref", "clean", bad(func(r *ResolvedRun) { r.ArchiveRef = "/backups/../etc/shadow" })},
		{"newline in ref", "control", bad(func(r *ResolvedRun) { r.ArchiveRef = "/backups/a\nb" })},
		{"bad server", "server", bad(func(r *ResolvedRun) { r.Server = "Bad_Name" })},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadResolvedRun(write(strings.ReplaceAll(tt.name, " ", "-"), tt.b))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ReadResolvedRun = %v, want an error with %q", err, tt.want)
			}
		})
	}
	t.Run("a gone run", func(t *testing.T) {
		gone := ResolvedRun{Server: "survival", RunID: "r1", Gone: true}
		got, err := ReadResolvedRun(write("gone", gone.Encode()))
		if err != nil || got != gone {
			t.Fatalf("ReadResolvedRun = %+v, %v; want %+v", got, err, gone)
		}
		for name, r := range map[string]ResolvedRun{
			"gone with a ref":    {Server: "survival", RunID: "r1", Gone: true, ArchiveRef: good.ArchiveRef},
			"gone with a sum":    {Server: "survival", RunID: "r1", Gone: true, SHA256: good.SHA256},
			"gone with a bad id": {Server: "survival", RunID: "-r1", Gone: true},
			"not gone, no ref":   {Server: "survival", RunID: "r1"},
		} {
			if _, err := ReadResolvedRun(write(strings.ReplaceAll(name, " ", "-"), r.Encode())); err == nil {
				t.Errorf("%s: read without an error", name)
			}
		}
	})
	t.Run("missing file", func(t *testing.T) {
		if _, err := ReadResolvedRun(filepath.Join(dir, "none")); err == nil {
			t.Fatal("no error for a missing file")
		}
	})
}

func TestRedactHookURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://hooks.slack.com/services/T0/B0/secret":      "https://hooks.slack.com/<redacted>",
		"https://discord.com/api/webhooks/1/token?wait=true": "https://discord.com/<redacted>",
		"http://user:pw@127.0.0.1:8080/x#f":                  "http://<redacted>@127.0.0.1:8080/<redacted>",
		"no-scheme/secret":                                   "<redacted>",
	} {
		if got := RedactHookURL(in); got != want || strings.Contains(got, "secret") || strings.Contains(got, "token") {
			t.Errorf("RedactHookURL(%q) = %q, want %q", in, got, want)
		}
	}
}
