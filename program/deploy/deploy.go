// Package deploy is the worldbackup Pulumi program: it reads the stack config
// (servers, clusters, image, volumes, the run trigger), declares one
// WorldBackup per server per cluster (and, when a server asks, a
// WorldBackupSchedule and a WorldPrune), each with its cluster's Kubernetes
// provider, and exports what each run produces. Program is what
// `pulumi up` runs (via program/main.go) and what the stack tests run inline.
package deploy

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/worldbackup/worldbackup/jobapi"
	"github.com/worldbackup/worldbackup/provider"
	"github.com/worldbackup/worldbackup/provider/naming"
)

// Program is the Pulumi program: config in, components out, stack outputs.
func Program(ctx *pulumi.Context) error {
	return SharedProgram(nil)(ctx)
}

// SharedProgram is Program with the clusters' concurrency caps taken from
// gates, so that the program runs sharing them (a fleet's shards, run in
// one process) share each cluster's cap; nil: a program run's own.
func SharedProgram(gates *provider.Gates) pulumi.RunFunc {
	return func(ctx *pulumi.Context) error {
		cfg, err := ParseConfig(ctx.GetConfig, configKeys())
		if err != nil {
			return fmt.Errorf("invalid stack config (fix it with `pulumi config set`):\n%w", err)
		}
		cfg.Gates = gates
		return Deploy(ctx, cfg)
	}
}

// configKeys lists the stack's config keys when the CLI passed them in
// PULUMI_CONFIG (a program run by `pulumi up`); inline programs get none.
func configKeys() []string {
	var m map[string]any
	if err := json.Unmarshal([]byte(os.Getenv(pulumi.EnvConfig)), &m); err != nil {
		return nil
	}
	return slices.Collect(maps.Keys(m))
}

