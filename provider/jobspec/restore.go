package jobspec

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/worldbackup/worldbackup/jobapi"
	"github.com/worldbackup/worldbackup/provider/naming"
)

// ComponentRestore is the app.kubernetes.io/component label of restore Jobs.
const ComponentRestore = jobapi.KindRestore

// RestoreCapabilities are the capabilities the restore Job's root process
// keeps in baseline mode: CHOWN to give each restored file its owner from the
// archive (the game's UID), FOWNER to then set its mode and times, and
// DAC_OVERRIDE to move aside and remove the old world whatever its modes. All
// three are in the baseline Pod Security Standard's allowed list.
var RestoreCapabilities = []corev1.Capability{"CHOWN", "DAC_OVERRIDE", "FOWNER"}

// Restore holds the resolved, validated arguments of one restore Job: those
// of every Job (the world claim mounted read-write, the backup claim
// read-only) and the restore's own; ArchiveRef is under BackupRoot, or with
// Store an object's s3:// URL.
type Restore struct {
	Job

	ArchiveRef string // the archive's path in the pod, under BackupRoot; with Store its s3:// URL
	SHA256     string // its expected SHA-256, 64 lowercase hex digits
	Replace    bool   // pass --replace: replace a world that is not empty
	MaxBytes   int64  // --max-bytes; 0 = the archiver's default
	MaxEntries int64  // --max-entries; 0 = the archiver's default

	// ByRun, when its FromRun is set, restores a recorded run in place of
	// ArchiveRef and SHA256 (both then unused).
	ByRun

	// Store holds the settings and credentials of the S3 store ArchiveRef
	// is an object of (its URL is unused); nil: ArchiveRef is a file on the
	// backup claim. With a store, BackupClaimName and BackupRoot are
	// unused: the Job mounts no backup claim.
	Store *S3Store
	// Encryption is the Secret key of the age identity an encrypted
	// archive is read with; nil: the archive is not encrypted.
	Encryption *Encryption
}

// RestoreJobName returns the restore Job's name for server and runID.
func RestoreJobName(server, runID string) string {
	return naming.JobName(server, jobapi.KindRestore, runID)
}

// Request returns the archiver's request of r. The restore needs no
// database and no config file. RunID is the restore's idempotency key: the
// archiver leaves a marker (.worldbackup-restored, with the run ID and the
// archive's checksum) in the restored world, and a second run of the same
// run ID (a Job re-created after its TTL, a replacement, also with another
// archive, GitOps) exits 0 without touching the world.
func (r Restore) Request() jobapi.Restore {
	req := jobapi.Restore{
		RunID:      r.RunID,
		Archive:    r.ArchiveRef,
		SHA256:     r.SHA256,
		Into:       r.WorldRoot,
		Replace:    r.Replace,
		MaxBytes:   r.MaxBytes,
		MaxEntries: r.MaxEntries,
		LogFormat:  jobapi.LogJSON,
	}
	req.Notify = r.Notify.Request()
	if r.FromRun != "" {
		req.Archive, req.SHA256, req.ArchiveFrom = "", "", jobapi.ResolvedPath
	}
	if r.Store != nil {
		// The credentials are read from the mounted Secret, never passed here.
		req.S3 = r.Store.Settings()
	}
	if e := r.Encryption; e != nil {
		req.EncryptionKeyFile = e.KeyFile()
	}
	return req
}

// ResolveRequest returns the request of the init container of a restore by
// run (FromRun set); see ByRun.ResolveRequest. A run the catalog no longer
// has is handed on as gone (AllowGone): a restore Job re-created after a
// prune removed its run (an image change replaces it) finds its marker in
// the world and does nothing, and one that never ran is refused there.
func (r Restore) ResolveRequest() jobapi.Resolve {
	req := r.ByRun.ResolveRequest(r.Server, r.Namespace, r.BackupRoot, r.Store)
	req.AllowGone = true
	return req
}

// RestoreArgs returns the archiver's command-line arguments for r (after the
// command ArchiverPath).
func RestoreArgs(r Restore) []string { return r.Request().Args() }

// BuildRestore returns the restore Job of r: one pod, never restarted in
// place, running `archiver restore` with the backup claim read-only (at the
// volume and at the mount), the world claim read-write, a small writable
// /tmp, no config Secret (the restore needs no database), no
// service-account token, and the identity of r.Identity.Mode. With an S3
// store it mounts the credentials Secret's two keys read-only (0400) in
// place of the backup claim. A restore by run (FromRun) adds the resolve
// init container: the config Secret read-only and the resolved-run emptyDir
// read-write, no world and no backup claim, no capability; the extractor
// mounts that emptyDir read-only and still no config Secret.
func BuildRestore(r Restore) *batchv1.Job {
	tmpVolume, tmpMount := TmpVolume()
	mounts := []corev1.VolumeMount{{Name: WorldVolumeName, MountPath: r.WorldRoot}}
	volumes := []corev1.Volume{ClaimVolume(WorldVolumeName, r.WorldClaimName, false)}
	if r.Store == nil {
		mounts = append(mounts, corev1.VolumeMount{Name: BackupVolumeName, MountPath: r.BackupRoot, ReadOnly: true})
		volumes = append(volumes, ClaimVolume(BackupVolumeName, r.BackupClaimName, true))
	}
	mounts, volumes = append(mounts, tmpMount), append(volumes, tmpVolume)
	if r.Store != nil {
		v, m := r.Store.Volume()
		mounts, volumes = append(mounts, m), append(volumes, v)
	}
	if e := r.Encryption; e != nil {
		v, m := e.Volume()
		mounts, volumes = append(mounts, m), append(volumes, v)
	}

	volumes, mounts, inits := r.ByRun.add(r.ResolveRequest(), volumes, mounts)

	return BuildJob(r.Job, Pod{
		Component:    ComponentRestore,
		Args:         RestoreArgs(r),
		Capabilities: RestoreCapabilities,
		Mounts:       mounts,
		Volumes:      volumes,
		Init:         inits,
	})
}
