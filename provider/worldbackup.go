// Package provider holds the worldbackup Pulumi components. WorldBackup
// declares one backup run of a Minecraft world as a Kubernetes Job that runs
// `archiver backup`; WorldRestore declares one restore of an archive into a
// world as a Job that runs `archiver restore`; WorldPrune one prune of a
// server's archives (`archiver prune`); WorldBackupSchedule a CronJob of
// backups. Each Job is built by a pure
// builder in package jobspec from validated inputs, so the same Job comes out
// of a Go program and of the component-provider plugin (pulumi-go-provider's
// infer.ComponentF serves NewWorldBackup and NewWorldRestore as they are).
package provider

import (
	"fmt"

	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/worldbackup/worldbackup/provider/jobspec"
	"github.com/worldbackup/worldbackup/provider/preflight"
)

// WorldBackupType is the Pulumi type token of WorldBackup, the same from Go
// and through the plugin (see WorldBackup.Annotate).
const WorldBackupType = "worldbackup:index:WorldBackup"

// WorldBackup is one backup run: a Kubernetes Job that archives a server's
// world into the backup volume and records it in the catalog. A new runId
// replaces the Job (a new backup); `pulumi up` with nothing changed runs none.
type WorldBackup struct {
	pulumi.ResourceState

	// JobName is the Job's metadata.name, <server>-backup-<suffix>.
	JobName pulumi.StringOutput `pulumi:"jobName"`
	// Namespace is the Job's namespace.
	Namespace pulumi.StringOutput `pulumi:"namespace"`
	// RunID is the run ID of the backup.
	RunID pulumi.StringOutput `pulumi:"runId"`
	// ArchiveRef is the absolute path of the archive inside the backup
	// volume: <backupRoot>/<server>/<runId>.tar.zst (.tar.gz, .tar).
	ArchiveRef pulumi.StringOutput `pulumi:"archiveRef"`
}

// NewWorldBackup validates args and registers a WorldBackup with its one
// child, a kubernetes:batch/v1:Job named name+"-job". Invalid or missing
// inputs give an *InputError listing them all, before anything is
// registered. Providers passed in opts (pulumi.Provider, pulumi.Providers)
// reach the Job through its parent. The Job's create/update timeout is the
// timeout input; with skipAwait the Kubernetes provider does not wait for the
// Job to finish.
//
// The outputs resolve once the Job is registered: after `pulumi up` has
// waited for it (unless skipAwait), so a resource that depends on archiveRef
// waits for the backup.
func NewWorldBackup(ctx *pulumi.Context, name string, args WorldBackupArgs, opts ...pulumi.ResourceOption) (*WorldBackup, error) {
	r, err := args.resolve()
	if err != nil {
		return nil, err
	}
	job := jobspec.BuildBackup(r.Job)
	secrets := map[string][]string{r.Job.ConfigSecretName: {jobspec.ConfigFileName}}
	if rc := r.Job.Rcon; rc != nil {
		secrets[rc.SecretName] = append(secrets[rc.SecretName], rc.SecretKey)
	}
	req := preflight.FromJob(job, secrets)
	req.SecretHints = map[string]string{
		r.Job.ConfigSecretName: fmt.Sprintf("kubectl -n %s create secret generic %s --from-file=%s", job.Namespace, r.Job.ConfigSecretName, jobspec.ConfigFileName),
	}
	if rc := r.Job.Rcon; rc != nil {
		req.SecretHints[rc.SecretName] = fmt.Sprintf("kubectl -n %s create secret generic %s --from-literal=%s=<the server's rcon.password>", job.Namespace, rc.SecretName, rc.SecretKey)
	}
	req.SecurityHint = "set securityMode restricted"
	if err := checkCluster(ctx, "worldbackup", r.Preflight, req); err != nil {
		return nil, err
	}

	comp := &WorldBackup{}
	out, err := registerJobComponent(ctx, WorldBackupType, name, comp, job, r.Timeout, r.Job.RunID, r.ArchiveRef, opts...)
	if err != nil {
		return nil, err
	}
	comp.JobName, comp.Namespace, comp.RunID, comp.ArchiveRef = out.JobName, out.Namespace, out.RunID, out.ArchiveRef
	return comp, nil
}

