package provider

import (
	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	batchv1 "k8s.io/api/batch/v1"

	"github.com/worldbackup/worldbackup/jobapi"
	"github.com/worldbackup/worldbackup/provider/jobspec"
	"github.com/worldbackup/worldbackup/provider/preflight"
)

// WorldPruneType is the Pulumi type token of WorldPrune.
const WorldPruneType = "worldbackup:index:WorldPrune"

// WorldPrune is one prune of a server's archives: a Kubernetes Job that
// runs `archiver prune` with a retention policy. A new runId replaces the
// Job (a new prune); `pulumi up` with nothing changed runs none.
type WorldPrune struct {
	pulumi.ResourceState

	// JobName is the Job's metadata.name, <server>-prune-<suffix>.
	JobName pulumi.StringOutput `pulumi:"jobName"`
	// Namespace is the Job's namespace.
	Namespace pulumi.StringOutput `pulumi:"namespace"`
	// RunID is the run ID of the prune.
	RunID pulumi.StringOutput `pulumi:"runId"`
	// Status is what the run reported: done (or failed).
	Status pulumi.StringOutput `pulumi:"status"`
}

// NewWorldPrune validates args and registers a WorldPrune with its one
// child, a kubernetes:batch/v1:Job named name+"-job", as NewWorldBackup
// does.
func NewWorldPrune(ctx *pulumi.Context, name string, args WorldPruneArgs, opts ...pulumi.ResourceOption) (*WorldPrune, error) {
	pl, err := planJob(ctx, WorldPruneType, name, args, args.JobInputs, func(a WorldPruneArgs) (plannedJob, error) {
		r, err := a.resolve()
		if err != nil {
			return plannedJob{}, err
		}
		job := jobspec.BuildPrune(r.Job)
		return plannedJob{
			jobResult:    jobResult{Job: job, RunID: r.Job.RunID, Preflight: r.Preflight},
			Timeout:      r.Timeout,
			Requirements: pruneRequirements(job, r.Job),
		}, nil
	}, opts...)
	if err != nil {
		return nil, err
	}
	comp := &WorldPrune{}
	// A prune writes no archive: no outputs beyond every Job's.
	out, err := registerJobComponent(ctx, WorldPruneType, name, comp, pl, nil, opts...)
	if err != nil {
		return nil, err
	}
	comp.JobName, comp.Namespace, comp.RunID = out.JobName, out.Namespace, out.RunID
	comp.Status = out.Observed.Status
	return comp, nil
}

// pruneRequirements are what the preflight looks up for the prune Job job
// of p: its claim, service account, config Secret and S3 credentials
// Secret.
func pruneRequirements(job *batchv1.Job, p jobspec.Prune) preflight.Requirements {
	return configRequirements(job, p.ConfigSecretName, p.Store)
}

// Annotate describes WorldPrune and its outputs in the plugin's schema and
// sets its token to worldbackup:index:WorldPrune.
func (w *WorldPrune) Annotate(a infer.Annotator) {
	a.SetToken("index", "WorldPrune")
	a.Describe(w, "One prune of a server's archives: a Kubernetes Job that runs `archiver prune`, which "+
		"expires the server's runs by restic's forget rules with a floor (minKeep, the newest run, runs "+
		"younger than grace): the rows go first, in one transaction under a per-server lock, then their "+
		"archives, then archive files without a row older than grace. The Job mounts the backup claim "+
		"read-write (or, with store, the S3 credentials Secret read-only) and the config Secret read-only; no world claim, no service-account token. A new runId "+
		"replaces the Job and prunes again; `pulumi up` with nothing changed prunes nothing. To prune after "+
		"every backup instead, set a WorldBackup's retention.")
	a.Describe(&w.JobName, "The Job's metadata.name: <server>-prune-<suffix>, the suffix derived from runId.")
	a.Describe(&w.Namespace, "The namespace of the Job.")
	a.Describe(&w.RunID, "The run ID of this prune.")
	a.Describe(&w.Status, "What the run reported: done (its log and termination message count the rows deleted, "+
		"files removed and bytes freed). "+descObserved)
}

// Annotate describes WorldPrune's own inputs, and the shared ones whose
// meaning differs for a prune, in the plugin's schema.
func (a *WorldPruneArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.Server, "The game server whose archives are pruned: a DNS-1123 label of at most "+descMaxServerLen+" "+
		"characters, as in its WorldBackup.")
	an.Describe(&a.RunID, "The run ID of this prune: 1 to "+descMaxRunIDLen+" characters from A-Z a-z 0-9 . _ -, starting "+
		"with a letter or digit. It names the Job; a new runId prunes again.")
	an.Describe(&a.Retention, "The rules: restic's forget rules (a run kept by any rule is kept) with a floor "+
		"of minKeep archives, the newest run, and every run younger than grace.")
	an.Describe(&a.DryRun, "Report what would go and why each run stays (in the Job's log), change nothing. Default: false.")
	an.Describe(&a.BackupDeadline, "The longest deadline of the backups into this store (their deadline input), a duration "+
		"like 30m or 2h: retention.grace must be at least this long, since a prune keeps only what is younger than grace and "+
		"a shorter one could remove what a backup still running has written (a chunked run's packs). Default: "+DefaultDeadline+
		", a backup's default deadline.")
	an.Describe(&a.BackupClaimName, "The PersistentVolumeClaim that holds the archives, mounted read-write at backupRoot. "+
		"Required unless store is set (then refused).")
	an.Describe(&a.Store, "Prune the archives of an S3-compatible object store instead of the backup claim, as in the "+
		"WorldBackup that wrote them: the Job passes "+descFlag(jobapi.FlagStore)+" and the "+descFlag("s3-")+"* settings, mounts the credentials Secret "+
		"read-only and mounts no backup claim. Default: none, the folder store on backupClaimName.")
	an.Describe(&a.BackupRoot, "Where the backup claim is mounted: the archive root, as in the WorldBackup "+
		"(the catalog's archive paths must be under it). Default: /backups.")
	an.Describe(&a.ConfigSecretName, "The Secret holding felis.toml (the catalog's database URL), mounted "+
		"read-only (mode 0400) at configMountPath. Default: felis-config.")
	an.Describe(&a.ConfigMountPath, "Where the config Secret is mounted. Default: "+DefaultConfigMountPath+".")
	an.Describe(&a.SecurityMode, "baseline or restricted, as in WorldBackup. baseline (default): root with "+
		"DAC_OVERRIDE only, so it removes archives whatever UID wrote them. restricted: runAsUser/runAsGroup "+
		"(default 1000/1000), no capabilities; it can remove only archives a restricted-mode backup wrote.")
}
