package jobspec_test

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/worldbackup/worldbackup/provider/internal/jobtest"
	"github.com/worldbackup/worldbackup/provider/jobspec"
)

// TestEncryptionMount: a backup, restore or verify with encryption mounts the one
// key of the Secret read-only (0400) under the fixed file name and passes
// its path, never its value, as --encryption-key-file; without it there is
// neither.
func TestEncryptionMount(t *testing.T) {
	enc := &jobspec.Encryption{SecretName: "survival-encryption", SecretKey: "key.txt"}
	b, r, v := jobtest.DefaultBackup(), jobtest.DefaultRestore(), jobtest.DefaultVerify()
	b.Encryption, r.Encryption, v.Encryption = enc, enc, enc
	for name, job := range map[string]*batchv1.Job{"backup": jobspec.BuildBackup(b), "restore": jobspec.BuildRestore(r), "verify": jobspec.BuildVerify(v)} {
		t.Run(name, func(t *testing.T) {
			args := strings.Join(container(t, job).Args, " ")
			if !strings.Contains(args, "--encryption-key-file /etc/felis-encryption/age-identity") {
				t.Fatalf("args %q", args)
			}
			m := mountAt(t, job, jobspec.EncryptionVolumeName)
			eq(t, "mount path", m.MountPath, jobspec.EncryptionMountPath)
			eq(t, "read-only", m.ReadOnly, true)
			v := volume(t, job, jobspec.EncryptionVolumeName)
			if v.Secret == nil || v.Secret.SecretName != "survival-encryption" || *v.Secret.DefaultMode != 0o400 ||
				len(v.Secret.Items) != 1 || v.Secret.Items[0].Key != "key.txt" || v.Secret.Items[0].Path != "age-identity" {
				t.Fatalf("volume %+v", v)
			}
			for _, e := range container(t, job).Env {
				if strings.Contains(strings.ToLower(e.Name), "key") {
					t.Errorf("env %s", e.Name)
				}
			}
		})
	}
	for name, job := range map[string]*batchv1.Job{"backup": jobspec.BuildBackup(jobtest.DefaultBackup()), "restore": jobspec.BuildRestore(jobtest.DefaultRestore()),
		"verify": jobspec.BuildVerify(jobtest.DefaultVerify())} {
		if strings.Contains(strings.Join(container(t, job).Args, " "), "encryption") {
			t.Errorf("%s without encryption passes it", name)
		}
		for _, v := range job.Spec.Template.Spec.Volumes {
			if v.Name == jobspec.EncryptionVolumeName {
				t.Errorf("%s without encryption mounts it", name)
			}
		}
	}
}
