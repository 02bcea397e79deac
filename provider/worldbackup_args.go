package provider

import (
	"math"
	"time"

	"github.com/worldbackup/worldbackup/internal/layout"
	"github.com/worldbackup/worldbackup/provider/jobspec"
	"github.com/worldbackup/worldbackup/provider/naming"
)

// Defaults of the WorldBackup inputs that no other component shares.
const (
	DefaultConfigSecretName = "felis-config"
	DefaultConfigMountPath  = "/etc/felis"
	DefaultBackupRoot       = "/backups"
	DefaultWorldRoot        = "/world"
	DefaultCompression      = layout.CompressionZstd
)

// Limits of the duration inputs.
const (
	maxDeadline = 7 * 24 * time.Hour
	maxTTL      = time.Duration(math.MaxInt32) * time.Second
)

// WorldBackupArgs are the inputs of a WorldBackup: plain values, so the same
// struct serves Go programs and the component-provider plugin. Empty optional
// inputs take the defaults documented on each field (see Annotate).
type WorldBackupArgs struct {
	Server             string            `pulumi:"server"`
	FormerOwner        string            `pulumi:"formerOwner,optional"`
	RunID              string            `pulumi:"runId"`
	Image              string            `pulumi:"image"`
	BackupClaimName    string            `pulumi:"backupClaimName"`
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
	Labels             map[string]string `pulumi:"labels,optional"`
	Annotations        map[string]string `pulumi:"annotations,optional"`
	SkipAwait          bool              `pulumi:"skipAwait,optional"`
	Timeout            string            `pulumi:"timeout,optional"`
}

// withDefaults returns a copy of a with every empty optional input set to
// its default. The identity inputs (runAsUser, runAsGroup, fsGroup) depend
// on the security mode and are resolved by Validate; timeout defaults to
// deadline plus TimeoutMargin when deadline parses.
func (a WorldBackupArgs) withDefaults() WorldBackupArgs {
	setDefault(&a.Namespace, DefaultNamespace)
	setDefault(&a.ServiceAccountName, DefaultServiceAccountName)
	setDefault(&a.ConfigSecretName, DefaultConfigSecretName)
	setDefault(&a.ConfigMountPath, DefaultConfigMountPath)
	setDefault(&a.BackupRoot, DefaultBackupRoot)
	setDefault(&a.WorldRoot, DefaultWorldRoot)
	if a.Server != "" {
		setDefault(&a.WorldClaimName, naming.WorldClaim(a.Server))
	}
	setDefault(&a.Deadline, DefaultDeadline)
	setDefault(&a.CPULimit, DefaultCPULimit)
	setDefault(&a.MemoryLimit, DefaultMemoryLimit)
	setDefault(&a.SecurityMode, DefaultSecurityMode)
	setDefault(&a.TTLAfterFinished, DefaultTTLAfterFinished)
	if a.BackoffLimit == nil {
		a.BackoffLimit = new(DefaultBackoffLimit)
	}
	setDefault(&a.Compression, DefaultCompression)
	if d, err := time.ParseDuration(a.Deadline); err == nil && a.Timeout == "" {
		a.Timeout = (d + TimeoutMargin).String()
	}
	return a
}

func setDefault(v *string, def string) {
	if *v == "" {
		*v = def
	}
}

// Validate reports every missing or invalid input of a (after defaults) in
// one *InputError, each problem naming the input and the fix; nil when a is
// valid. NewWorldBackup calls it before registering anything.
func (a WorldBackupArgs) Validate() error {
	_, err := a.resolve()
	return err
}

