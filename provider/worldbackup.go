package provider

import (
	"fmt"
	"strings"

	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	batchv1 "k8s.io/api/batch/v1"

	"github.com/worldbackup/worldbackup/jobapi"
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
	// volume: <backupRoot>/<server>/<runId>.tar.zst (.tar.gz, .tar), or
	// with format chunked the run's manifest (jobapi.RunKey).
	ArchiveRef pulumi.StringOutput `pulumi:"archiveRef"`
	// Status is what the run reported: done or already-recorded.
	Status pulumi.StringOutput `pulumi:"status"`
	// SHA256 is the archive's SHA-256 as the run reported it.
	SHA256 pulumi.StringOutput `pulumi:"sha256"`
	// SizeBytes is the archive's size as the run reported it.
	SizeBytes pulumi.IntOutput `pulumi:"sizeBytes"`
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
//
// With concurrency, the Job is created through the cluster's Gate in
// args.Gates, once fewer than concurrency of the program's backups on that
// cluster are running.
func NewWorldBackup(ctx *pulumi.Context, name string, args WorldBackupArgs, opts ...pulumi.ResourceOption) (*WorldBackup, error) {
	pl, err := planJob(ctx, WorldBackupType, name, args, args.JobInputs, func(a WorldBackupArgs) (plannedJob, error) {
		r, err := a.resolve()
		if err != nil {
			return plannedJob{}, err
		}
		job := jobspec.BuildBackup(r.Job)
		return plannedJob{
			jobResult:    jobResult{Job: job, RunID: r.Job.RunID, ArchiveRef: r.ArchiveRef, Preflight: r.Preflight},
			Timeout:      r.Timeout,
			Requirements: backupRequirements(job, r.Job),
		}, nil
	}, opts...)
	if err != nil {
		return nil, err
	}
	gate, err := gateOf(args.Gates, args.Concurrency, pl)
	if err != nil {
		return nil, fmt.Errorf("WorldBackup %q: %w", name, err)
	}
	pl = gate.through(pl)

	comp := &WorldBackup{}
	out, err := registerJobComponent(ctx, WorldBackupType, name, comp, pl, backupOutputs, opts...)
	if err != nil {
		return nil, err
	}
	comp.JobName, comp.Namespace, comp.RunID, comp.ArchiveRef = out.JobName, out.Namespace, out.RunID, out.ArchiveRef
	comp.Status, comp.SHA256, comp.SizeBytes = out.Observed.Status, out.Observed.SHA256, out.Observed.SizeBytes
	return comp, nil
}

// backupOutputs are WorldBackup's own outputs: the archive, and what its
// run reported of it.
func backupOutputs(out jobOutputs) pulumi.Map {
	return pulumi.Map{"archiveRef": out.ArchiveRef, "sha256": out.Observed.SHA256, "sizeBytes": out.Observed.SizeBytes}
}

// backupRequirements are what the preflight looks up for the backup Job
// job of b: its claims, service account, config Secret, RCON Secret and S3
// credentials Secret.
func backupRequirements(job *batchv1.Job, b jobspec.Backup) preflight.Requirements {
	var rcon *secretNeed
	if rc := b.Rcon; rc != nil {
		rcon = &secretNeed{name: rc.SecretName, input: "rcon.secretName", keys: []string{rc.SecretKey}, keyInputs: []string{"rcon.secretKey"},
			hint: fmt.Sprintf("kubectl -n %s create secret generic %s --from-literal=%s=<the server's rcon.password>", job.Namespace, rc.SecretName, rc.SecretKey)}
	}
	return configRequirements(job, b.ConfigSecretName, b.Store, rcon, encryptionNeed(job.Namespace, b.Encryption, encryptionWrites))
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
	a.Describe(&w.ArchiveRef, "The archive as the archiver writes it and records it in the catalog: its absolute "+
		"path inside the backup volume, <backupRoot>/<server>/<runId>.tar.zst (.tar.gz with gzip, .tar with none), "+
		"or with store its URL, s3://<bucket>/<prefix>/<server>/<runId>.tar.zst. With format chunked, the run's manifest: "+
		"<backupRoot>/"+jobapi.ChunkedDir+"/runs/<server>/<runId>.manifest (s3://<bucket>/<prefix>/"+jobapi.ChunkedDir+"/runs/<server>/<runId>.manifest).")
	a.Describe(&w.Status, "What the run reported: done (archived and recorded now) or already-recorded (the "+
		"runId had a catalog row: nothing written). "+descObserved)
	a.Describe(&w.SHA256, "The archive's SHA-256 (64 lowercase hex digits; with format chunked the manifest's) as the run reported it, the catalog "+
		"row's sha256: give it with archiveRef to a WorldRestore. "+descObserved)
	a.Describe(&w.SizeBytes, "The archive's size in bytes as the run reported it, the catalog row's size_bytes. "+descObserved)
}

// Annotate describes the inputs of WorldBackup in the plugin's schema: its
// own, and those of JobInputs whose description says more for a backup (the
// rest come from JobInputs.Annotate).
func (a *WorldBackupArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.Server, "The game server's name: a DNS-1123 label of at most "+descMaxServerLen+" characters "+
		"(lowercase letters, digits, '-'), usually its StatefulSet name. It names the world claim, "+
		"the Job and the archive folder.")
	an.Describe(&a.FormerOwner, "Optional: the player or team who ran the server, recorded in the catalog "+
		"(e.g. when a server is retired).")
	an.Describe(&a.RunID, "The run ID, the idempotency key of the backup: 1 to "+descMaxRunIDLen+" characters from "+
		"A-Z a-z 0-9 . _ -, starting with a letter or digit. It names the archive file. A new runId "+
		"performs a new backup; the same runId performs none.")
	an.Describe(&a.BackupClaimName, "The PersistentVolumeClaim that holds the archives, mounted read-write "+
		"at backupRoot. Required unless store is set (then not allowed: the Job mounts no backup claim).")
	an.Describe(&a.ConfigSecretName, "The Secret holding felis.toml (the catalog's database URL), mounted "+
		"read-only (mode 0400) at configMountPath. Default: felis-config.")
	an.Describe(&a.ConfigMountPath, "Where the config Secret is mounted; the archiver reads "+
		"<configMountPath>/"+jobapi.ConfigFileName+". Default: "+DefaultConfigMountPath+".")
	an.Describe(&a.BackupRoot, "Where the backup claim is mounted: the archive root, passed as "+
		descFlag(jobapi.FlagArchiveRoot)+". Default: /backups. Not allowed with store (the Job mounts no backup claim).")
	an.Describe(&a.WorldRoot, "Where the world claim is mounted (read-only). Default: "+DefaultWorldRoot+".")
	an.Describe(&a.WorldClaimName, "The world's PersistentVolumeClaim, mounted read-only. "+
		"Default: world-<server>-0 (the StatefulSet claim of volume template world, ordinal 0).")
	an.Describe(&a.Deadline, "How long the backup may run, a duration like 30m or 2h (activeDeadlineSeconds). Default: 30m.")
	an.Describe(&a.SecurityMode, "baseline or restricted. baseline (default): root with every capability "+
		"dropped except DAC_OVERRIDE, so it reads the game's 0600 files whatever their owner; meets the "+
		"baseline Pod Security Standard. restricted: runs as runAsUser/runAsGroup (default 1000/1000, "+
		"the game's UID/GID) with every capability dropped and runAsNonRoot; meets the restricted Pod "+
		"Security Standard. Both: no privilege escalation, seccomp RuntimeDefault, read-only root "+
		"filesystem.")
	an.Describe(&a.FSGroup, "The pod's fsGroup: kubelet gives the writable volumes and the config Secret's "+
		"files this group (fsGroupChangePolicy OnRootMismatch). Omitted when 0. Default: omitted in "+
		"baseline mode, runAsGroup in restricted mode (needed to read the config Secret as non-root).")
	an.Describe(&a.TTLAfterFinished, "How long the finished Job is kept before Kubernetes deletes it, a "+
		"duration like 30m or 2h, at least 1s (ttlSecondsAfterFinished). Default: none, the Job stays until a new runId "+
		"replaces it. With a TTL, `pulumi refresh` (or `up --refresh`) after the deletion forgets the Job and the "+
		"next `pulumi up` creates it again with the same runId; the archiver then does nothing (the run is "+
		"already recorded), but `pulumi up` shows a create.")
	an.Describe(&a.Compression, "zstd, gzip or none: the tar archive's compression and extension "+
		"(.tar.zst, .tar.gz, .tar), with format tar. Default: "+jobapi.DefaultCompression+". Not allowed with format chunked, "+
		"the default format (which compresses each blob with zstd when that helps): set format tar with it.")
	an.Describe(&a.Format, "chunked or tar, passed as "+descFlag(jobapi.FlagFormat)+" (over the config file's [archive] format). "+
		"tar: one archive per run, <backupRoot>/<server>/<runId>.tar.zst. chunked: the same tar stream kept as "+
		"deduplicated blobs in packs, so a run stores (and reads) only what changed since the server's previous "+
		"chunked run; archiveRef is then the run's manifest, <backupRoot>/"+jobapi.ChunkedDir+"/runs/<server>/<runId>.manifest "+
		"(or its s3:// URL), which a WorldRestore takes with the run's sha256. Default: "+jobapi.DefaultFormat+".")
	an.Describe(&a.Excludes, "Globs of world paths to leave out (each passed as "+descFlag(jobapi.FlagExclude)+"); when set they "+
		"replace the config file's list (default "+strings.Join(jobapi.DefaultExcludes(), ", ")+").")
	an.Describe(&a.SkipAwait, "Do not wait for the Job to finish (annotation pulumi.com/skipAwait); "+
		"`pulumi up` then does not report the backup's result. Default: false.")
	an.Describe(&a.Concurrency, "Caps how many of this program's backups on the same cluster (the Kubernetes provider's "+
		"kubeconfig and context) run at once, from 1 to "+fmt.Sprint(MaxConcurrency)+", whatever `pulumi up --parallel` says: "+
		"the Job is created with pulumi.com/skipAwait once fewer than twice that many are under way, its archiver waits at the door "+
		"for one of that many slots in the catalog (PostgreSQL advisory locks of the cluster's kube context, held until it exits; "+
		"backups that record into several catalogs are capped per catalog), so its pod starts while others run, and the component "+
		"waits for the Job itself (its outputs and failures are the same; the wait counts in the Job's deadline). "+
		"Every backup on a cluster that sets it must set the same value. "+
		"Not with skipAwait or preflight: false; in render mode nothing is awaited, so nothing is capped. Turning it on or off "+
		"replaces the current run's Job once (a recorded run's new Job does nothing). Default: no cap.")
	an.Describe(&a.Encryption, "Encrypt the archive on the client with the age identity of this Secret key, mounted read-only "+
		"as a file (passed as "+descFlag(jobapi.FlagEncryptionKeyFile)+", never in arguments, environment or state): a tar run "+
		"is an age file, archiveRef <...>.tar.zst.age (age -d -i key.txt RUN.tar.zst.age | tar --zstd -x restores it; "+
		"with compression gzip, .tar.gz.age and tar -xz); a chunked run's blobs and "+
		"manifest are sealed with the server's data key, which the identity wraps. A WorldRestore of it needs the same encryption. "+
		"Default: none. The config file's [archive] encryption_key_file names a file only this input mounts: set this input instead.")
	an.Describe(&a.Rcon, "Quiesce the game server over RCON while the world is read: save-off and save-all flush before, "+
		"save-on after the archive is written (on every exit path). Needs the server's RCON password in a Secret.")
	an.Describe(&a.Store, "Archive into an S3-compatible object store instead of the backup claim: the Job passes "+
		descFlag(jobapi.FlagStore)+" and the "+descFlag("s3-")+"* settings, mounts the credentials Secret read-only and mounts no backup claim. "+
		"Default: none, the folder store on backupClaimName.")
	an.Describe(&a.Retention, "Prune the server's archives after a successful run, in the same pod: restic's forget rules "+
		"with a floor (minKeep, the newest run, runs younger than grace). Rows go first, then files.")
}