// Deploy declares the backups and restores that cfg asks for and exports
// `backups` (one entry per backup with its cluster, server, runId, namespace,
// jobName, archiveRef and what the run reported: status, sha256, sizeBytes)
// and `restores` (the same for each restore, with its status and, for a
// server this program backs up, preRestoreRunId, preRestoreArchiveRef and
// preRestoreStatus: the backup before it), and, when
// servers ask for them, `schedules` (cluster, server, schedule, cronSchedule
// (the schedule with its spread), namespace, cronJobName) and `prunes` (cluster, server, runId, namespace, jobName,
// status).
//
// A restore of a server that is also backed up in the same cluster waits for
// a backup of its own (preRestoreBackup), after this run's, whose
// archiveRef Output carries the restore's archive: the world is saved
// before it is replaced (Validate refuses skipAwait then, which would break
// that order).
//
// When deploying (not rendering), each component looks up at preview what
// its Job needs in its cluster, with the cluster's kubeconfig and context,
// and replaces a Job that did not complete at the next up.
func Deploy(ctx *pulumi.Context, cfg Config) error {
	if cfg.Gates == nil {
		cfg.Gates = &provider.Gates{}
	}
	var backups, restores, schedules, prunes, verifies, verifySchedules, metrics pulumi.MapArray
	longest := cfg.longestDeadlines() // by store: what each prune's grace must cover
	for _, cl := range cfg.Clusters {
		k8s, err := clusterProvider(ctx, cfg, cl)
		if err != nil {
			return err
		}
		if cfg.Metrics != nil {
			m, err := provider.NewWorldMetrics(ctx, cl.Name+"-metrics", metricsArgs(cfg, cl), pulumi.Provider(k8s))
			if err != nil {
				return fmt.Errorf("cluster %s, metrics: %w", cl.Name, err)
			}
			metrics = append(metrics, pulumi.Map{"cluster": pulumi.String(cl.Name), "namespace": m.Namespace,
				"serviceName": m.ServiceName, "portName": m.PortName, "url": m.URL})
		}
		saved := map[string]*provider.WorldBackup{}
		for _, s := range cfg.Servers {
			b, err := provider.NewWorldBackup(ctx, resourceName(cl.Name, s.Name, ""), backupArgs(cfg, cl, s), pulumi.Provider(k8s))
			if err != nil {
				return fmt.Errorf("cluster %s, server %s: %w", cl.Name, s.Name, err)
			}
			saved[s.Name] = b
			out := outputs(cl.Name, s.Name, b.RunID, b.Namespace, b.JobName, b.ArchiveRef)
			out["status"], out["sha256"], out["sizeBytes"] = b.Status, b.SHA256, b.SizeBytes
			backups = append(backups, out)
			if s.Schedule != "" {
				sched := provider.WorldBackupScheduleArgs{WorldBackupArgs: backupArgs(cfg, cl, s), ScheduleInputs: provider.ScheduleInputs{
					Schedule: s.Schedule, TimeZone: s.TimeZone, Spread: s.Spread, SpreadKey: naming.SpreadKey(cl.Name, s.Name)}}
				sc, err := provider.NewWorldBackupSchedule(ctx, resourceName(cl.Name, s.Name, suffixSchedule), sched, pulumi.Provider(k8s))
				if err != nil {
					return fmt.Errorf("cluster %s, server %s, schedule: %w", cl.Name, s.Name, err)
				}
				schedules = append(schedules, pulumi.Map{"cluster": pulumi.String(cl.Name), "server": pulumi.String(s.Name),
					"schedule": pulumi.String(s.Schedule), "cronSchedule": sc.CronSchedule, "namespace": sc.Namespace, "cronJobName": sc.CronJobName})
			}
			if s.Prune != nil {
				// After this run's backup, so the prune sees it.
				p, err := provider.NewWorldPrune(ctx, resourceName(cl.Name, s.Name, suffixPrune), pruneArgs(cfg, cl, s, longest),
					pulumi.Provider(k8s), pulumi.DependsOn([]pulumi.Resource{b}))
				if err != nil {
					return fmt.Errorf("cluster %s, server %s, prune: %w", cl.Name, s.Name, err)
				}
				prunes = append(prunes, pulumi.Map{"cluster": pulumi.String(cl.Name), "server": pulumi.String(s.Name),
					"runId": p.RunID, "namespace": p.Namespace, "jobName": p.JobName, "status": p.Status})
			}
			switch {
			case s.Verify.scheduled():
				vs, err := provider.NewWorldVerifySchedule(ctx, resourceName(cl.Name, s.Name, suffixVerifySchedule), verifyScheduleArgs(cfg, cl, s), pulumi.Provider(k8s))
				if err != nil {
					return fmt.Errorf("cluster %s, server %s, verify schedule: %w", cl.Name, s.Name, err)
				}
				verifySchedules = append(verifySchedules, pulumi.Map{"cluster": pulumi.String(cl.Name), "server": pulumi.String(s.Name),
					"cronJobName": vs.CronJobName, "namespace": vs.Namespace, "cronSchedule": vs.CronSchedule})
			case s.Verify != nil:
				// A verify by run of this run's backup, which it waits for
				// (its fromRun comes through the backup's archiveRef
				// Output). That is unknown at preview, which would put off
				// every check of the verify's inputs to `pulumi up`, after
				// the backup ran: so its inputs are checked first with the
				// plain run ID.
				if err := checkVerifyPlain(cfg, cl, s); err != nil {
					return fmt.Errorf("cluster %s, server %s, verify: %w", cl.Name, s.Name, err)
				}
				v, err := provider.NewWorldVerify(ctx, resourceName(cl.Name, s.Name, suffixVerify), verifyArgs(cfg, cl, s, b), pulumi.Provider(k8s))
				if err != nil {
					return fmt.Errorf("cluster %s, server %s, verify: %w", cl.Name, s.Name, err)
				}
				verifies = append(verifies, pulumi.Map{"cluster": pulumi.String(cl.Name), "server": pulumi.String(s.Name),
					"runId": v.RunID, "namespace": v.Namespace, "jobName": v.JobName, "archiveRef": v.ArchiveRef,
					"status": v.Status, "chunksChecked": v.ChunksChecked, "problems": v.Problems})
			}
		}
		for _, r := range cfg.Restores {
			if r.Cluster != "" && r.Cluster != cl.Name {
				continue
			}
			v := r.ArchiveRef
			if r.byRun() {
				v = r.FromRun
			}
			var ref pulumi.StringInput = pulumi.String(v)
			var pre *provider.WorldBackup
			if b, ok := saved[r.Server]; ok {
				if pre, err = preRestoreBackup(ctx, cfg, cl, r, b, k8s); err != nil {
					return fmt.Errorf("cluster %s, restore of %s, the backup before it: %w", cl.Name, r.Server, err)
				}
				// The restore's archive (or run) comes through that
				// backup's archiveRef Output, so the restore waits for it
				// (it saves the world the restore replaces): a data
				// dependency, not DependsOn. The archive is the entry's, not
				// the new one; latest is resolved when the restore Job runs,
				// after the backup.
				ref = pre.ArchiveRef.ApplyT(func(string) string { return v }).(pulumi.StringOutput)
				// Unknown at preview, so checked first with the value it
				// carries (else every check waits for `pulumi up`).
				if err := restoreArgs(cfg, cl, r, pulumi.String(v)).Validate(); err != nil {
					return fmt.Errorf("cluster %s, restore of %s: %w", cl.Name, r.Server, err)
				}
			}
			w, err := provider.NewWorldRestore(ctx, resourceName(cl.Name, r.Server, suffixRestore), restoreArgs(cfg, cl, r, ref), pulumi.Provider(k8s))
			if err != nil {
				return fmt.Errorf("cluster %s, restore of %s: %w", cl.Name, r.Server, err)
			}
			out := outputs(cl.Name, r.Server, w.RunID, w.Namespace, w.JobName, w.ArchiveRef)
			out["status"] = w.Status
			if pre != nil {
				out["preRestoreRunId"], out["preRestoreArchiveRef"], out["preRestoreStatus"] = pre.RunID, pre.ArchiveRef, pre.Status
			}
			restores = append(restores, out)
		}
	}
	ctx.Export("backups", backups)
	ctx.Export("restores", restores)
	if len(schedules) > 0 {
		ctx.Export("schedules", schedules)
	}
	if len(prunes) > 0 {
		ctx.Export("prunes", prunes)
	}
	if len(verifies) > 0 {
		ctx.Export("verifies", verifies)
	}
	if len(verifySchedules) > 0 {
		ctx.Export("verifySchedules", verifySchedules)
	}
	if len(metrics) > 0 {
		ctx.Export("metrics", metrics)
	}
	return nil
}

