package jobspec

import (
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/worldbackup/worldbackup/provider/naming"
)

// ComponentRestore is the app.kubernetes.io/component label of restore Jobs.
const ComponentRestore = "restore"

// RestoreCapabilities are the capabilities the restore Job's root process
// keeps in baseline mode: CHOWN to give each restored file its owner from the
// archive (the game's UID), FOWNER to then set its mode and times, and
// DAC_OVERRIDE to move aside and remove the old world whatever its modes. All
// three are in the baseline Pod Security Standard's allowed list.
var RestoreCapabilities = []corev1.Capability{"CHOWN", "DAC_OVERRIDE", "FOWNER"}

// Restore holds the resolved, validated arguments of one restore Job: those
// of every Job (the world claim mounted read-write, the backup claim
// read-only) and the restore's own; ArchiveRef is under BackupRoot.
type Restore struct {
	Job

	ArchiveRef string // the archive's path in the pod, under BackupRoot
	SHA256     string // its expected SHA-256, 64 lowercase hex digits
	Replace    bool   // pass --replace: replace a world that is not empty
	MaxBytes   int64  // --max-bytes; 0 = the archiver's default
	MaxEntries int64  // --max-entries; 0 = the archiver's default
}

// RestoreJobName returns the restore Job's name for server and runID.
func RestoreJobName(server, runID string) string {
	return naming.JobName(server, naming.KindRestore, runID)
}

// RestoreArgs returns the archiver's command-line arguments for r (after the
// command ArchiverPath). The restore needs no database and no config file.
// --run-id is the restore's idempotency key: the archiver leaves a marker
// (.worldbackup-restored, with the run ID and the archive's checksum) in the
// restored world, and a second run of the same restore (a Job re-created
// after its TTL, a replacement, GitOps) exits 0 without touching the world.
func RestoreArgs(r Restore) []string {
	args := []string{"restore", "--run-id", r.RunID, "--archive", r.ArchiveRef, "--sha256", r.SHA256, "--into", r.WorldRoot}
	if r.Replace {
		args = append(args, "--replace")
	}
	if r.MaxBytes > 0 {
		args = append(args, "--max-bytes", strconv.FormatInt(r.MaxBytes, 10))
	}
	if r.MaxEntries > 0 {
		args = append(args, "--max-entries", strconv.FormatInt(r.MaxEntries, 10))
	}
	return append(args, "--log-format", "json")
}

// BuildRestore returns the restore Job of r: one pod, never restarted in
// place, running `archiver restore` with the backup claim read-only (at the
// volume and at the mount), the world claim read-write, a small writable
// /tmp, no config Secret (the restore needs no database), no
// service-account token, and the identity of r.Identity.Mode.
func BuildRestore(r Restore) *batchv1.Job {
	tmpVolume, tmpMount := TmpVolume()

	return BuildJob(r.Job, Pod{
		Component:    ComponentRestore,
		Args:         RestoreArgs(r),
		Capabilities: RestoreCapabilities,
		Mounts: []corev1.VolumeMount{
			{Name: WorldVolumeName, MountPath: r.WorldRoot},
			{Name: BackupVolumeName, MountPath: r.BackupRoot, ReadOnly: true},
			tmpMount,
		},
		Volumes: []corev1.Volume{
			ClaimVolume(WorldVolumeName, r.WorldClaimName, false),
			ClaimVolume(BackupVolumeName, r.BackupClaimName, true),
			tmpVolume,
		},
	})
}
