package jobspec

import (
	"path"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/worldbackup/worldbackup/jobapi"
)

// ByRun is how a restore or a verify Job reads a recorded run in place of a
// given archive ref and checksum: FromRun, a run ID of FromServer ("" = the
// Job's own server) or jobapi.RunLatest, its newest successful run. An init
// container (ContainerResolve), the only one that mounts the config Secret
// ConfigSecretName (at ConfigMountPath), finds the run in the catalog and
// writes its archive ref and checksum to a small emptyDir; the Job's
// container reads them there (--archive-from), mounts no config Secret, and
// checks every byte against the checksum as before. The zero ByRun reads
// the archive given.
type ByRun struct {
	FromRun          string
	FromServer       string
	ConfigSecretName string
	ConfigMountPath  string
}

// ContainerResolve is the name of the init container that resolves FromRun.
const ContainerResolve = jobapi.KindResolve

// ResolvedVolumeName is the emptyDir the resolve init container writes the
// run's archive ref and checksum to; ResolvedSizeLimit bounds it.
const ResolvedVolumeName = "resolved"

// ResolvedSizeLimit caps the resolved-run emptyDir.
var ResolvedSizeLimit = resource.MustParse("1Mi")

// ResolveRequest returns the request of the init container of a Job of
// server in namespace by run: find the run of FromServer (or server; its
// latest as namespace sees it), refuse an archive the Job cannot read (not
// under backupRoot, or with store not an s3:// object), and write it to
// jobapi.ResolvedPath.
func (b ByRun) ResolveRequest(server, namespace, backupRoot string, store *S3Store) jobapi.Resolve {
	from := b.FromServer
	if from == "" {
		from = server
	}
	within := backupRoot
	if store != nil {
		within = jobapi.S3URLPrefix
	}
	return jobapi.Resolve{
		Server:    from,
		Namespace: namespace,
		FromRun:   b.FromRun,
		Config:    path.Join(b.ConfigMountPath, ConfigFileName),
		Within:    within,
		Out:       jobapi.ResolvedPath,
		LogFormat: jobapi.LogJSON,
	}
}

// add returns the Job's volumes and its container's mounts with what a Job
// by run adds (none when FromRun is unset), and its init containers: the
// resolve container running resolve, with the config Secret read-only and
// the resolved-run emptyDir read-write (no world, no backup claim, no
// capability), and that emptyDir read-only in the Job's container.
func (b ByRun) add(resolve jobapi.Resolve, volumes []corev1.Volume, mounts []corev1.VolumeMount) ([]corev1.Volume, []corev1.VolumeMount, []InitContainer) {
	if b.FromRun == "" {
		return volumes, mounts, nil
	}
	volumes = append(volumes,
		corev1.Volume{Name: ResolvedVolumeName, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			SizeLimit: new(ResolvedSizeLimit.DeepCopy()),
		}}},
		SecretVolume(ConfigVolumeName, b.ConfigSecretName))
	mounts = append(mounts, corev1.VolumeMount{Name: ResolvedVolumeName, MountPath: jobapi.ResolvedMountPath, ReadOnly: true})
	return volumes, mounts, []InitContainer{{
		Name: ContainerResolve,
		Args: resolve.Args(),
		Mounts: []corev1.VolumeMount{
			{Name: ConfigVolumeName, MountPath: b.ConfigMountPath, ReadOnly: true},
			{Name: ResolvedVolumeName, MountPath: jobapi.ResolvedMountPath},
		},
	}}
}
