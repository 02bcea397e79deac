package provider

import (
	"time"

	"github.com/worldbackup/worldbackup/provider/jobspec"
	"github.com/worldbackup/worldbackup/provider/naming"
)

// WorldPruneArgs are the inputs of a WorldPrune: its own (server, runId,
// retention, dryRun, the claim, Secret and paths of the archives) and the
// inputs every component shares. Plain values, so the same struct serves Go
// programs and the component-provider plugin.
type WorldPruneArgs struct {
	Server             string            `pulumi:"server"`
	RunID              string            `pulumi:"runId"`
	Retention          RetentionArgs     `pulumi:"retention"`
	DryRun             bool              `pulumi:"dryRun,optional"`
	Image              string            `pulumi:"image"`
	BackupClaimName    string            `pulumi:"backupClaimName"`
	ConfigSecretName   string            `pulumi:"configSecretName,optional"`
	ConfigMountPath    string            `pulumi:"configMountPath,optional"`
	BackupRoot         string            `pulumi:"backupRoot,optional"`
	Namespace          string            `pulumi:"namespace,optional"`
	ServiceAccountName string            `pulumi:"serviceAccountName,optional"`
	Deadline           string            `pulumi:"deadline,optional"`
	CPULimit           string            `pulumi:"cpuLimit,optional"`
	MemoryLimit        string            `pulumi:"memoryLimit,optional"`
	SecurityMode       string            `pulumi:"securityMode,optional"`
	RunAsUser          *int              `pulumi:"runAsUser,optional"`
	RunAsGroup         *int              `pulumi:"runAsGroup,optional"`
	FSGroup            *int              `pulumi:"fsGroup,optional"`
	TTLAfterFinished   string            `pulumi:"ttlAfterFinished,optional"`
	BackoffLimit       *int              `pulumi:"backoffLimit,optional"`
	NodeName           string            `pulumi:"nodeName,optional"`
	NodeSelector       map[string]string `pulumi:"nodeSelector,optional"`
	GamePodSelector    map[string]string `pulumi:"gamePodSelector,optional"`
	GamePodAffinity    string            `pulumi:"gamePodAffinity,optional"`
	Labels             map[string]string `pulumi:"labels,optional"`
	Annotations        map[string]string `pulumi:"annotations,optional"`
	SkipAwait          bool              `pulumi:"skipAwait,optional"`
	Timeout            string            `pulumi:"timeout,optional"`
	ReplaceUnready     *bool             `pulumi:"replaceUnready,optional"`
	Preflight          *bool             `pulumi:"preflight,optional"`
	// Kubeconfig: as WorldBackupArgs.Kubeconfig (Go programs only).
	Kubeconfig  string
	KubeContext string `pulumi:"kubeContext,optional"`
}

// withDefaults returns a copy of a with every empty optional input that
// only WorldPrune has set to its default (those of WorldBackup: the prune
// sees the archives where the backups write them).
func (a WorldPruneArgs) withDefaults() WorldPruneArgs {
	setDefault(&a.ConfigSecretName, DefaultConfigSecretName)
	setDefault(&a.ConfigMountPath, DefaultConfigMountPath)
	setDefault(&a.BackupRoot, DefaultBackupRoot)
	if a.Server != "" && a.GamePodSelector == nil {
		// The backup claim is where the backups mount it: next to the game pod.
		a.GamePodSelector = map[string]string{jobspec.GamePodLabel: naming.GamePod(a.Server)}
	}
	return a
}

// shared returns the inputs of a that every component shares.
func (a WorldPruneArgs) shared() sharedInputs {
	return sharedInputs{
		Namespace:          a.Namespace,
		ServiceAccountName: a.ServiceAccountName,
		Deadline:           a.Deadline,
		Timeout:            a.Timeout,
		TTLAfterFinished:   a.TTLAfterFinished,
		BackoffLimit:       a.BackoffLimit,
		CPULimit:           a.CPULimit,
		MemoryLimit:        a.MemoryLimit,
		SecurityMode:       a.SecurityMode,
		RunAsUser:          a.RunAsUser,
		RunAsGroup:         a.RunAsGroup,
		FSGroup:            a.FSGroup,
		NodeName:           a.NodeName,
		NodeSelector:       a.NodeSelector,
		GamePodSelector:    a.GamePodSelector,
		GamePodAffinity:    a.GamePodAffinity,
		Labels:             a.Labels,
		Annotations:        a.Annotations,
		SkipAwait:          a.SkipAwait,
		ReplaceUnready:     a.ReplaceUnready,
		Preflight:          a.Preflight,
		Kubeconfig:         a.Kubeconfig,
		KubeContext:        a.KubeContext,
	}
}

// Validate reports every missing or invalid input of a (after defaults) in
// one *InputError; nil when a is valid.
func (a WorldPruneArgs) Validate() error {
	_, err := a.resolve()
	return err
}

// Job returns the prune Job builder's arguments of a, validated.
func (a WorldPruneArgs) Job() (jobspec.Prune, error) {
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
	a = a.withDefaults()
	p := &problems{component: "worldprune"}
	p.server("server", a.Server, naming.KindPrune)
	p.runID("runId", a.RunID)
	p.image("image", a.Image)
	if p.required("backupClaimName", a.BackupClaimName, "set it to the PersistentVolumeClaim that holds the archives, e.g. world-backups") {
		p.dnsSubdomain("backupClaimName", a.BackupClaimName)
	}
	j := p.job(a.shared().withDefaults(), jobRules{run: "prune", baselineCaps: "DAC_OVERRIDE", fsGroupNeed: fsGroupForSecret})
	p.dnsSubdomain("configSecretName", a.ConfigSecretName)
	p.mountPaths(mount{"backupRoot", a.BackupRoot}, mount{"configMountPath", a.ConfigMountPath})
	retention := a.Retention.resolve(p)
	if err := p.err(); err != nil {
		return resolvedPrune{}, err
	}
	return resolvedPrune{
		Job: jobspec.Prune{
			Server:             a.Server,
			RunID:              a.RunID,
			Retention:          *retention,
			DryRun:             a.DryRun,
			Namespace:          j.Namespace,
			Image:              a.Image,
			ServiceAccountName: j.ServiceAccountName,
			BackupClaimName:    a.BackupClaimName,
			ConfigSecretName:   a.ConfigSecretName,
			BackupRoot:         a.BackupRoot,
			ConfigMountPath:    a.ConfigMountPath,
			Deadline:           j.Deadline,
			TTLAfterFinished:   j.TTLAfterFinished,
			BackoffLimit:       j.BackoffLimit,
			Resources:          j.Resources,
			Identity:           j.Identity,
			Placement:          j.Placement,
			Labels:             j.Labels,
			Annotations:        j.Annotations,
			Await:              j.Await,
		},
		Timeout:   j.Timeout,
		Preflight: j.Preflight,
	}, nil
}