// resolve applies the defaults, validates and returns the Job builder's
// arguments and the Pulumi timeout.
func (a WorldBackupArgs) resolve() (resolvedBackup, error) {
	a = a.withDefaults()
	p := &problems{component: "worldbackup"}

	p.server("server", a.Server)
	p.runID("runId", a.RunID)
	p.text("formerOwner", a.FormerOwner, 253)
	p.image("image", a.Image)
	if p.required("backupClaimName", a.BackupClaimName, "set it to the PersistentVolumeClaim that holds the archives, e.g. world-backups") {
		p.dnsSubdomain("backupClaimName", a.BackupClaimName)
	}
	p.dnsLabel("namespace", a.Namespace)
	p.dnsSubdomain("serviceAccountName", a.ServiceAccountName)
	p.dnsSubdomain("configSecretName", a.ConfigSecretName)
	if a.WorldClaimName != naming.WorldClaim(a.Server) { // the derived name is as valid as server
		p.dnsSubdomain("worldClaimName", a.WorldClaimName)
	}
	p.mountPaths(
		mount{"worldRoot", a.WorldRoot},
		mount{"backupRoot", a.BackupRoot},
		mount{"configMountPath", a.ConfigMountPath},
	)
	deadline, deadlineOK := p.duration("deadline", a.Deadline, time.Second, maxDeadline)
	ttl, _ := p.duration("ttlAfterFinished", a.TTLAfterFinished, 0, maxTTL)
	var timeout time.Duration
	if deadlineOK {
		var ok bool
		if timeout, ok = p.duration("timeout", a.Timeout, time.Second, maxDeadline+TimeoutMargin); ok && timeout < deadline {
			p.addf("timeout", "%q is shorter than deadline %q: Pulumi would stop waiting while the backup still runs; use at least the deadline, or set skipAwait", a.Timeout, a.Deadline)
		}
	}
	cpu, _ := p.quantity("cpuLimit", a.CPULimit, "500m or 2")
	mem, _ := p.quantity("memoryLimit", a.MemoryLimit, "512Mi or 2Gi")
	id := p.identity(a.SecurityMode, a.RunAsUser, a.RunAsGroup, a.FSGroup)
	if *a.BackoffLimit < 0 || *a.BackoffLimit > 100 {
		p.addf("backoffLimit", "%d is out of range: use 0 to 100 (retries after a failed pod)", *a.BackoffLimit)
	}
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
	p.placement(a.NodeName, a.NodeSelector)
	p.labels("labels", a.Labels, jobspec.ReservedLabels)
	p.annotations("annotations", a.Annotations, jobspec.ReservedAnnotations)

	if err := p.err(); err != nil {
		return resolvedBackup{}, err
	}
	archiveRef, err := layout.ArchiveRef(a.BackupRoot, a.Server, a.RunID, a.Compression)
	if err != nil { // unreachable: every part was validated above
		return resolvedBackup{}, err
	}
	return resolvedBackup{
		Job: jobspec.Backup{
			Server:             a.Server,
			FormerOwner:        a.FormerOwner,
			RunID:              a.RunID,
			Namespace:          a.Namespace,
			Image:              a.Image,
			ServiceAccountName: a.ServiceAccountName,
			WorldClaimName:     a.WorldClaimName,
			BackupClaimName:    a.BackupClaimName,
			ConfigSecretName:   a.ConfigSecretName,
			WorldRoot:          a.WorldRoot,
			BackupRoot:         a.BackupRoot,
			ConfigMountPath:    a.ConfigMountPath,
			Compression:        a.Compression,
			Excludes:           a.Excludes,
			Deadline:           deadline,
			TTLAfterFinished:   ttl,
			BackoffLimit:       int32(*a.BackoffLimit),
			Resources:          jobspec.Resources{CPULimit: cpu, MemoryLimit: mem},
			Identity:           id,
			Placement:          jobspec.Placement{NodeName: a.NodeName, NodeSelector: a.NodeSelector},
			Labels:             a.Labels,
			Annotations:        a.Annotations,
			SkipAwait:          a.SkipAwait,
		},
		Timeout:    timeout,
		ArchiveRef: archiveRef,
	}, nil
}

// resolvedBackup is a validated WorldBackup: the Job builder's arguments,
// the Pulumi create/update timeout and the predicted archive path.
type resolvedBackup struct {
	Job        jobspec.Backup
	Timeout    time.Duration
	ArchiveRef string
}