// The suffixes of the Pulumi names of a server's components after its
// backup's (resourceName).
const (
	suffixSchedule       = "-schedule"
	suffixPrune          = "-prune"
	suffixVerify         = "-verify"
	suffixVerifySchedule = "-verify-schedule"
	suffixRestore        = "-restore"
	suffixPreRestore     = "-pre-restore" // the backup before a restore
)

// preRestoreBackup declares the backup that saves the world restore r
// replaces, just before it. It is a run of its own,
// <cluster>.<server>.pre-<the restore's trigger>, so the same entry backs
// up once as it restores once: this run's backup alone does not save the
// world when worldbackup:runId did not change since it ran (days of play
// would be replaced unsaved). It starts after this run's backup b (a data
// dependency through its run ID: two backups of one world at once would
// quiesce the game at cross purposes); its inputs are checked first with
// the plain run ID, which is unknown at preview.
func preRestoreBackup(ctx *pulumi.Context, cfg Config, cl Cluster, r Restore, b *provider.WorldBackup, k8s pulumi.ProviderResource) (*provider.WorldBackup, error) {
	a := backupArgs(cfg, cl, cfg.server(r.Server))
	// The restore needs the game server stopped (a world in use is
	// refused): quiescing is then best effort, a stopped server a warning
	// and its world, at rest, backed up as it is. With the server's
	// required RCON this backup would fail on the stopped server that the
	// restore asks for, and the restore would never run.
	if a.Rcon != nil {
		a.Rcon.Required = pulumi.Bool(false)
	}
	// No prune in this backup: its one new run would push the oldest out
	// of a keepLast rule, which may be the very run restored next
	// (fromRun). The server's next backup prunes as configured.
	a.Retention = nil
	id := RunID(cl.Name, r.Server, r.preTrigger())
	a.RunID = pulumi.String(id)
	if err := a.Validate(); err != nil {
		return nil, err
	}
	a.RunID = b.ArchiveRef.ApplyT(func(string) string { return id }).(pulumi.StringOutput)
	return provider.NewWorldBackup(ctx, resourceName(cl.Name, r.Server, suffixPreRestore), a, pulumi.Provider(k8s))
}

