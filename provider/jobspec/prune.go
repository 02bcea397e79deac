package jobspec

import (
	"path"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/worldbackup/worldbackup/jobapi"
	"github.com/worldbackup/worldbackup/provider/naming"
)

// ComponentPrune is the app.kubernetes.io/component label of prune Jobs.
const ComponentPrune = jobapi.KindPrune

// PruneCapabilities are the capabilities the prune Job's root process keeps
// in baseline mode: DAC_OVERRIDE only, to remove archives that a backup in
// restricted mode wrote under another UID.
var PruneCapabilities = []corev1.Capability{"DAC_OVERRIDE"}

// Prune holds the resolved, validated arguments of one prune Job: those of
// every Job (its world claim and root unused: a prune mounts no world; the
// backup claim read-write, or the S3 store) and the prune's own. The run ID
// only names the Job: a prune is idempotent by itself.
type Prune struct {
	Job

	ConfigSecretName string
	ConfigMountPath  string // config Secret mount, read-only

	// Store is the S3 store whose archives expire; nil: the folder store on
	// the backup claim. With a store, BackupClaimName and BackupRoot are
	// unused: the Job mounts no backup claim.
	Store *S3Store

	Retention Retention
	DryRun    bool // --dry-run: report, change nothing
}

// PruneJobName returns the prune Job's name for server and runID.
func PruneJobName(server, runID string) string {
	return naming.JobName(server, jobapi.KindPrune, runID)
}

// Request returns the archiver's request of p: the database URL is read
// from the mounted config file, the credentials from the mounted Secret,
// never passed here.
func (p Prune) Request() jobapi.Prune {
	req := jobapi.Prune{
		Server:    p.Server,
		Namespace: p.Namespace,
		Config:    path.Join(p.ConfigMountPath, ConfigFileName),
		Retention: p.Retention,
		DryRun:    p.DryRun,
		LogFormat: jobapi.LogJSON,
	}
	req.Notify = p.Notify.Request()
	if p.Store != nil {
		req.Store, req.S3 = p.Store.URL, p.Store.Settings()
	} else {
		req.ArchiveRoot = p.BackupRoot
	}
	return req
}

// PruneArgs returns the archiver's command-line arguments for p (after the
// command ArchiverPath).
func PruneArgs(p Prune) []string { return p.Request().Args() }

// BuildPrune returns the prune Job of p: one pod, never restarted in place,
// running `archiver prune` with the backup claim read-write (with an S3
// store: the credentials Secret's two keys read-only, 0400, and no backup
// claim), the config Secret read-only (0400), a small writable /tmp, no
// world claim, no service-account token, and the identity of
// p.Identity.Mode.
func BuildPrune(p Prune) *batchv1.Job {
	tmpVolume, tmpMount := TmpVolume()
	var mounts []corev1.VolumeMount
	var volumes []corev1.Volume
	if p.Store == nil {
		mounts = append(mounts, corev1.VolumeMount{Name: BackupVolumeName, MountPath: p.BackupRoot})
		volumes = append(volumes, ClaimVolume(BackupVolumeName, p.BackupClaimName, false))
	}
	mounts = append(mounts, corev1.VolumeMount{Name: ConfigVolumeName, MountPath: p.ConfigMountPath, ReadOnly: true}, tmpMount)
	volumes = append(volumes, SecretVolume(ConfigVolumeName, p.ConfigSecretName), tmpVolume)
	if p.Store != nil {
		v, m := p.Store.Volume()
		mounts, volumes = append(mounts, m), append(volumes, v)
	}
	return BuildJob(p.Job, Pod{
		Component:    ComponentPrune,
		Args:         PruneArgs(p),
		Capabilities: PruneCapabilities,
		Mounts:       mounts,
		Volumes:      volumes,
	})
}
