package jobspec

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/worldbackup/worldbackup/jobapi"
)

// The S3 credentials Secret in the pod: its two keys are mounted read-only
// (0400) under fixed file names, whatever their keys in the Secret, and the
// archiver's --s3-access-key-file and --s3-secret-key-file read them there.
const (
	S3VolumeName    = "s3-credentials"
	S3MountPath     = jobapi.S3MountPath
	S3AccessKeyFile = jobapi.S3AccessKeyFile
	S3SecretKeyFile = jobapi.S3SecretKeyFile
)

// S3Store is an S3-compatible archive store: a Job with one archives into
// (or restores from) the bucket instead of the backup claim, which it then
// does not mount. The credentials never reach arguments or environment:
// the Job mounts them from the Secret SecretName.
type S3Store struct {
	URL          string // s3://bucket or s3://bucket/prefix; the backup's --store
	Endpoint     string // http(s)://host[:port]; "" = AWS
	Region       string // "" = the archiver's default
	PathStyle    bool   // address the bucket as endpoint/bucket
	SecretName   string // the credentials Secret
	AccessKeyKey string // its key holding the access key ID
	SecretKeyKey string // its key holding the secret access key
}

// Settings returns the archiver's S3 settings of s: the server's settings
// and the credential files, never the credentials. The store's URL is not
// among them (the backup passes it as --store, the restore's --archive is an
// object's URL).
func (s S3Store) Settings() jobapi.S3 { return jobapi.PodS3(s.Endpoint, s.Region, s.PathStyle) }

// Args returns the archiver's --s3-* arguments of s (see Settings).
func (s S3Store) Args() []string { return s.Settings().Args() }

// Volume returns the credentials Secret's volume, only its two keys, each
// under its fixed file name with mode 0400, and its read-only mount.
func (s S3Store) Volume() (corev1.Volume, corev1.VolumeMount) {
	v := SecretVolume(S3VolumeName, s.SecretName)
	v.Secret.Items = []corev1.KeyToPath{
		{Key: s.AccessKeyKey, Path: S3AccessKeyFile},
		{Key: s.SecretKeyKey, Path: S3SecretKeyFile},
	}
	return v, corev1.VolumeMount{Name: S3VolumeName, MountPath: S3MountPath, ReadOnly: true}
}
