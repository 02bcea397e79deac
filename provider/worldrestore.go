package provider

import (
	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	batchv1 "k8s.io/api/batch/v1"
	"strconv"

	"github.com/worldbackup/worldbackup/jobapi"
	"github.com/worldbackup/worldbackup/provider/jobspec"
	"github.com/worldbackup/worldbackup/provider/preflight"
)

// WorldRestoreType is the Pulumi type token of WorldRestore, the same from Go
// and through the plugin (see WorldRestore.Annotate).
const WorldRestoreType = "worldbackup:index:WorldRestore"

// WorldRestore is one restore of an archive into a server's world: a
// Kubernetes Job that runs `archiver restore`, which checks the archive's
// SHA-256, extracts it safely into a staging folder on the world volume and
// swaps it into place. The Job has no database access, no config Secret and
// no service-account token: it processes an archive that may have been
// tampered with. A new runId replaces the Job (a new restore); `pulumi up`
// with nothing changed runs none.
type WorldRestore struct {
	pulumi.ResourceState

	// JobName is the Job's metadata.name, <server>-restore-<suffix>.
	JobName pulumi.StringOutput `pulumi:"jobName"`
	// Namespace is the Job's namespace.
	Namespace pulumi.StringOutput `pulumi:"namespace"`
	// RunID is the run ID of the restore.
	RunID pulumi.StringOutput `pulumi:"runId"`
	// ArchiveRef is the restored archive's path in the pod (the input).
	ArchiveRef pulumi.StringOutput `pulumi:"archiveRef"`
	// Status is what the run reported: restored or already-restored.
	Status pulumi.StringOutput `pulumi:"status"`
}

// NewWorldRestore validates args and registers a WorldRestore with its one
// child, a kubernetes:batch/v1:Job named name+"-job". Invalid or missing
// inputs give an *InputError listing them all, before anything is
// registered. Providers passed in opts (pulumi.Provider, pulumi.Providers)
// reach the Job through its parent. The Job's create/update timeout is the
// timeout input; with skipAwait the Kubernetes provider does not wait for the
// Job to finish.
//
// The outputs resolve once the Job is registered: after `pulumi up` has
// waited for it (unless skipAwait), so a resource that depends on them (e.g.
// the game server scaled back up) waits for the restore.
func NewWorldRestore(ctx *pulumi.Context, name string, args WorldRestoreArgs, opts ...pulumi.ResourceOption) (*WorldRestore, error) {
	_, args.sha256FromOutput = args.SHA256.(pulumi.Output)
	pl, err := planJob(ctx, WorldRestoreType, name, args, args.JobInputs, func(a WorldRestoreArgs) (plannedJob, error) {
		r, err := a.resolve()
		if err != nil {
			return plannedJob{}, err
		}
		job := jobspec.BuildRestore(r.Job)
		req := restoreRequirements(job, r.Job)
		req.SecurityHint = "set securityMode restricted (which can read only archives a restricted-mode backup wrote)"
		return plannedJob{
			jobResult:    jobResult{Job: job, RunID: r.Job.RunID, ArchiveRef: r.Job.ArchiveRef, Preflight: r.Preflight},
			Timeout:      r.Timeout,
			Requirements: req,
		}, nil
	}, opts...)
	if err != nil {
		return nil, err
	}

	comp := &WorldRestore{}
	out, err := registerJobComponent(ctx, WorldRestoreType, name, comp, pl, restoreOutputs, opts...)
	if err != nil {
		return nil, err
	}
	comp.JobName, comp.Namespace, comp.RunID, comp.ArchiveRef = out.JobName, out.Namespace, out.RunID, out.ArchiveRef
	comp.Status = out.Observed.Status
	return comp, nil
}

// restoreOutputs are WorldRestore's own outputs: the archive it restored.
func restoreOutputs(out jobOutputs) pulumi.Map { return pulumi.Map{"archiveRef": out.ArchiveRef} }

// restoreRequirements are what the preflight looks up for the restore Job
// job of r: its claims, service account and, with an S3 store, the
// credentials Secret.
func restoreRequirements(job *batchv1.Job, r jobspec.Restore) preflight.Requirements {
	enc := encryptionNeed(job.Namespace, r.Encryption, encryptionReads)
	if r.FromRun != "" {
		return configRequirements(job, r.ConfigSecretName, r.Store, enc)
	}
	return requirements(job, storeNeed(job.Namespace, r.Store), enc)
}