// resourceName is the Pulumi name of a component of server in cluster,
// <cluster>-<server><suffix>: unique for each type, which Config.Validate
// makes sure of (checkNames).
func resourceName(cluster, server, suffix string) string {
	return cluster + "-" + server + suffix
}

func outputs(cluster, server string, runID, namespace, jobName, archiveRef pulumi.StringOutput) pulumi.Map {
	return pulumi.Map{
		"cluster":    pulumi.String(cluster),
		"server":     pulumi.String(server),
		"runId":      runID,
		"namespace":  namespace,
		"jobName":    jobName,
		"archiveRef": archiveRef,
	}
}

// RunID is the run ID (the catalog's idempotency key) of one server's backup
// in one cluster for the trigger: unique across servers and clusters that
// share a catalog, stable for a given trigger.
func RunID(cluster, server, trigger string) string {
	return cluster + "." + server + "." + trigger
}

// trigger is the part of restore r's run ID that its entry gives: its
// runId, else fromRun, else the archive's checksum's first 12 digits.
func (r Restore) trigger() string {
	switch {
	case r.RunID != "":
		return restorePrefix + r.RunID
	case r.byRun():
		return restorePrefix + r.FromRun
	}
	sum := r.SHA256
	if len(sum) > 12 {
		sum = sum[:12]
	}
	return restorePrefix + sum
}

// restorePrefix starts a restore's trigger.
const restorePrefix = "restore-"

// preTrigger is the part of the run ID of the backup before restore r
// (preRestoreBackup) that its entry gives: pre-restore-<what the
// restore's trigger names>, the mark that a restore of latest passes over
// (jobapi.IsPreRestore).
func (r Restore) preTrigger() string {
	return jobapi.PreRestorePrefix + strings.TrimPrefix(r.trigger(), restorePrefix)
}

// RenderPath is the folder one cluster's manifests are rendered into.
func RenderPath(renderDir, cluster string) string {
	return filepath.Join(renderDir, cluster)
}

func clusterProvider(ctx *pulumi.Context, cfg Config, cl Cluster) (*kubernetes.Provider, error) {
	args := &kubernetes.ProviderArgs{}
	if cl.Namespace != "" {
		args.Namespace = pulumi.StringPtr(cl.Namespace)
	}
	if cfg.RenderDir != "" {
		dir := cfg.RenderDir
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(ctx.RootDirectory(), dir)
		}
		args.RenderYamlToDirectory = pulumi.StringPtr(RenderPath(dir, cl.Name))
	}
	if cl.Context != "" {
		args.Context = pulumi.StringPtr(cl.Context)
	}
	if cl.Kubeconfig != "" {
		// A kubeconfig's contents carry credentials: keep them encrypted in state.
		args.Kubeconfig = pulumi.ToSecret(pulumi.String(cl.Kubeconfig)).(pulumi.StringOutput).ToStringPtrOutput()
	}
	p, err := kubernetes.NewProvider(ctx, "cluster-"+cl.Name, args)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: creating its Kubernetes provider: %w", cl.Name, err)
	}
	return p, nil
}

// restoreArgs: the restore's run ID is derived from the archive's checksum
// (or the entry's runId), so the same restore entry performs no second
// restore and a new archive a new one (under the entry's runId, only with
// a new runId: the run ID alone is the restore's key). archiveRef is the entry's archive
// (with fromRun: its run) as an input: a plain value, or an Output that
// carries a dependency (see Deploy).
//
// An s3:// archive is read with the settings and credentials of the
// server's store (its own or the stack-wide one), whatever its bucket and
// prefix; an archive path from the backup claim.
func restoreArgs(cfg Config, cl Cluster, r Restore, archiveRef pulumi.StringInput) provider.WorldRestoreArgs {
	server := cfg.server(r.Server)
	var store *provider.StoreArgs
	if r.byRun() {
		return restoreByRunArgs(cfg, cl, r, server, archiveRef)
	}
	if strings.HasPrefix(r.ArchiveRef, "s3://") {
		if store = cfg.storeOf(server).args(); store != nil {
			store.URL = nil
		}
	}
	a := provider.WorldRestoreArgs{
		JobInputs:  jobInputs(cfg, cl, server, RunID(cl.Name, r.Server, r.trigger())),
		Store:      store,
		ArchiveRef: archiveRef,
		SHA256:     pulumi.String(r.SHA256),
		Encryption: r.encryptionOf(server).args(),
	}
	if store != nil {
		a.BackupClaimName = nil // an S3 restore mounts no backup claim
	}
	return a
}

