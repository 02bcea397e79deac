package provider

import (
	"errors"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/worldbackup/worldbackup/provider/jobspec"
)

// TestEncryptionInput: the encryption input reaches the backup, schedule
// and restore Jobs with its default key; the backup's archiveRef of a tar
// run ends in .age (folder and S3 store), a chunked run's is its manifest;
// a missing or invalid Secret is named.
func TestEncryptionInput(t *testing.T) {
	want := jobspec.Encryption{SecretName: "survival-encryption", SecretKey: DefaultEncryptionSecretKey}
	b := validArgs()
	b.Format = new(FormatTar)
	b.Encryption = &EncryptionArgs{SecretName: pulumi.String("survival-encryption")}
	r, err := b.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if r.Job.Encryption == nil || *r.Job.Encryption != want || !strings.HasSuffix(r.ArchiveRef, ".tar.zst.age") {
		t.Fatalf("backup: encryption %+v, archiveRef %s", r.Job.Encryption, r.ArchiveRef)
	}
	b.Store, b.BackupClaimName = validStore(), nil
	if r, err := b.resolve(); err != nil || !strings.HasSuffix(r.ArchiveRef, ".tar.zst.age") || !strings.HasPrefix(r.ArchiveRef, "s3://") {
		t.Fatalf("S3 backup: %v, archiveRef %s", err, r.ArchiveRef)
	}
	c := validArgs()
	c.Encryption, c.Format, c.Compression = b.Encryption, new(Format("chunked")), nil
	if r, err := c.resolve(); err != nil || !strings.HasSuffix(r.ArchiveRef, ".manifest") {
		t.Fatalf("chunked: %v, archiveRef %s", err, r.ArchiveRef)
	}
	s := validSchedule()
	s.Encryption = b.Encryption
	if job, _, _, err := s.resolve(); err != nil || job.Encryption == nil || *job.Encryption != want {
		t.Fatalf("schedule: %v, %+v", err, job.Encryption)
	}
	rs := validRestoreArgs()
	rs.Encryption = b.Encryption
	if rr, err := rs.resolve(); err != nil || rr.Job.Encryption == nil || *rr.Job.Encryption != want {
		t.Fatalf("restore: %v", err)
	}

	for name, e := range map[string]*EncryptionArgs{
		"encryption.secretName": {},
		"encryption.secretKey":  {SecretName: pulumi.String("ok"), SecretKey: pulumi.String("bad key!")},
	} {
		a := validArgs()
		a.Encryption = e
		_, err := a.resolve()
		var ie *InputError
		if !errors.As(err, &ie) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
