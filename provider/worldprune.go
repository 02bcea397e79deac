package provider

import (
	"fmt"

	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

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
}

// NewWorldPrune validates args and registers a WorldPrune with its one
// child, a kubernetes:batch/v1:Job named name+"-job", as NewWorldBackup
// does.
func NewWorldPrune(ctx *pulumi.Context, name string, args WorldPruneArgs, opts ...pulumi.ResourceOption) (*WorldPrune, error) {
	r, err := args.resolve()
	if err != nil {
		return nil, err
	}
	job := jobspec.BuildPrune(r.Job)
	req := preflight.FromJob(job, map[string][]string{r.Job.ConfigSecretName: {jobspec.ConfigFileName}})
	req.SecretHints = map[string]string{
		r.Job.ConfigSecretName: fmt.Sprintf("kubectl -n %s create secret generic %s --from-file=%s", job.Namespace, r.Job.ConfigSecretName, jobspec.ConfigFileName),
	}
	req.SecurityHint = "set securityMode restricted"
	if err := checkCluster(ctx, "worldprune", r.Preflight, req); err != nil {
		return nil, err
	}
	comp := &WorldPrune{}
	out, err := registerJobComponent(ctx, WorldPruneType, name, comp, job, r.Timeout, r.Job.RunID, "", opts...)
	if err != nil {
		return nil, err
	}
	comp.JobName, comp.Namespace, comp.RunID = out.JobName, out.Namespace, out.RunID
	return comp, nil
}

// Annotate describes WorldPrune and its outputs in the plugin's schema and
// sets its token to worldbackup:index:WorldPrune.
func (w *WorldPrune) Annotate(a infer.Annotator) {
	a.SetToken("index", "WorldPrune")
	a.Describe(w, "One prune of a server's archives: a Kubernetes Job that runs `archiver prune`, which "+
		"expires the server's runs by restic's forget rules with a floor (minKeep, the newest run, runs "+
		"younger than grace): the rows go first, in one transaction under a per-server lock, then their "+
		"archives, then archive files without a row older than grace. The Job mounts the backup claim "+
		"read-write and the config Secret read-only; no world claim, no service-account token. A new runId "+
		"replaces the Job and prunes again; `pulumi up` with nothing changed prunes nothing. To prune after "+
		"every backup instead, set a WorldBackup's retention.")
	a.Describe(&w.JobName, "The Job's metadata.name: <server>-prune-<suffix>, the suffix derived from runId.")
	a.Describe(&w.Namespace, "The namespace of the Job.")
	a.Describe(&w.RunID, "The run ID of this prune.")
}

// Annotate describes every input of WorldPrune in the plugin's schema.
func (a *WorldPruneArgs) Annotate(an infer.Annotator) {
	an.Describe(&a.Server, "The game server whose archives are pruned: a DNS-1123 label of at most 46 "+
		"characters, as in its WorldBackup.")
	an.Describe(&a.RunID, "The run ID of this prune: 1 to 128 characters from A-Z a-z 0-9 . _ -, starting "+
		"with a letter or digit. It names the Job; a new runId prunes again.")
	an.Describe(&a.Retention, "The rules: restic's forget rules (a run kept by any rule is kept) with a floor "+
		"of minKeep archives, the newest run, and every run younger than grace.")
	an.Describe(&a.DryRun, "Report what would go and why each run stays (in the Job's log), change nothing. Default: false.")
	an.Describe(&a.Image, "The archiver image, e.g. ghcr.io/worldbackup/archiver:v0.1.0.")
	an.Describe(&a.BackupClaimName, "The PersistentVolumeClaim that holds the archives, mounted read-write at backupRoot.")
	an.Describe(&a.ConfigSecretName, "The Secret holding felis.toml (the catalog's database URL), mounted "+
		"read-only (mode 0400) at configMountPath. Default: felis-config.")
	an.Describe(&a.ConfigMountPath, "Where the config Secret is mounted. Default: /etc/felis.")
	an.Describe(&a.BackupRoot, "Where the backup claim is mounted: the archive root, as in the WorldBackup "+
		"(the catalog's archive paths must be under it). Default: /backups.")
	an.Describe(&a.Namespace, "The namespace of the Job, where the backup claim lives. Default: minecraft.")
	an.Describe(&a.ServiceAccountName, "The Job's service account (its token is not mounted). Default: felis-restore.")
	an.Describe(&a.Deadline, "How long the prune may run, a Go duration (activeDeadlineSeconds). Default: 30m.")
	an.Describe(&a.CPULimit, "The container's CPU limit (a Kubernetes quantity). Default: 1.")
	an.Describe(&a.MemoryLimit, "The container's memory limit (a Kubernetes quantity). Default: 1Gi.")
	an.Describe(&a.SecurityMode, "baseline or restricted, as in WorldBackup. baseline (default): root with "+
		"DAC_OVERRIDE only, so it removes archives whatever UID wrote them. restricted: runAsUser/runAsGroup "+
		"(default 1000/1000), no capabilities; it can remove only archives a restricted-mode backup wrote.")
	an.Describe(&a.RunAsUser, "The UID the archiver runs as. Default: 0 in baseline mode, 1000 in restricted mode.")
	an.Describe(&a.RunAsGroup, "The GID the archiver runs as. Default: 0 in baseline mode, 1000 in restricted mode.")
	an.Describe(&a.FSGroup, "The pod's fsGroup. Omitted when 0. Default: omitted in baseline mode, runAsGroup "+
		"in restricted mode (needed to read the config Secret as non-root).")
	an.Describe(&a.TTLAfterFinished, "How long the finished Job is kept before Kubernetes deletes it, a Go "+
		"duration of at least 1s. Default: none.")
	an.Describe(&a.BackoffLimit, "How many times a failed pod is retried (backoffLimit). Default: 0.")
	an.Describe(&a.NodeName, "Runs the pod on this node (bypassing the scheduler). Exclusive with nodeSelector.")
	an.Describe(&a.NodeSelector, "Node labels the pod's node must have, rendered as a required node affinity. "+
		"Exclusive with nodeName.")
	an.Describe(&a.Labels, descLabels)
	an.Describe(&a.Annotations, descAnnotations)
	an.Describe(&a.SkipAwait, "Do not wait for the Job to finish (annotation pulumi.com/skipAwait). Default: false.")
	an.Describe(&a.Timeout, descTimeout)
	an.Describe(&a.GamePodSelector, descGamePodSelector)
	an.Describe(&a.GamePodAffinity, descGamePodAffinity)
	an.Describe(&a.ReplaceUnready, descReplaceUnready)
	an.Describe(&a.Preflight, descPreflight)
	an.Describe(&a.KubeContext, descKubeContext)
}
