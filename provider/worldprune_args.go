package provider

import (
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/worldbackup/worldbackup/jobapi"
	"github.com/worldbackup/worldbackup/provider/jobspec"
)

// WorldPruneArgs are the inputs of a WorldPrune: those of every Job
// (JobInputs; worldRoot and worldClaimName are refused, a prune mounts no
// world) and the prune's own: where the config Secret is, the retention
// rules (required), dryRun, the longest deadline of the backups into the
// store (which the grace must cover) and the S3 store (as in WorldBackup).
type WorldPruneArgs struct {
	JobInputs
	ConfigSecretName pulumi.StringInput `pulumi:"configSecretName,optional"`
	ConfigMountPath  pulumi.StringInput `pulumi:"configMountPath,optional"`
	Retention        *RetentionArgs     `pulumi:"retention"`
	DryRun           bool               `pulumi:"dryRun,optional"`
	// BackupDeadline is the longest deadline of the backups into this
	// store ("" = DefaultDeadline, a backup's default): retention.grace
	// must be at least that long.
	BackupDeadline pulumi.StringInput `pulumi:"backupDeadline,optional"`
	// Store is the S3 store in place of the backup claim, as in
	// WorldBackupArgs: whether it is set is plain, its settings inputs.
	Store *StoreArgs `pulumi:"store,optional"`
}

// Validate reports every missing or invalid input of a (after defaults) in
// one *InputError; nil when a is valid.
func (a WorldPruneArgs) Validate() error {
	_, err := a.Job()
	return err
}

// Job returns the prune Job builder's arguments of a, validated.
func (a WorldPruneArgs) Job() (jobspec.Prune, error) {
	a, err := settleSync("worldprune", a)
	if err != nil {
		return jobspec.Prune{}, err
	}
	r, err := a.resolve()
	return r.Job, err
}

// resolvedPrune is a validated WorldPrune.
type resolvedPrune struct {
	Job       jobspec.Prune
	Timeout   time.Duration
	Preflight preflightSettings
}

// resolve applies the defaults, validates and returns the Job builder's
// arguments and the Pulumi timeout.
func (a WorldPruneArgs) resolve() (resolvedPrune, error) {
	p := &problems{component: "worldprune"}
	for _, in := range []struct{ input, v string }{{"worldRoot", str(a.WorldRoot)}, {"worldClaimName", str(a.WorldClaimName)}} {
		if in.v != "" { // not in the plugin's schema (InputsNotTaken): a Go program's
			p.addf(in.input, "is set, but a prune mounts no world: remove it")
		}
	}
	w := a.JobInputs.worldPaths()
	configSecret, configMount := str(a.ConfigSecretName), str(a.ConfigMountPath)
	setDefault(&configSecret, DefaultConfigSecretName)
	setDefault(&configMount, DefaultConfigMountPath)

	p.server("server", a.Server, jobapi.KindPrune)
	p.runID("runId", a.Server, jobapi.KindPrune, str(a.RunID))
	j, store := p.common(a.JobInputs, a.Store, storeWhole, w, jobRules{run: "prune", baselineCaps: "DAC_OVERRIDE", fsGroupNeed: fsGroupForSecret})
	p.dnsSubdomain("configSecretName", configSecret)
	p.mountPaths(notifyMounts(j, storeMounts(store, w.BackupRoot, mount{"configMountPath", configMount}))...)
	if a.Retention == nil {
		p.addf("retention", "is required: set the rules, e.g. {keepDaily: 7, keepWeekly: 4, minKeep: 3}")
	}
	retention := a.Retention.resolve(p)
	// A prune keeps only what is younger than grace: a grace shorter than
	// a backup still running into the store would condemn what it wrote
	// (a chunked run's packs), as WorldBackup refuses for its own deadline.
	backupDeadline, unset := str(a.BackupDeadline), ""
	if backupDeadline == "" {
		backupDeadline, unset = DefaultDeadline, " (not set: a backup's default deadline)"
	}
	if d, ok := p.duration("backupDeadline", backupDeadline, time.Second, jobapi.MaxDeadline); ok {
		p.graceCovers(retention, d, "backupDeadline", unset+", to the longest deadline of the backups into this store")
	}
	if err := p.err(); err != nil {
		return resolvedPrune{}, err
	}
	job := a.job(j, w)
	job.WorldClaimName, job.WorldRoot = "", "" // no world
	return resolvedPrune{
		Job: jobspec.Prune{
			Job:              job,
			ConfigSecretName: configSecret,
			ConfigMountPath:  configMount,
			Store:            store,
			Retention:        *retention,
			DryRun:           a.DryRun,
		},
		Timeout:   j.Timeout,
		Preflight: j.Preflight,
	}, nil
}
