package jobspec

import (
	"path"

	corev1 "k8s.io/api/core/v1"

	"github.com/worldbackup/worldbackup/jobapi"
)

// The encryption Secret in the pod: its one key (an age identity) is
// mounted read-only (0400) under a fixed file name, whatever its key in the
// Secret, and the archiver's --encryption-key-file reads it there.
const (
	EncryptionVolumeName = "encryption-key"
	EncryptionMountPath  = jobapi.EncryptionMountPath
)

// Encryption names the Secret key holding the age identity a Job's archives
// are encrypted to (backup) or read with (restore). The identity never
// reaches arguments, environment or state: only the file's path does.
type Encryption struct {
	SecretName string
	SecretKey  string
}

// KeyFile is the identity's path in the pod, the --encryption-key-file
// argument.
func (e Encryption) KeyFile() string { return path.Join(EncryptionMountPath, jobapi.EncryptionKeyFile) }

// Volume returns the Secret's volume, only its one key under the fixed
// file name with mode 0400, and its read-only mount.
func (e Encryption) Volume() (corev1.Volume, corev1.VolumeMount) {
	v := SecretVolume(EncryptionVolumeName, e.SecretName)
	v.Secret.Items = []corev1.KeyToPath{{Key: e.SecretKey, Path: jobapi.EncryptionKeyFile}}
	return v, corev1.VolumeMount{Name: EncryptionVolumeName, MountPath: EncryptionMountPath, ReadOnly: true}
}