// Annotate describes WorldRestore and its outputs in the plugin's schema and
// sets its token to worldbackup:index:WorldRestore.
func (w *WorldRestore) Annotate(a infer.Annotator) {
	a.SetToken("index", "WorldRestore")
	a.Describe(w, "One restore of a world archive: a Kubernetes Job that runs `archiver restore`, which "+
		"checks the archive's SHA-256 before reading it, extracts it into a staging folder on the world "+
		"volume (refusing any entry that would land outside it: .. or absolute names, links leaving the "+
		"world, devices, duplicates, tar bombs past maxBytes/maxEntries) and, only when the whole archive "+
		"extracted cleanly, swaps it into place; a refused archive leaves the world untouched. The Job mounts "+
		"the backup claim read-only and the world claim read-write, and has no database access, no config "+
		"Secret and no service-account token (a restore by run, fromRun, resolves the run in an init container "+
		"that alone mounts the config Secret). Stop the game server (scale it to 0) before restoring, and "+
		"pin the Job with nodeName/nodeSelector when the world volume is ReadWriteOnce. A new runId "+
		"replaces the Job and performs a new restore; `pulumi up` with nothing changed performs none.")
	a.Describe(&w.JobName, "The Job's metadata.name: <server>-restore-<suffix>, the suffix derived from runId.")
	a.Describe(&w.Namespace, "The namespace of the Job.")
	a.Describe(&w.RunID, "The run ID of this restore.")
	a.Describe(&w.ArchiveRef, "The restored archive's path in the pod or its s3:// URL (the archiveRef input, or "+
		"the run's when restoring fromRun). When the world was already restored under this runId (status "+
		"already-restored), the archive the world holds, which may be older than the one given.")
	a.Describe(&w.Status, "What the run reported: restored (the world now holds the archive) or "+
		"already-restored (the world's marker names this runId: nothing done, whatever archive this Job names). "+descObserved)
}

