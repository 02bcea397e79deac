package provider

import (
	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/worldbackup/worldbackup/jobapi"
	"github.com/worldbackup/worldbackup/provider/jobspec"
)

// WorldVerifyType is the Pulumi type token of WorldVerify.
const WorldVerifyType = "worldbackup:index:WorldVerify"

// WorldVerify is one verify of an archive: a Kubernetes Job that runs
// `archiver verify --world-check`, which checks the archive against its
// SHA-256, restores it into a scratch volume through the restore's
// extractor and checks the world it holds as the game would load it. Like
// a restore, the Job has no database access, no config Secret and no
// service-account token; unlike one, it mounts no world: it proves the
// archive, not the live world. A problem fails the Job, so `pulumi up`
// fails. A new runId replaces the Job (a new verify).
type WorldVerify struct {
	pulumi.ResourceState

	// JobName is the Job's metadata.name, <server>-verify-<suffix>.
	JobName pulumi.StringOutput `pulumi:"jobName"`
	// Namespace is the Job's namespace.
	Namespace pulumi.StringOutput `pulumi:"namespace"`
	// RunID is the run ID of the verify.
	RunID pulumi.StringOutput `pulumi:"runId"`
	// ArchiveRef is the verified archive (the input).
	ArchiveRef pulumi.StringOutput `pulumi:"archiveRef"`
	// Status is what the run reported: verified.
	Status pulumi.StringOutput `pulumi:"status"`
	// ChunksChecked is how many chunks the world check decoded.
	ChunksChecked pulumi.IntOutput `pulumi:"chunksChecked"`
	// Problems is how many problems it found (0: a failed verify fails the Job).
	Problems pulumi.IntOutput `pulumi:"problems"`
}

