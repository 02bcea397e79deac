package deploy

import (
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// TestEncryption: servers[].encryption reaches the server's backup (its
// archiveRef the .age name) and its restores; other servers have none.
func TestEncryption(t *testing.T) {
	m := map[string]string{
		"worldbackup:image":       "img:1",
		"worldbackup:backupClaim": "backups",
		"worldbackup:servers":     `[{"name":"lobby"},{"name":"survival","encryption":{"secretName":"survival-encryption"}}]`,
		"worldbackup:restores":    `[{"server":"survival","archiveRef":"/backups/survival/r1.tar.zst.age","sha256":"` + strings.Repeat("a", 64) + `"}]`,
	}
	c, err := ParseConfig(getter(m), nil)
	if err != nil {
		t.Fatal(err)
	}
	lj, err := backupArgs(c, c.Clusters[0], c.Servers[0]).Job()
	if err != nil || lj.Encryption != nil {
		t.Fatalf("lobby: %v, encryption %+v", err, lj.Encryption)
	}
	sj, err := backupArgs(c, c.Clusters[0], c.Servers[1]).Job()
	if err != nil || sj.Encryption == nil || sj.Encryption.SecretName != "survival-encryption" || sj.Encryption.SecretKey != "age-identity" {
		t.Fatalf("survival: %v, encryption %+v", err, sj.Encryption)
	}
	r := c.Restores[0]
	rj, err := restoreArgs(c, c.Clusters[0], r, pulumi.String(r.ArchiveRef)).Job()
	if err != nil || rj.Encryption == nil || rj.Encryption.SecretName != "survival-encryption" {
		t.Fatalf("restore: %v, encryption %+v", err, rj.Encryption)
	}
}

// TestRestoreEncryption: a restores[] entry's encryption replaces the
// server's, so a run of another server (fromServer) encrypted to another
// identity can be restored; without one the server's own is used.
func TestRestoreEncryption(t *testing.T) {
	sum := strings.Repeat("a", 64)
	for _, tt := range []struct {
		name, restore string
		wantSecret    string // "": no encryption
		wantKey       string
	}{
		{"the server's own", `{"server":"vault","fromRun":"latest"}`, "vault-age", "age-identity"},
		{"another server's identity", `{"server":"vault","fromRun":"latest","fromServer":"hub","encryption":{"secretName":"hub-age","secretKey":"key.txt"}}`, "hub-age", "key.txt"},
		{"an encrypted run into a server without encryption", `{"server":"lobby","fromRun":"eu.hub.r7","fromServer":"hub","encryption":{"secretName":"hub-age"}}`, "hub-age", "age-identity"},
		{"an archive", `{"server":"lobby","archiveRef":"/backups/hub/r7.tar.zst.age","sha256":"` + sum + `","encryption":{"secretName":"hub-age"}}`, "hub-age", "age-identity"},
		{"none", `{"server":"lobby","fromRun":"latest"}`, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseConfig(getter(map[string]string{
				"worldbackup:image":       "img:1",
				"worldbackup:backupClaim": "backups",
				"worldbackup:servers":     `[{"name":"lobby"},{"name":"vault","encryption":{"secretName":"vault-age"}}]`,
				"worldbackup:restores":    "[" + tt.restore + "]",
			}), nil)
			if err != nil {
				t.Fatal(err)
			}
			r := c.Restores[0]
			ref := r.ArchiveRef
			if ref == "" {
				ref = r.FromRun
			}
			j, err := restoreArgs(c, c.Clusters[0], r, pulumi.String(ref)).Job()
			switch {
			case err != nil:
				t.Fatalf("Job: %v", err)
			case tt.wantSecret == "" && j.Encryption != nil:
				t.Fatalf("encryption %+v, want none", j.Encryption)
			case tt.wantSecret != "" && (j.Encryption == nil || j.Encryption.SecretName != tt.wantSecret || j.Encryption.SecretKey != tt.wantKey):
				t.Fatalf("encryption %+v, want %s key %s", j.Encryption, tt.wantSecret, tt.wantKey)
			}
			// The server's backups keep its own.
			if b, err := backupArgs(c, c.Clusters[0], c.Servers[1]).Job(); err != nil || b.Encryption == nil || b.Encryption.SecretName != "vault-age" {
				t.Fatalf("vault's backup: %v, %+v", err, b.Encryption)
			}
		})
	}
}
