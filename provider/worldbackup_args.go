package provider

import (
	"time"

	"github.com/worldbackup/worldbackup/internal/layout"
	"github.com/worldbackup/worldbackup/provider/jobspec"
	"github.com/worldbackup/worldbackup/provider/naming"
)

// Defaults of the WorldBackup inputs that no other component shares.
const (
	DefaultConfigSecretName = "felis-config"
	DefaultConfigMountPath  = "/etc/felis"
	DefaultCompression      = layout.CompressionZstd
)

// fsGroupForSecret is why restricted mode needs a non-zero fsGroup in the
// backup Job.
const fsGroupForSecret = "so that the non-root archiver can read the config Secret (files owned by root, mode 0400)"

// WorldBackupArgs are the inputs of a WorldBackup: plain values, so the same
// struct serves Go programs and the component-provider plugin. Empty optional
// inputs take the defaults documented on each field (see Annotate).
type WorldBackupArgs struct {
	Server             string            `pulumi:"server"`
	FormerOwner        string            `pulumi:"formerOwner,optional"`
	RunID              string            `pulumi:"runId"`
	Image              string            `pulumi:"image"`
	BackupClaimName    string            `pulumi:"backupClaimName,optional"`
	Namespace          string            `pulumi:"namespace,optional"`
	ServiceAccountName string            `pulumi:"serviceAccountName,optional"`
	ConfigSecretName   string            `pulumi:"configSecretName,optional"`
	ConfigMountPath    string            `pulumi:"configMountPath,optional"`
	BackupRoot         string            `pulumi:"backupRoot,optional"`
	WorldRoot          string            `pulumi:"worldRoot,optional"`
	WorldClaimName     string            `pulumi:"worldClaimName,optional"`
	Deadline           string            `pulumi:"deadline,optional"`
	CPULimit           string            `pulumi:"cpuLimit,optional"`
	MemoryLimit        string            `pulumi:"memoryLimit,optional"`
	SecurityMode       string            `pulumi:"securityMode,optional"`
	RunAsUser          *int              `pulumi:"runAsUser,optional"`
	RunAsGroup         *int              `pulumi:"runAsGroup,optional"`
	FSGroup            *int              `pulumi:"fsGroup,optional"`
	TTLAfterFinished   string            `pulumi:"ttlAfterFinished,optional"`
	BackoffLimit       *int              `pulumi:"backoffLimit,optional"`
	Compression        string            `pulumi:"compression,optional"`
	Excludes           []string          `pulumi:"excludes,optional"`
	NodeName           string            `pulumi:"nodeName,optional"`
	NodeSelector       map[string]string `pulumi:"nodeSelector,optional"`
	Rcon               *RconArgs         `pulumi:"rcon,optional"`
	Retention          *RetentionArgs    `pulumi:"retention,optional"`
	Store              *StoreArgs        `pulumi:"store,optional"`
	GamePodSelector    map[string]string `pulumi:"gamePodSelector,optional"`
	GamePodAffinity    string            `pulumi:"gamePodAffinity,optional"`
	Labels             map[string]string `pulumi:"labels,optional"`
	Annotations        map[string]string `pulumi:"annotations,optional"`
	SkipAwait          bool              `pulumi:"skipAwait,optional"`
	Timeout            string            `pulumi:"timeout,optional"`
	ReplaceUnready     *bool             `pulumi:"replaceUnready,optional"`
	Preflight          *bool             `pulumi:"preflight,optional"`
	// Kubeconfig is the kubeconfig the preflight uses, a path or the file's
	// contents, as the Kubernetes provider's kubeconfig ("" = the ambient
	// one). Go programs only: it has no pulumi tag, so it is no input of the
	// plugin and never reaches the state.
	Kubeconfig  string
	KubeContext string `pulumi:"kubeContext,optional"`
}

// withDefaults returns a copy of a with every empty optional input that
// only WorldBackup has set to its default; the inputs every component shares
// get theirs from sharedInputs.withDefaults.
func (a WorldBackupArgs) withDefaults() WorldBackupArgs {
	setDefault(&a.ConfigSecretName, DefaultConfigSecretName)
	setDefault(&a.ConfigMountPath, DefaultConfigMountPath)
	setDefault(&a.BackupRoot, DefaultBackupRoot)
	setDefault(&a.WorldRoot, DefaultWorldRoot)
	if a.Server != "" {
		setDefault(&a.WorldClaimName, naming.WorldClaim(a.Server))
		if a.GamePodSelector == nil {
			a.GamePodSelector = map[string]string{jobspec.GamePodLabel: naming.GamePod(a.Server)}
		}
	}
	setDefault(&a.Compression, DefaultCompression)
	return a
}