// Annotate describes the inputs of WorldRestore in the plugin's schema: its
// own, and those of JobInputs whose description says more for a restore (the
// rest come from JobInputs.Annotate).
func (a *WorldRestoreArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.Server, "The game server whose world is restored: a DNS-1123 label of at most "+descMaxServerLen+" "+
		"characters (lowercase letters, digits, '-'), usually its StatefulSet name. It names the world "+
		"claim (unless worldClaimName is set) and the Job. The archive may come from another server's backup.")
	an.Describe(&a.RunID, "The run ID of this restore (not of the backup): 1 to "+descMaxRunIDLen+" characters from "+
		"A-Z a-z 0-9 . _ -, starting with a letter or digit. It names the Job and is the restore's key: the "+
		"world's marker names it, and a Job of the same runId finds the marker and performs no second restore, "+
		"whatever archive it is given. Changing archiveRef or sha256 (a restore fed from a WorldBackup's outputs, "+
		"after that backup's next run) replaces the Job but restores nothing: give a new runId to restore the new archive.")
	an.Describe(&a.ArchiveRef, "The archive to restore: its absolute path in the pod, under backupRoot, "+
		"e.g. /backups/survival/2025-06-01T0300Z.tar.zst, or a chunked run's manifest, "+
		"/backups/"+jobapi.ChunkedDir+"/runs/survival/2025-06-01T0300Z.manifest (the packs it names are read from the same store). A WorldBackup's archiveRef output, or the "+
		"archive_ref column of `archiver list`, is this path when both Jobs mount the backup claim at the "+
		"same backupRoot. With store, the archive's s3://bucket/key URL instead (a WorldBackup's archiveRef "+
		"with the same store). Passed as "+descFlag(jobapi.FlagArchive)+".")
	an.Describe(&a.SHA256, "The archive's expected SHA-256, 64 lowercase hex digits: the sha256 column of "+
		"`archiver list` (the catalog's record). The archive is checked against it before anything is "+
		"extracted; a mismatch fails the Job and leaves the world untouched. Passed as "+descFlag(jobapi.FlagSHA256)+".")
	an.Describe(&a.Replace, "Replace the world when its folder is not empty ("+descFlag(jobapi.FlagReplace)+"). Default: true, since "+
		"restoring over the existing world is what a restore is for; the old world is kept aside until the "+
		"new one is completely in place, then removed. Set false to restore only into an empty world "+
		"volume: the Job then fails, touching nothing, when the world is not empty.")
	an.Describe(&a.FromRun, "Restore a recorded run instead of archiveRef and sha256 (then not allowed): a run ID "+
		"of fromServer as `archiver list` shows it, or "+jobapi.RunLatest+", the server's newest successful run, looked up when the "+
		"Job runs. An init container of the same image, the only container that mounts the config Secret, finds "+
		"the run in the catalog (`archiver resolve`) and hands its archive ref and SHA-256 to the extractor through "+
		"a small emptyDir; the extractor still has no database access and checks every byte against that checksum. "+
		"An unknown run ID, a run of another server or a server without a run fails the Job before the world is "+
		"touched, the log saying which. As for any restore, a rerun of the same runId does nothing, even when "+
		jobapi.RunLatest+" has moved on; give a new runId to restore again. The run's "+
		"archive must be on this Job's store: under backupRoot, or with store an s3:// object.")
	an.Describe(&a.FromServer, "The server whose run fromRun names. Default: server. Only with fromRun.")
	an.Describe(&a.ConfigSecretName, "The archiver's config Secret (key "+jobapi.ConfigFileName+", the catalog's URL), "+
		"mounted read-only in the init container of a restore by run only. Default: "+DefaultConfigSecretName+". Only with fromRun.")
	an.Describe(&a.ConfigMountPath, "Where the init container of a restore by run mounts the config Secret. "+
		"Default: "+DefaultConfigMountPath+". Only with fromRun.")
	an.Describe(&a.BackupClaimName, "The PersistentVolumeClaim that holds the archives, mounted read-only "+
		"(at the volume and at the mount) at backupRoot. Required unless store is set (then not allowed: the "+
		"Job mounts no backup claim).")
	an.Describe(&a.BackupRoot, "Where the backup claim is mounted (read-only); archiveRef must be below it. "+
		"Default: /backups. Not allowed with store (the Job mounts no backup claim).")
	an.Describe(&a.WorldRoot, "Where the world claim is mounted (read-write): the folder the archive is "+
		"restored into ("+descFlag(jobapi.FlagInto)+"). Default: "+DefaultWorldRoot+".")
	an.Describe(&a.WorldClaimName, "The world's PersistentVolumeClaim, mounted read-write. "+
		"Default: world-<server>-0 (the StatefulSet claim of volume template world, ordinal 0).")
	an.Describe(&a.Deadline, "How long the restore may run, a duration like 30m or 2h (activeDeadlineSeconds). Default: 30m.")
	an.Describe(&a.SecurityMode, "baseline or restricted. baseline (default): root with every capability "+
		"dropped except CHOWN, DAC_OVERRIDE and FOWNER, so it restores each file with the owner, mode and "+
		"times the archive recorded (e.g. the game's UID) and replaces the old world whatever its modes; "+
		"meets the baseline Pod Security Standard. restricted: runs as runAsUser/runAsGroup (default "+
		"1000/1000, the game's UID/GID) with every capability dropped and runAsNonRoot, so every restored "+
		"file belongs to that UID; meets the restricted Pod Security Standard. It must be able to read the "+
		"archive: archives written by a restricted-mode backup (same UID/GID) are; those of a baseline-mode "+
		"backup (root, mode 0640) are not, so restore them in baseline mode. Both: no privilege "+
		"escalation, seccomp RuntimeDefault, read-only root filesystem.")
	an.Describe(&a.FSGroup, "The pod's fsGroup: kubelet gives the world volume this group and makes it "+
		"group-writable (fsGroupChangePolicy OnRootMismatch), so a non-root restore can write a volume whose "+
		"root belongs to root. Omitted when 0. Default: omitted in baseline mode, runAsGroup in restricted mode.")
	an.Describe(&a.TTLAfterFinished, "How long the finished Job is kept before Kubernetes deletes it, a "+
		"duration like 30m or 2h, at least 1s (ttlSecondsAfterFinished). Default: none, the Job stays until a new runId "+
		"replaces it. With a TTL, `pulumi refresh` (or `up --refresh`) after the deletion forgets the Job and the "+
		"next `pulumi up` creates it again with the same runId; the archiver then does nothing (the run is "+
		"already restored: marker in the world), but `pulumi up` shows a create.")
	an.Describe(&a.MaxBytes, "Refuse the archive when its files hold more than this many bytes, a Kubernetes "+
		"quantity, e.g. 64Gi ("+descFlag(jobapi.FlagMaxBytes)+"): a guard against tar bombs. Default: the archiver's, "+descMaxBytes+".")
	an.Describe(&a.MaxEntries, "Refuse the archive when it has more than this many entries ("+descFlag(jobapi.FlagMaxEntries)+"). "+
		"Default: the archiver's, "+strconv.FormatInt(jobapi.DefaultMaxEntries, 10)+".")
	an.Describe(&a.Encryption, "Read an encrypted archive (a WorldBackup with encryption) with the age identity of this Secret "+
		"key, mounted read-only as a file (passed as "+descFlag(jobapi.FlagEncryptionKeyFile)+"; never in arguments, environment or state). "+
		"A key that does not open the archive fails the Job (exit 2) with the world untouched. In restricted mode, fsGroup must be "+
		"non-zero so the non-root archiver can read the mounted key.")
	an.Describe(&a.Store, "Restore from an S3-compatible object store: archiveRef is then the object's s3:// URL. "+
		"The Job passes the "+descFlag("s3-")+"* settings and mounts the credentials Secret read-only (0400) in place of the "+
		"backup claim; it still has no database access and no service-account token. Default: none, archiveRef "+
		"is a file on backupClaimName.")
	an.Describe(&a.SkipAwait, "Do not wait for the Job to finish (annotation pulumi.com/skipAwait); "+
		"`pulumi up` then does not report the restore's result, and the outputs resolve as soon as the Job "+
		"is created, so a resource that depends on them no longer waits for the restore (nor does a restore "+
		"that depends on a backup with skipAwait wait for that backup). Default: false.")
}