// restoreByRunArgs: a restore of a recorded run (fromRun), resolved by the
// Job's init container from the server's store (its own or the stack-wide
// one; else the backup claim). Its run ID is derived from fromRun, or the
// entry's runId: the same entry restores once, also for latest.
func restoreByRunArgs(cfg Config, cl Cluster, r Restore, server Server, fromRun pulumi.StringInput) provider.WorldRestoreArgs {
	a := provider.WorldRestoreArgs{
		JobInputs:   jobInputs(cfg, cl, server, RunID(cl.Name, r.Server, r.trigger())),
		ByRunInputs: provider.ByRunInputs{FromRun: fromRun},
		Encryption:  r.encryptionOf(server).args(),
	}
	if r.FromServer != "" {
		a.FromServer = pulumi.String(r.FromServer)
	}
	if store := cfg.storeOf(server).args(); store != nil {
		store.URL = nil
		a.Store = store
		a.BackupClaimName = nil // an S3 restore mounts no backup claim
	}
	return a
}

// jobInputs are the inputs of server's Jobs in cluster cl that every
// component shares, with run ID runID.
func jobInputs(cfg Config, cl Cluster, s Server, runID string) provider.JobInputs {
	mode := provider.SecurityMode(cfg.SecurityMode)
	if s.SecurityMode != "" {
		mode = provider.SecurityMode(s.SecurityMode)
	}
	var notify *provider.NotifyArgs
	if n := cfg.Notify; n != nil {
		notify = &provider.NotifyArgs{SecretName: n.SecretName, Key: n.Key, OnSuccess: n.OnSuccess}
	}
	return provider.JobInputs{
		Notify:          notify,
		Server:          s.Name,
		RunID:           pulumi.String(runID),
		Image:           pulumi.String(cfg.Image),
		BackupClaimName: pulumi.String(cfg.BackupClaim),
		Namespace:       pulumi.String(cl.Namespace),
		WorldClaimName:  pulumi.String(s.WorldClaimName),
		NodeName:        pulumi.String(s.NodeName),
		NodeSelector:    stringMap(s.NodeSelector),
		GamePodAffinity: pulumi.String(s.GamePodAffinity),
		SecurityMode:    &mode,
		RunAsUser:       intInput(s.RunAsUser),
		RunAsGroup:      intInput(s.RunAsGroup),
		FSGroup:         intInput(s.FSGroup),
		SkipAwait:       cfg.SkipAwait,
		ReplaceUnready:  replaceUnready(cfg),
		Preflight:       new(cfg.RenderDir == ""),
		Kubeconfig:      cl.Kubeconfig,
		KubeContext:     cl.Context,
		// The server's limits hold for each of its Jobs: a world large
		// enough for a longer deadline takes as long to restore or verify.
		Deadline:    pulumi.String(s.Deadline),
		CPULimit:    pulumi.String(s.CPULimit),
		MemoryLimit: pulumi.String(s.MemoryLimit),
		// A private registry's Secrets, for every pod of the program.
		ImagePullSecrets: pulumi.ToStringArray(cfg.ImagePullSecrets),
	}
}

func backupArgs(cfg Config, cl Cluster, s Server) provider.WorldBackupArgs {
	ret := cfg.Retention
	if s.Retention != nil {
		ret = s.Retention
	}
	j := jobInputs(cfg, cl, s, RunID(cl.Name, s.Name, cfg.RunID))
	a := provider.WorldBackupArgs{
		JobInputs:   j,
		Rcon:        s.Rcon.args(),
		Retention:   ret.args(),
		FormerOwner: pulumi.String(s.FormerOwner),
		Excludes:    stringArray(s.Excludes),
		Store:       cfg.storeOf(s).args(),
		Encryption:  s.Encryption.args(),
		Concurrency: intPtr(cl.Concurrency),
		Gates:       cfg.Gates,
	}
	if a.Store != nil {
		a.BackupClaimName = nil // an S3 backup mounts no backup claim
	}
	if s.Compression != "" {
		a.Compression = new(provider.Compression(s.Compression))
	}
	if f := cfg.formatOf(s); f != "" {
		a.Format = new(provider.Format(f))
	}
	return a
}