// Annotate describes WorldBackup and its outputs in the plugin's schema and
// sets its token to worldbackup:index:WorldBackup.
func (w *WorldBackup) Annotate(a infer.Annotator) {
	a.SetToken("index", "WorldBackup")
	a.Describe(w, "One backup run of a Minecraft world: a Kubernetes Job that runs `archiver backup`, "+
		"which streams the world (mounted read-only) into a compressed tar archive on the backup volume "+
		"and records it in the world_backups catalog. The runId is the idempotency key: a new runId "+
		"replaces the Job and performs a new backup; `pulumi up` with nothing changed performs none, "+
		"and a retried pod of a run that is already recorded does nothing.")
	a.Describe(&w.JobName, "The Job's metadata.name: <server>-backup-<suffix>, the suffix derived from runId.")
	a.Describe(&w.Namespace, "The namespace of the Job.")
	a.Describe(&w.RunID, "The run ID of this backup (the catalog's run_id).")
	a.Describe(&w.ArchiveRef, "The absolute path of the archive inside the backup volume, as the archiver "+
		"writes it and records it in the catalog: <backupRoot>/<server>/<runId>.tar.zst "+
		"(.tar.gz with gzip, .tar with none).")
}

// Annotate describes every input of WorldBackup in the plugin's schema.
func (a *WorldBackupArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.Server, "The game server's name: a DNS-1123 label of at most 46 characters "+
		"(lowercase letters, digits, '-'), usually its StatefulSet name. It names the world claim, "+
		"the Job and the archive folder.")
	an.Describe(&a.FormerOwner, "Optional: the player or team who ran the server, recorded in the catalog "+
		"(e.g. when a server is retired).")
	an.Describe(&a.RunID, "The run ID, the idempotency key of the backup: 1 to 128 characters from "+
		"A-Z a-z 0-9 . _ -, starting with a letter or digit. It names the archive file. A new runId "+
		"performs a new backup; the same runId performs none.")
	an.Describe(&a.Image, "The archiver image, e.g. ghcr.io/worldbackup/archiver:v0.1.0. Its binary is "+
		"/usr/local/bin/archiver.")
	an.Describe(&a.BackupClaimName, "The PersistentVolumeClaim that holds the archives, mounted read-write "+
		"at backupRoot.")
	an.Describe(&a.Namespace, "The namespace of the Job, where the world and backup claims live. Default: minecraft.")
	an.Describe(&a.ServiceAccountName, "The Job's service account (pre-existing, with no permissions needed; "+
		"its token is not mounted). Default: felis-restore.")
	an.Describe(&a.ConfigSecretName, "The Secret holding felis.toml (the catalog's database URL), mounted "+
		"read-only (mode 0400) at configMountPath. Default: felis-config.")
	an.Describe(&a.ConfigMountPath, "Where the config Secret is mounted; the archiver reads "+
		"<configMountPath>/felis.toml. Default: /etc/felis.")
	an.Describe(&a.BackupRoot, "Where the backup claim is mounted: the archive root, passed as "+
		"--archive-root. Default: /backups.")
	an.Describe(&a.WorldRoot, "Where the world claim is mounted (read-only). Default: /world.")
	an.Describe(&a.WorldClaimName, "The world's PersistentVolumeClaim, mounted read-only. "+
		"Default: world-<server>-0 (the StatefulSet claim of volume template world, ordinal 0).")
	an.Describe(&a.Deadline, "How long the backup may run, a Go duration (activeDeadlineSeconds). Default: 30m.")
	an.Describe(&a.CPULimit, "The container's CPU limit (a Kubernetes quantity); it requests 100m or "+
		"the limit if lower. Default: 1.")
	an.Describe(&a.MemoryLimit, "The container's memory limit (a Kubernetes quantity); it requests 256Mi "+
		"or the limit if lower. Default: 1Gi.")
	an.Describe(&a.SecurityMode, "baseline or restricted. baseline (default): root with every capability "+
		"dropped except DAC_OVERRIDE, so it reads the game's 0600 files whatever their owner; meets the "+
		"baseline Pod Security Standard. restricted: runs as runAsUser/runAsGroup (default 1000/1000, "+
		"the game's UID/GID) with every capability dropped and runAsNonRoot; meets the restricted Pod "+
		"Security Standard. Both: no privilege escalation, seccomp RuntimeDefault, read-only root "+
		"filesystem.")
	an.Describe(&a.RunAsUser, "The UID the archiver runs as. Default: 0 in baseline mode, 1000 in "+
		"restricted mode (which refuses 0).")
	an.Describe(&a.RunAsGroup, "The GID the archiver runs as. Default: 0 in baseline mode, 1000 in restricted mode.")
	an.Describe(&a.FSGroup, "The pod's fsGroup: kubelet gives the writable volumes and the config Secret's "+
		"files this group (fsGroupChangePolicy OnRootMismatch). Omitted when 0. Default: omitted in "+
		"baseline mode, runAsGroup in restricted mode (needed to read the config Secret as non-root).")
	an.Describe(&a.TTLAfterFinished, "How long the finished Job is kept before Kubernetes deletes it, a Go "+
		"duration of at least 1s (ttlSecondsAfterFinished). Default: none, the Job stays until a new runId "+
		"replaces it. With a TTL, `pulumi refresh` (or `up --refresh`) after the deletion forgets the Job and the "+
		"next `pulumi up` creates it again with the same runId; the archiver then does nothing (the run is "+
		"already recorded), but `pulumi up` shows a create.")
	an.Describe(&a.BackoffLimit, "How many times a failed pod is retried (backoffLimit). Default: 0, so a failed "+
		"pod fails the Job at once (reason BackoffLimitExceeded) and `pulumi up` reports it with the archiver's "+
		"message. With more, a configuration error is retried too (10s, 20s, 40s… apart) before `pulumi up` "+
		"reports it.")
	an.Describe(&a.Compression, "zstd, gzip or none: the archive's compression and extension "+
		"(.tar.zst, .tar.gz, .tar). Default: zstd.")
	an.Describe(&a.Excludes, "Globs of world paths to leave out (each passed as --exclude); when set they "+
		"replace the config file's list (default *.jar, cache/, logs/, *.tmp).")
	an.Describe(&a.NodeName, "Runs the pod on this node (bypassing the scheduler), e.g. the node of a "+
		"ReadWriteOnce world volume. Exclusive with nodeSelector.")
	an.Describe(&a.NodeSelector, "Node labels the pod's node must have, rendered as a required node "+
		"affinity (so the pod lands where a ReadWriteOnce world volume can attach). Exclusive with nodeName.")
	an.Describe(&a.Labels, descLabels)
	an.Describe(&a.Annotations, descAnnotations)
	an.Describe(&a.SkipAwait, "Do not wait for the Job to finish (annotation pulumi.com/skipAwait); "+
		"`pulumi up` then does not report the backup's result. Default: false.")
	an.Describe(&a.Timeout, descTimeout)
	an.Describe(&a.GamePodSelector, descGamePodSelector)
	an.Describe(&a.GamePodAffinity, descGamePodAffinity)
	an.Describe(&a.Rcon, "Quiesce the game server over RCON while the world is read: save-off and save-all flush before, "+
		"save-on after the archive is written (on every exit path). Needs the server's RCON password in a Secret.")
	an.Describe(&a.Retention, "Prune the server's archives after a successful run, in the same pod: restic's forget rules "+
		"with a floor (minKeep, the newest run, runs younger than grace). Rows go first, then files.")
	an.Describe(&a.ReplaceUnready, descReplaceUnready)
	an.Describe(&a.Preflight, descPreflight)
	an.Describe(&a.KubeContext, descKubeContext)
}
