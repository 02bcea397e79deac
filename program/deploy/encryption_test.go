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