// intInput is v as an input; nil (the default) when v is.
// intPtr is v as an optional plain input; nil (not set) when v is 0.
func intPtr(v int) *int {
	if v == 0 {
		return nil
	}
	return &v
}

func intInput(v *int) pulumi.IntInput {
	if v == nil {
		return nil
	}
	return pulumi.Int(*v)
}

// stringMap is m as an input; nil (the default) when m is.
func stringMap(m map[string]string) pulumi.StringMapInput {
	if m == nil {
		return nil
	}
	return pulumi.ToStringMap(m)
}

// stringArray is a as an input; nil (the default) when a is.
func stringArray(a []string) pulumi.StringArrayInput {
	if a == nil {
		return nil
	}
	return pulumi.ToStringArray(a)
}

// pruneArgs are the inputs of server s's WorldPrune in cluster cl: the
// backup's claim or S3 store, image, identity and placement (no world), the
// prune's own rules, and the longest deadline of the backups into its store
// (which its grace must cover; longest is cfg.longestDeadlines()).
func pruneArgs(cfg Config, cl Cluster, s Server, longest map[string]deadline) provider.WorldPruneArgs {
	j := jobInputs(cfg, cl, s, RunID(cl.Name, s.Name, s.Prune.RunID))
	j.WorldClaimName = nil // a prune mounts no world
	a := provider.WorldPruneArgs{
		JobInputs: j,
		Retention: s.Prune.Retention.args(),
		DryRun:    s.Prune.DryRun,
		Store:     cfg.storeOf(s).args(),
	}
	if l := longest[cfg.storeKey(s)]; l.d > 0 {
		a.BackupDeadline = pulumi.String(jobapi.ShortDuration(l.d))
	}
	if a.Store != nil {
		a.BackupClaimName = nil // an S3 prune mounts no backup claim
	}
	return a
}

// verifyArgs are the inputs of server s's WorldVerify in cluster cl: a
// verify by run of its backup of this run, after that backup b (a data
// dependency through fromRun; plain when b is nil). By run, not by the
// backup's archiveRef and sha256 outputs: those are read from the backup
// pod's termination message, which is gone once the node garbage-collects
// the pod, and a verify fed an empty checksum would fail every later
// `pulumi up`; the run ID is the config's, and the Job's init container
// looks the run up in the catalog.
func verifyArgs(cfg Config, cl Cluster, s Server, b *provider.WorldBackup) provider.WorldVerifyArgs {
	run := RunID(cl.Name, s.Name, cfg.RunID)
	var from pulumi.StringInput = pulumi.String(run)
	if b != nil {
		from = b.ArchiveRef.ApplyT(func(string) string { return run }).(pulumi.StringOutput)
	}
	return verifyByRun(cfg, cl, s, RunID(cl.Name, s.Name, cfg.RunID+".verify"), from)
}

// verifyByRun are the inputs of a WorldVerify of server s in cluster cl
// whose own run ID is runID, verifying the run fromRun (resolved by the
// Job's init container from the server's store): the backup's claim or S3
// store, image, identity and placement (no world), the verify's own.
func verifyByRun(cfg Config, cl Cluster, s Server, runID string, fromRun pulumi.StringInput) provider.WorldVerifyArgs {
	j := jobInputs(cfg, cl, s, runID)
	j.WorldClaimName = nil // a verify mounts no world
	a := provider.WorldVerifyArgs{
		JobInputs:               j,
		ByRunInputs:             provider.ByRunInputs{FromRun: fromRun},
		ChunkSample:             pulumi.String(s.Verify.ChunkSample),
		ScratchSize:             pulumi.String(s.Verify.ScratchSize),
		ScratchStorageClassName: pulumi.String(s.Verify.ScratchStorageClassName),
		Encryption:              s.Encryption.args(),
	}
	if store := cfg.storeOf(s).args(); store != nil {
		store.URL = nil // the resolved run names its object
		a.Store = store
		a.BackupClaimName = nil // an S3 verify mounts no backup claim
	}
	return a
}

// checkVerifyPlain validates the inputs of server s's WorldVerify in cluster
// cl with the plain run ID in place of the backup's output (unknown at
// preview).
func checkVerifyPlain(cfg Config, cl Cluster, s Server) error {
	return verifyArgs(cfg, cl, s, nil).Validate()
}

