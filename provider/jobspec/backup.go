package jobspec

import (
	"path"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/worldbackup/worldbackup/provider/naming"
)

// ComponentBackup is the app.kubernetes.io/component label of backup Jobs.
const ComponentBackup = "backup"

// ConfigFileName is the archiver's config file inside the config Secret.
const ConfigFileName = "felis.toml"

// BackupCapabilities are the capabilities the backup Job's root process
// keeps in baseline mode: DAC_OVERRIDE only, to read files the game wrote
// 0600 under its own UID.
var BackupCapabilities = []corev1.Capability{"DAC_OVERRIDE"}

// Volume names of the backup Job (the restore Job uses the same names).
const (
	WorldVolumeName  = "world"
	BackupVolumeName = "backups"
	ConfigVolumeName = "config"
	RconVolumeName   = "rcon"
)

// RconMountPath is where the backup Job mounts the RCON password Secret.
const RconMountPath = "/etc/felis-rcon"

// Rcon says how the backup Job reaches the game server to quiesce it.
type Rcon struct {
	Address    string // host:port
	SecretName string // the Secret holding the password
	SecretKey  string // its key
	Required   bool   // an unreachable server fails the run
}

// Retention is the prune the backup Job runs after its run (archiver
// backup --keep-*); zero counts are left out.
type Retention struct {
	KeepLast, KeepHourly, KeepDaily, KeepWeekly, KeepMonthly, KeepYearly int
	KeepWithin                                                           string // e.g. "30d"; "" = none
	MinKeep                                                              int
	Grace                                                                string // "" = the archiver's default (1h)
}

// Args returns the archiver flags of r.
func (r Retention) Args() []string {
	var args []string
	for _, f := range []struct {
		flag string
		n    int
	}{{"--keep-last", r.KeepLast}, {"--keep-hourly", r.KeepHourly}, {"--keep-daily", r.KeepDaily},
		{"--keep-weekly", r.KeepWeekly}, {"--keep-monthly", r.KeepMonthly}, {"--keep-yearly", r.KeepYearly}} {
		if f.n > 0 {
			args = append(args, f.flag, strconv.Itoa(f.n))
		}
	}
	if r.KeepWithin != "" {
		args = append(args, "--keep-within", r.KeepWithin)
	}
	args = append(args, "--min-keep", strconv.Itoa(r.MinKeep))
	if r.Grace != "" {
		args = append(args, "--grace", r.Grace)
	}
	return args
}

// Backup holds the resolved, validated arguments of one backup Job: those
// of every Job (the world claim mounted read-only, the backup claim
// read-write) and the backup's own.
type Backup struct {
	Job

	FormerOwner string // "" = none

	ConfigSecretName string
	ConfigMountPath  string // config Secret mount, read-only

	Compression string   // zstd | gzip | none
	Excludes    []string // nil = the config file's list

	Rcon      *Rcon      // nil: the world is read without quiescing the server
	Retention *Retention // nil: no prune after the run
}

// BackupJobName returns the backup Job's name for server and runID.
func BackupJobName(server, runID string) string {
	return naming.JobName(server, naming.KindBackup, runID)
}

// BackupArgs returns the archiver's command-line arguments for b (after the
// command ArchiverPath). The config Secret's database URL is read from the
// mounted file, never passed here.
func BackupArgs(b Backup) []string {
	args := []string{"backup", "--server", b.Server, "--run-id", b.RunID}
	if b.FormerOwner != "" {
		args = append(args, "--former-owner", b.FormerOwner)
	}
	args = append(args,
		"--world", b.WorldRoot,
		"--config", path.Join(b.ConfigMountPath, ConfigFileName),
		"--archive-root", b.BackupRoot,
		"--compression", b.Compression,
	)
	for _, e := range b.Excludes {
		args = append(args, "--exclude", e)
	}
	if r := b.Rcon; r != nil {
		// The password is read from the mounted Secret, never passed here.
		args = append(args, "--rcon", r.Address, "--rcon-password-file", path.Join(RconMountPath, r.SecretKey))
		if !r.Required {
			args = append(args, "--rcon-required=false")
		}
	}
	if b.Retention != nil {
		args = append(args, b.Retention.Args()...)
	}
	return append(args, "--log-format", "json")
}

// BuildBackup returns the backup Job of b: one pod, never restarted in place,
// running `archiver backup` with the world claim read-only, the backup claim
// read-write, the config Secret read-only (0400), a small writable /tmp, no
// service-account token, and the identity of b.Identity.Mode.
func BuildBackup(b Backup) *batchv1.Job {
	tmpVolume, tmpMount := TmpVolume()
	mounts := []corev1.VolumeMount{
		{Name: WorldVolumeName, MountPath: b.WorldRoot, ReadOnly: true},
		{Name: BackupVolumeName, MountPath: b.BackupRoot},
		{Name: ConfigVolumeName, MountPath: b.ConfigMountPath, ReadOnly: true},
		tmpMount,
	}
	volumes := []corev1.Volume{
		ClaimVolume(WorldVolumeName, b.WorldClaimName, true),
		ClaimVolume(BackupVolumeName, b.BackupClaimName, false),
		SecretVolume(ConfigVolumeName, b.ConfigSecretName),
		tmpVolume,
	}
	if r := b.Rcon; r != nil {
		mounts = append(mounts, corev1.VolumeMount{Name: RconVolumeName, MountPath: RconMountPath, ReadOnly: true})
		v := SecretVolume(RconVolumeName, r.SecretName)
		v.Secret.Items = []corev1.KeyToPath{{Key: r.SecretKey, Path: r.SecretKey}}
		volumes = append(volumes, v)
	}

	return BuildJob(b.Job, Pod{
		Component:    ComponentBackup,
		Args:         BackupArgs(b),
		Capabilities: BackupCapabilities,
		Mounts:       mounts,
		Volumes:      volumes,
	})
}
