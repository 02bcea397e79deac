package jobspec

import (
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/worldbackup/worldbackup/jobapi"
	"github.com/worldbackup/worldbackup/provider/naming"
)

// ComponentVerify is the app.kubernetes.io/component label of verify Jobs.
const ComponentVerify = jobapi.KindVerify

// The verify Job's scratch volume, where the archive is restored for the
// world check.
const (
	ScratchVolumeName = "scratch"
	ScratchPath       = "/scratch"
)

// DefaultScratchSize is the scratch volume's size when none is given: the
// emptyDir's sizeLimit, or the ephemeral claim's request.
var DefaultScratchSize = resource.MustParse("16Gi")

// Verify holds the resolved, validated arguments of one verify Job: those
// of every Job (the backup claim mounted read-only; the world claim is not
// mounted at all, WorldClaimName and WorldRoot are unused) and the
// verify's own. ArchiveRef is under BackupRoot, or with Store an object's
// s3:// URL.
type Verify struct {
	Job

	ArchiveRef string // the archive's path in the pod, under BackupRoot; with Store its s3:// URL
	SHA256     string // its expected SHA-256, 64 lowercase hex digits
	Chunks     string // --chunks, the chunk sample (10%); "" = every chunk

	Scratch Scratch

	// ByRun, when its FromRun is set, verifies a recorded run (a run ID or
	// the newest) in place of ArchiveRef and SHA256 (both then unused), as
	// a restore by run does.
	ByRun

	// Store holds the settings and credentials of the S3 store ArchiveRef
	// is an object of; nil: ArchiveRef is a file on the backup claim (as
	// Restore.Store).
	Store *S3Store
	// Encryption is the Secret key of the age identity an encrypted
	// archive is read with; nil: the archive is not encrypted.
	Encryption *Encryption
}

// Scratch is where the verify Job restores the archive: an emptyDir of at
// most Size, or, with StorageClassName, a generic ephemeral volume (a claim
// of that class the pod owns, deleted with it) of Size.
type Scratch struct {
	Size             resource.Quantity // zero: DefaultScratchSize
	StorageClassName string            // "": an emptyDir
}

// VerifyJobName returns the verify Job's name for server and runID.
func VerifyJobName(server, runID string) string {
	return naming.JobName(server, jobapi.KindVerify, runID)
}

// Request returns the archiver's request of v: verify the archive against
// its checksum (by run: those the init container resolved), restore it
// under the scratch mount and check the world. It needs no database and no
// config file.
func (v Verify) Request() jobapi.Verify {
	req := jobapi.Verify{
		Archive:    v.ArchiveRef,
		SHA256:     v.SHA256,
		WorldCheck: true,
		Chunks:     v.Chunks,
		Scratch:    ScratchPath,
		LogFormat:  jobapi.LogJSON,
	}
	req.Notify = v.Notify.Request()
	if v.FromRun != "" {
		req.Archive, req.SHA256, req.ArchiveFrom = "", "", jobapi.ResolvedPath
	}
	if v.Store != nil {
		req.S3 = v.Store.Settings() // the credentials are files of the mounted Secret
	}
	if e := v.Encryption; e != nil {
		req.EncryptionKeyFile = e.KeyFile()
	}
	return req
}

// VerifyArgs returns the archiver's command-line arguments for v (after the
// command ArchiverPath).
func VerifyArgs(v Verify) []string { return v.Request().Args() }

// Volume returns the scratch volume of s and its mount at ScratchPath.
func (s Scratch) Volume() (corev1.Volume, corev1.VolumeMount) {
	size := s.Size
	if size.IsZero() {
		size = DefaultScratchSize
	}
	v := corev1.Volume{Name: ScratchVolumeName}
	if s.StorageClassName == "" {
		v.EmptyDir = &corev1.EmptyDirVolumeSource{SizeLimit: new(size.DeepCopy())}
	} else {
		v.Ephemeral = &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{LabelName: AppName, LabelComponent: ComponentVerify}},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: new(s.StorageClassName),
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size.DeepCopy()}},
			},
		}}
	}
	return v, corev1.VolumeMount{Name: ScratchVolumeName, MountPath: ScratchPath}
}

// BuildVerify returns the verify Job of v: one pod, never restarted in
// place, running `archiver verify --world-check` with the backup claim
// read-only (or, with an S3 store, the credentials Secret's two keys
// 0400), the scratch volume read-write, a small writable /tmp, no world
// claim, no config Secret (no database), no service-account token, and
// the identity of v.Identity.Mode with the restore's capabilities in
// baseline mode (the check restores the archive with its owners, then
// reads files the game wrote 0600). With Encryption it mounts the key's
// Secret read-only; by run (FromRun) it adds the resolve init container,
// the only one with the config Secret, as BuildRestore does.
func BuildVerify(v Verify) *batchv1.Job {
	tmpVolume, tmpMount := TmpVolume()
	scratchVolume, scratchMount := v.Scratch.Volume()
	var mounts []corev1.VolumeMount
	var volumes []corev1.Volume
	if v.Store == nil {
		mounts = append(mounts, corev1.VolumeMount{Name: BackupVolumeName, MountPath: v.BackupRoot, ReadOnly: true})
		volumes = append(volumes, ClaimVolume(BackupVolumeName, v.BackupClaimName, true))
	}
	mounts, volumes = append(mounts, scratchMount, tmpMount), append(volumes, scratchVolume, tmpVolume)
	if v.Store != nil {
		vol, m := v.Store.Volume()
		mounts, volumes = append(mounts, m), append(volumes, vol)
	}
	if e := v.Encryption; e != nil {
		vol, m := e.Volume()
		mounts, volumes = append(mounts, m), append(volumes, vol)
	}
	volumes, mounts, inits := v.ByRun.add(v.ByRun.ResolveRequest(v.Server, v.Namespace, v.BackupRoot, v.Store), volumes, mounts)
	return BuildJob(v.Job, Pod{
		Component:    ComponentVerify,
		Args:         VerifyArgs(v),
		Capabilities: RestoreCapabilities,
		Mounts:       mounts,
		Volumes:      volumes,
		Init:         inits,
	})
}