// shared returns the inputs of a that every component shares.
func (a WorldBackupArgs) shared() sharedInputs {
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
// one *InputError, each problem naming the input and the fix; nil when a is
// valid. NewWorldBackup calls it before registering anything.
func (a WorldBackupArgs) Validate() error {
	_, err := a.resolve()
	return err
}

// Job returns the backup Job builder's arguments of a: its inputs with their
// defaults, validated (the same *InputError as Validate).
func (a WorldBackupArgs) Job() (jobspec.Backup, error) {
	r, err := a.resolve()
	return r.Job, err
}

// resolve applies the defaults, validates and returns the Job builder's
// arguments and the Pulumi timeout.
func (a WorldBackupArgs) resolve() (resolvedBackup, error) {
	a = a.withDefaults()
	p := &problems{component: "worldbackup"}

	p.server("server", a.Server, naming.KindBackup)
	p.runID("runId", a.RunID)
	p.text("formerOwner", a.FormerOwner, 253)
	p.image("image", a.Image)
	store := a.Store.resolve(p, storeForBackup)
	p.backupClaim(a.BackupClaimName, store)
	j := p.job(a.shared().withDefaults(), jobRules{run: "backup", baselineCaps: "DAC_OVERRIDE", fsGroupNeed: fsGroupForSecret})
	p.dnsSubdomain("configSecretName", a.ConfigSecretName)
	if a.WorldClaimName != naming.WorldClaim(a.Server) { // the derived name is as valid as server
		p.dnsSubdomain("worldClaimName", a.WorldClaimName)
	}
	p.mountPaths(storeMounts(store, a.BackupRoot,
		mount{"worldRoot", a.WorldRoot},
		mount{"configMountPath", a.ConfigMountPath},
	)...)
	if _, err := layout.Extension(a.Compression); err != nil {
		p.addf("compression", "%q is not supported: use zstd, gzip or none", a.Compression)
	}
	for i, e := range a.Excludes {
		if e == "" {
			p.addf("excludes", "item %d is empty: remove it or give a glob, e.g. *.jar or cache/", i)
			continue
		}
		p.text("excludes", e, 4096)
	}
	rcon := a.Rcon.resolve(p, a.Server)
	retention := a.Retention.resolve(p)

	if err := p.err(); err != nil {
		return resolvedBackup{}, err
	}
	archiveRef, err := layout.ArchiveRef(a.BackupRoot, a.Server, a.RunID, a.Compression)
	if store != nil {
		archiveRef, err = s3ArchiveRefOf(store.URL, a.Server, a.RunID, a.Compression)
	}
	if err != nil { // unreachable: every part was validated above
		return resolvedBackup{}, err
	}
	return resolvedBackup{
		Job: jobspec.Backup{
			Server:             a.Server,
			FormerOwner:        a.FormerOwner,
			RunID:              a.RunID,
			Namespace:          j.Namespace,
			Image:              a.Image,
			ServiceAccountName: j.ServiceAccountName,
			WorldClaimName:     a.WorldClaimName,
			BackupClaimName:    a.BackupClaimName,
			ConfigSecretName:   a.ConfigSecretName,
			WorldRoot:          a.WorldRoot,
			BackupRoot:         a.BackupRoot,
			ConfigMountPath:    a.ConfigMountPath,
			Compression:        a.Compression,
			Excludes:           a.Excludes,
			Store:              store,
			Rcon:               rcon,
			Retention:          retention,
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
		Timeout:    j.Timeout,
		ArchiveRef: archiveRef,
		Preflight:  j.Preflight,
	}, nil
}

// backupClaim checks backupClaimName: required for the folder store, not
// set with an S3 store (whose Job mounts no backup claim).
func (p *problems) backupClaim(claim string, store *jobspec.S3Store) {
	switch {
	case store == nil:
		if p.required("backupClaimName", claim, "set it to the PersistentVolumeClaim that holds the archives, e.g. world-backups, or set store to archive into S3") {
			p.dnsSubdomain("backupClaimName", claim)
		}
	case claim != "":
		p.addf("backupClaimName", "is set together with store: with an S3 store the Job mounts no backup claim; remove backupClaimName, or remove store to use the claim")
	}
}

// resolvedBackup is a validated WorldBackup: the Job builder's arguments,
// the Pulumi create/update timeout and the predicted archive path.
type resolvedBackup struct {
	Job        jobspec.Backup
	Timeout    time.Duration
	ArchiveRef string
	Preflight  preflightSettings
}