// NewWorldVerify validates args and registers a WorldVerify with its one
// child, a kubernetes:batch/v1:Job named name+"-job", as NewWorldRestore
// does.
func NewWorldVerify(ctx *pulumi.Context, name string, args WorldVerifyArgs, opts ...pulumi.ResourceOption) (*WorldVerify, error) {
	pl, err := planJob(ctx, WorldVerifyType, name, args, args.JobInputs, func(a WorldVerifyArgs) (plannedJob, error) {
		r, err := a.resolve()
		if err != nil {
			return plannedJob{}, err
		}
		job := jobspec.BuildVerify(r.Job)
		req := restoreRequirements(job, jobspec.Restore{Store: r.Job.Store, Encryption: r.Job.Encryption, ByRun: r.Job.ByRun})
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
	comp := &WorldVerify{}
	out, err := registerJobComponent(ctx, WorldVerifyType, name, comp, pl, verifyOutputs, opts...)
	if err != nil {
		return nil, err
	}
	comp.JobName, comp.Namespace, comp.RunID, comp.ArchiveRef = out.JobName, out.Namespace, out.RunID, out.ArchiveRef
	comp.Status, comp.ChunksChecked, comp.Problems = out.Observed.Status, out.Observed.ChunksChecked, out.Observed.Problems
	return comp, nil
}

// verifyOutputs are WorldVerify's own outputs: the archive and what the
// world check counted.
func verifyOutputs(out jobOutputs) pulumi.Map {
	return pulumi.Map{"archiveRef": out.ArchiveRef, "chunksChecked": out.Observed.ChunksChecked, "problems": out.Observed.Problems}
}

// Annotate describes WorldVerify and its outputs in the plugin's schema and
// sets its token to worldbackup:index:WorldVerify.
func (w *WorldVerify) Annotate(a infer.Annotator) {
	a.SetToken("index", "WorldVerify")
	a.Describe(w, "One verify of a world archive, down to the chunks: a Kubernetes Job that runs `archiver verify "+
		descFlag(jobapi.FlagWorldCheck)+"`, which checks the archive's SHA-256, restores it into a scratch volume (an emptyDir of "+
		"scratchSize, or an ephemeral claim of scratchStorageClassName) through the restore's extractor, and "+
		"checks the world as the game would load it: every level.dat parses and has a DataVersion, every region "+
		"file's location table is sane, every chunk (or chunkSample of them, each region's newest always) "+
		"decompresses and parses as NBT at its own coordinates, every player file parses. A problem fails the Job "+
		"(exit 3), and its termination message names the file and chunk. Like a restore, the Job has no database "+
		"access, no config Secret and no service-account token (a verify by run, fromRun, resolves the run in an init "+
		"container that alone mounts the config Secret); it mounts no world claim at all (it proves the "+
		"archive, not the live world) and the backup claim read-only (or, with store, the S3 credentials Secret). "+
		"A new runId replaces the Job and verifies again; WorldVerifySchedule verifies the newest run on a schedule.")
	a.Describe(&w.JobName, "The Job's metadata.name: <server>-verify-<suffix>, the suffix derived from runId.")
	a.Describe(&w.Namespace, "The namespace of the Job.")
	a.Describe(&w.RunID, "The run ID of this verify.")
	a.Describe(&w.ArchiveRef, "The verified archive's path in the pod or its s3:// URL (the archiveRef input).")
	a.Describe(&w.Status, "What the run reported: verified (a world with a problem fails the Job, and `pulumi up` with it). "+descObserved)
	a.Describe(&w.ChunksChecked, "How many chunks the world check decompressed and parsed. "+descObserved)
	a.Describe(&w.Problems, "How many problems the world check found: 0 for a verified archive. "+descObserved)
}

// Annotate describes WorldVerify's own inputs, and the shared ones whose
// meaning differs for a verify, in the plugin's schema.
func (a *WorldVerifyArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.Server, "The game server whose archive is verified: a DNS-1123 label of at most "+descMaxServerLen+" "+
		"characters. It names the Job.")
	an.Describe(&a.RunID, "The run ID of this verify (not of the backup): 1 to "+descMaxRunIDLen+" characters from "+
		"A-Z a-z 0-9 . _ -, starting with a letter or digit. It names the Job; a new runId verifies again.")
	an.Describe(&a.ArchiveRef, "The archive to verify, as WorldRestore's archiveRef: its absolute path in the pod under "+
		"backupRoot (a tar archive or a chunked run's manifest), or with store its s3:// URL. Passed as "+descFlag(jobapi.FlagArchive)+". "+
		"Required unless fromRun is set (then not allowed).")
	an.Describe(&a.SHA256, "The archive's expected SHA-256, 64 lowercase hex digits: the sha256 column of `archiver list`, "+
		"or a WorldBackup's sha256 output. Passed as "+descFlag(jobapi.FlagSHA256)+"; a mismatch fails the Job. "+
		"Required unless fromRun is set (then not allowed).")
	an.Describe(&a.FromRun, "Verify a recorded run instead of archiveRef and sha256: a run ID as `archiver list` shows it, or "+
		jobapi.RunLatest+" for the server's newest successful run, as WorldRestore's fromRun: an init container, the only one "+
		"that mounts the config Secret, finds it in the catalog; the verify itself stays DB-blind and checks every byte "+
		"against the recorded checksum.")
	an.Describe(&a.FromServer, "With fromRun: the server whose run is verified. Default: server.")
	an.Describe(&a.ConfigSecretName, "With fromRun: the Secret holding felis.toml (the catalog's DSN), mounted read-only in the "+
		"init container only. Default: "+DefaultConfigSecretName+".")
	an.Describe(&a.ConfigMountPath, "With fromRun: where the init container mounts configSecretName. Default: "+DefaultConfigMountPath+".")
	an.Describe(&a.Encryption, "The Secret key of the age identity an encrypted archive is read with, as in WorldRestore "+
		"(mounted read-only as a file, never in args, environment or state). Default: none, the archive is not encrypted.")
	an.Describe(&a.ChunkSample, "The share of each region file's chunks to decompress and parse, e.g. 10% or 0.1 "+
		"("+descFlag(jobapi.FlagChunks)+"); each region's newest chunk is always checked, and every region's location "+
		"table, level.dat and player file whatever the share. Default: every chunk.")
	an.Describe(&a.ScratchSize, "The scratch volume's size, a Kubernetes quantity of at least "+MinScratchSize.String()+": room for the whole restored world. "+
		"An emptyDir's sizeLimit (the kubelet evicts the pod past it), or the ephemeral claim's request. Default: "+
		jobspec.DefaultScratchSize.String()+".")
	an.Describe(&a.ScratchStorageClassName, "Make the scratch volume a generic ephemeral volume: a claim of this "+
		"StorageClass of scratchSize, created with the pod and deleted with it, for worlds larger than the node's "+
		"ephemeral storage. Default: none, an emptyDir on the node.")
	an.Describe(&a.BackupClaimName, "The PersistentVolumeClaim that holds the archives, mounted read-only (at the volume "+
		"and at the mount) at backupRoot. Required unless store is set (then not allowed).")
	an.Describe(&a.BackupRoot, "Where the backup claim is mounted (read-only); archiveRef must be below it. Default: /backups. "+
		"Not allowed with store.")
	an.Describe(&a.WorldRoot, "Not used: a verify mounts no world (refused when set).")
	an.Describe(&a.WorldClaimName, "Not used: a verify mounts no world (refused when set).")
	an.Describe(&a.Deadline, "How long the verify may run, a duration like 30m or 2h (activeDeadlineSeconds). Default: 30m.")
	an.Describe(&a.SecurityMode, "baseline or restricted, as in WorldRestore. baseline (default): root with every capability "+
		"dropped except CHOWN, DAC_OVERRIDE and FOWNER, so it restores the files with their owners and reads those the "+
		"game wrote 0600. restricted: runs as runAsUser/runAsGroup (default 1000/1000); it must be able to read the "+
		"archive, as a restricted-mode restore must.")
	an.Describe(&a.Store, "Verify an archive of an S3-compatible object store, as in WorldRestore: archiveRef is its s3:// "+
		"URL, the Job mounts the credentials Secret read-only in place of the backup claim. Default: none.")
	an.Describe(&a.SkipAwait, "Do not wait for the Job to finish (annotation pulumi.com/skipAwait); `pulumi up` then does not "+
		"report the verify's result. Default: false.")
}
