package jobspec

import (
	"path"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/worldbackup/worldbackup/jobapi"
	"github.com/worldbackup/worldbackup/provider/naming"
)

// ComponentBackup is the app.kubernetes.io/component label of backup Jobs.
const ComponentBackup = jobapi.KindBackup

// BackupCapabilities are the capabilities the backup Job's root process
// keeps in baseline mode: DAC_OVERRIDE only, to read files the game wrote
// 0600 under its own UID.
var BackupCapabilities = []corev1.Capability{"DAC_OVERRIDE"}

// RconVolumeName is the backup Job's volume of the RCON password Secret.
const RconVolumeName = "rcon"

// RconMountPath is where the backup Job mounts the RCON password Secret.
const RconMountPath = jobapi.RconMountPath

// Rcon says how the backup Job reaches the game server to quiesce it.
type Rcon struct {
	Address    string // host:port
	SecretName string // the Secret holding the password
	SecretKey  string // its key
	Required   bool   // an unreachable server fails the run
}

// Retention is the prune a backup Job runs after its run (archiver backup
// --keep-*) or a prune Job runs: jobapi's request part.
type Retention = jobapi.Retention

// Backup holds the resolved, validated arguments of one backup Job: those
// of every Job (the world claim mounted read-only, the backup claim
// read-write) and the backup's own.
type Backup struct {
	Job

	FormerOwner string // "" = none

	ConfigSecretName string
	ConfigMountPath  string // config Secret mount, read-only

	Compression string   // zstd | gzip | none; "" with the chunked format
	Format      string   // tar | chunked, always passed: it decides the archive ref
	Excludes    []string // nil = the config file's list

	// Store is the S3 store the archive goes to; nil: the folder store on
	// the backup claim. With a store, BackupClaimName and BackupRoot are
	// unused: the Job mounts no backup claim.
	Store *S3Store

	Rcon      *Rcon      // nil: the world is read without quiescing the server
	Retention *Retention // nil: no prune after the run
	// Encryption is the Secret key of the age identity the archive is
	// encrypted to; nil: none (the config file's [archive]
	// encryption_key_file would name a file no Job mounts).
	Encryption *Encryption
}

// BackupJobName returns the backup Job's name for server and runID.
func BackupJobName(server, runID string) string {
	return naming.JobName(server, jobapi.KindBackup, runID)
}

// Request returns the archiver's request of b: the database URL is read
// from the mounted config file, the credentials and the RCON password from
// mounted Secrets, never passed here.
func (b Backup) Request() jobapi.Backup {
	req := jobapi.Backup{
		Server:      b.Server,
		RunID:       b.RunID,
		FormerOwner: b.FormerOwner,
		Namespace:   b.Namespace,
		World:       b.WorldRoot,
		Config:      path.Join(b.ConfigMountPath, ConfigFileName),
		Compression: b.Compression,
		Format:      b.Format,
		Excludes:    b.Excludes,
		Retention:   b.Retention,
		LogFormat:   jobapi.LogJSON,
	}
	req.Notify = b.Notify.Request()
	if b.Store != nil {
		req.Store, req.S3 = b.Store.URL, b.Store.Settings()
	} else {
		req.ArchiveRoot = b.BackupRoot
	}
	if e := b.Encryption; e != nil {
		req.EncryptionKeyFile = e.KeyFile()
	}
	if r := b.Rcon; r != nil {
		req.Rcon = jobapi.Rcon{Address: r.Address, PasswordFile: path.Join(RconMountPath, r.SecretKey), Optional: !r.Required}
	}
	return req
}

// BackupArgs returns the archiver's command-line arguments for b (after the
// command ArchiverPath).
func BackupArgs(b Backup) []string { return b.Request().Args() }

// BuildBackup returns the backup Job of b: one pod, never restarted in place,
// running `archiver backup` with the world claim read-only, the backup claim
// read-write (with an S3 store: the credentials Secret's two keys read-only,
// 0400, and no backup claim), the config Secret read-only (0400), a small
// writable /tmp, no service-account token, and the identity of
// b.Identity.Mode.
func BuildBackup(b Backup) *batchv1.Job {
	tmpVolume, tmpMount := TmpVolume()
	mounts := []corev1.VolumeMount{{Name: WorldVolumeName, MountPath: b.WorldRoot, ReadOnly: true}}
	volumes := []corev1.Volume{ClaimVolume(WorldVolumeName, b.WorldClaimName, true)}
	if b.Store == nil {
		mounts = append(mounts, corev1.VolumeMount{Name: BackupVolumeName, MountPath: b.BackupRoot})
		volumes = append(volumes, ClaimVolume(BackupVolumeName, b.BackupClaimName, false))
	}
	mounts = append(mounts, corev1.VolumeMount{Name: ConfigVolumeName, MountPath: b.ConfigMountPath, ReadOnly: true}, tmpMount)
	volumes = append(volumes, SecretVolume(ConfigVolumeName, b.ConfigSecretName), tmpVolume)
	if b.Store != nil {
		v, m := b.Store.Volume()
		mounts, volumes = append(mounts, m), append(volumes, v)
	}
	if r := b.Rcon; r != nil {
		mounts = append(mounts, corev1.VolumeMount{Name: RconVolumeName, MountPath: RconMountPath, ReadOnly: true})
		v := SecretVolume(RconVolumeName, r.SecretName)
		v.Secret.Items = []corev1.KeyToPath{{Key: r.SecretKey, Path: r.SecretKey}}
		volumes = append(volumes, v)
	}
	if e := b.Encryption; e != nil {
		v, m := e.Volume()
		mounts, volumes = append(mounts, m), append(volumes, v)
	}

	return BuildJob(b.Job, Pod{
		Component:    ComponentBackup,
		Args:         BackupArgs(b),
		Capabilities: BackupCapabilities,
		Mounts:       mounts,
		Volumes:      volumes,
	})
}

// WithConcurrency returns a copy of the backup Job job whose archiver
// waits for one of n slots of group in the catalog before it runs
// (jobapi.ConcurrencyArgs): the door of a concurrency cap, which creates a
// capped backup's Job before its turn, so that its pod starts while others
// run. job itself is not changed.
func WithConcurrency(job *batchv1.Job, n int, group string) *batchv1.Job {
	job = job.DeepCopy()
	for i := range job.Spec.Template.Spec.Containers {
		if c := &job.Spec.Template.Spec.Containers[i]; c.Name == ContainerName {
			c.Args = append(c.Args, jobapi.ConcurrencyArgs(n, group)...)
		}
	}
	return job
}