// verifyScheduleArgs are the inputs of server s's WorldVerifySchedule in
// cluster cl: a verify by run of its newest run, with the verify's settings
// and the schedule, spread by <cluster>/<server> as the backup schedule is.
func verifyScheduleArgs(cfg Config, cl Cluster, s Server) provider.WorldVerifyScheduleArgs {
	a := verifyByRun(cfg, cl, s, RunID(cl.Name, s.Name, "verify-schedule"), pulumi.String(jobapi.RunLatest))
	return provider.WorldVerifyScheduleArgs{WorldVerifyArgs: a, ScheduleInputs: provider.ScheduleInputs{
		Schedule: s.Verify.Schedule, TimeZone: s.Verify.TimeZone, Spread: s.Verify.Spread, SpreadKey: naming.SpreadKey(cl.Name, s.Name)}}
}

// metricsArgs are the inputs of cluster cl's WorldMetrics: the Jobs' image
// and namespace, the cluster's name as its cluster label, the config Secret
// and max age of worldbackup:metrics.
func metricsArgs(cfg Config, cl Cluster) provider.WorldMetricsArgs {
	a := provider.WorldMetricsArgs{Image: pulumi.String(cfg.Image), Cluster: pulumi.String(cl.Name), MaxAge: cfg.Metrics.MaxAge,
		ImagePullSecrets: pulumi.ToStringArray(cfg.ImagePullSecrets)}
	if cl.Namespace != "" {
		a.Namespace = pulumi.String(cl.Namespace)
	}
	if n := cfg.Metrics.ConfigSecretName; n != "" {
		a.ConfigSecretName = pulumi.String(n)
	}
	return a
}

// replaceUnready is the components' replaceUnready for cfg: nil (their
// default: on, off with skipAwait) when deploying; off in render mode, where
// there is no live Job for the provider to check (it would only warn that
// the cluster is unreachable) and GitOps owns the Job.
func replaceUnready(cfg Config) *bool {
	if cfg.RenderDir != "" {
		return new(false)
	}
	return nil
}

// args converts the config's rcon to the component's input (nil: none).
func (r *Rcon) args() *provider.RconArgs {
	if r == nil {
		return nil
	}
	a := &provider.RconArgs{ChartRelease: pulumi.String(r.ChartRelease), Address: pulumi.String(r.Address),
		SecretName: pulumi.String(r.SecretName), SecretKey: pulumi.String(r.SecretKey)}
	if r.Required != nil {
		a.Required = pulumi.Bool(*r.Required)
	}
	return a
}

// args converts the config's encryption to the component's input (nil:
// none).
func (e *Encryption) args() *provider.EncryptionArgs {
	if e == nil {
		return nil
	}
	return &provider.EncryptionArgs{SecretName: pulumi.String(e.SecretName), SecretKey: pulumi.String(e.SecretKey)}
}

// args converts the config's store to the component's input (nil: none).
func (s *Store) args() *provider.StoreArgs {
	if s == nil {
		return nil
	}
	return &provider.StoreArgs{URL: pulumi.String(s.URL), Endpoint: pulumi.String(s.Endpoint),
		Region: pulumi.String(s.Region), PathStyle: pulumi.Bool(s.PathStyle),
		CredentialsSecretName: pulumi.String(s.CredentialsSecretName),
		AccessKeyKey:          pulumi.String(s.AccessKeyKey), SecretKeyKey: pulumi.String(s.SecretKeyKey)}
}

// args converts the config's retention to the component's input (nil: none).
func (r *Retention) args() *provider.RetentionArgs {
	if r == nil {
		return nil
	}
	n := func(v int) pulumi.IntInput {
		if v == 0 {
			return nil
		}
		return pulumi.Int(v)
	}
	return &provider.RetentionArgs{KeepLast: n(r.KeepLast), KeepHourly: n(r.KeepHourly), KeepDaily: n(r.KeepDaily),
		KeepWeekly: n(r.KeepWeekly), KeepMonthly: n(r.KeepMonthly), KeepYearly: n(r.KeepYearly),
		KeepWithin: pulumi.String(r.KeepWithin), MinKeep: pulumi.Int(r.MinKeep), Grace: pulumi.String(r.Grace)}
}
