package provider

import (
	"path"
	"regexp"
	"strings"
	"time"
	"unicode"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/worldbackup/worldbackup/provider/jobspec"
	"github.com/worldbackup/worldbackup/provider/naming"
)

// DefaultReplace is the default of WorldRestore's replace input: restoring
// over the existing world is what a restore is for.
const DefaultReplace = true

// maxMaxBytes is the largest maxBytes accepted (an int64 holds 8 Ei).
var maxMaxBytes = resource.MustParse("1Ei")

// maxMaxEntries is the largest maxEntries accepted.
const maxMaxEntries = 1 << 40

var sha256RE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// WorldRestoreArgs are the inputs of a WorldRestore: plain values, so the
// same struct serves Go programs and the component-provider plugin. Empty
// optional inputs take the defaults documented on each field (see Annotate).
type WorldRestoreArgs struct {
	Server             string            `pulumi:"server"`
	RunID              string            `pulumi:"runId"`
	ArchiveRef         string            `pulumi:"archiveRef"`
	SHA256             string            `pulumi:"sha256"`
	Replace            *bool             `pulumi:"replace,optional"`
	Image              string            `pulumi:"image"`
	BackupClaimName    string            `pulumi:"backupClaimName,optional"`
	Namespace          string            `pulumi:"namespace,optional"`
	ServiceAccountName string            `pulumi:"serviceAccountName,optional"`
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
	MaxBytes           string            `pulumi:"maxBytes,optional"`
	MaxEntries         *int              `pulumi:"maxEntries,optional"`
	Store              *StoreArgs        `pulumi:"store,optional"`
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
	// Kubeconfig is the kubeconfig the preflight uses, a path or the file's
	// contents, as the Kubernetes provider's kubeconfig ("" = the ambient
	// one). Go programs only: it has no pulumi tag, so it is no input of the
	// plugin and never reaches the state.
	Kubeconfig  string
	KubeContext string `pulumi:"kubeContext,optional"`
}

// withDefaults returns a copy of a with every empty optional input that
// only WorldRestore has set to its default; the inputs every component
// shares get theirs from sharedInputs.withDefaults.
func (a WorldRestoreArgs) withDefaults() WorldRestoreArgs {
	if a.Replace == nil {
		a.Replace = new(DefaultReplace)
	}
	setDefault(&a.BackupRoot, DefaultBackupRoot)
	setDefault(&a.WorldRoot, DefaultWorldRoot)
	if a.Server != "" {
		setDefault(&a.WorldClaimName, naming.WorldClaim(a.Server))
		if a.GamePodSelector == nil {
			a.GamePodSelector = map[string]string{jobspec.GamePodLabel: naming.GamePod(a.Server)}
		}
	}
	return a
}

// shared returns the inputs of a that every component shares.
func (a WorldRestoreArgs) shared() sharedInputs {
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
// valid. NewWorldRestore calls it before registering anything.
func (a WorldRestoreArgs) Validate() error {
	_, err := a.resolve()
	return err
}

// Job returns the restore Job builder's arguments of a: its inputs with their
// defaults, validated (the same *InputError as Validate).
func (a WorldRestoreArgs) Job() (jobspec.Restore, error) {
	r, err := a.resolve()
	return r.Job, err
}

// resolve applies the defaults, validates and returns the Job builder's
// arguments and the Pulumi timeout.
func (a WorldRestoreArgs) resolve() (resolvedRestore, error) {
	a = a.withDefaults()
	p := &problems{component: "worldrestore"}

	p.server("server", a.Server, naming.KindRestore)
	p.runID("runId", a.RunID)
	p.sha256("sha256", a.SHA256)
	p.image("image", a.Image)
	store := a.Store.resolve(p, storeForRestore)
	p.backupClaim(a.BackupClaimName, store)
	// The restore needs no config Secret, so restricted mode needs no
	// fsGroup, but for the S3 credentials Secret.
	rules := jobRules{run: "restore", baselineCaps: "CHOWN, DAC_OVERRIDE and FOWNER"}
	if store != nil {
		rules.fsGroupNeed = fsGroupForS3Secret
	}
	j := p.job(a.shared().withDefaults(), rules)
	if a.WorldClaimName != naming.WorldClaim(a.Server) { // the derived name is as valid as server
		p.dnsSubdomain("worldClaimName", a.WorldClaimName)
	}
	p.mountPaths(storeMounts(store, a.BackupRoot, mount{"worldRoot", a.WorldRoot})...)
	switch {
	case store != nil:
		if p.required("archiveRef", a.ArchiveRef, "set it to the archive's s3:// URL: a WorldBackup's archiveRef output or the archive_ref column of `archiver list`") {
			p.s3ArchiveRef("archiveRef", a.ArchiveRef, store.URL)
		}
	case strings.HasPrefix(a.ArchiveRef, "s3://"):
		p.addf("archiveRef", "%q is in an S3 store, but store is not set: set store (its endpoint, region, pathStyle and credentialsSecretName) so the Job can read it", a.ArchiveRef)
	default:
		p.archiveRef("archiveRef", a.ArchiveRef, a.BackupRoot)
	}
	var maxBytes int64
	if a.MaxBytes != "" {
		if q, ok := p.quantity("maxBytes", a.MaxBytes, "64Gi or 500Mi"); ok {
			if q.Cmp(maxMaxBytes) > 0 {
				p.addf("maxBytes", "%q is too large: use at most 1Ei", a.MaxBytes)
			}
			maxBytes = q.Value()
		}
	}
	var maxEntries int64
	if a.MaxEntries != nil {
		if *a.MaxEntries < 1 || *a.MaxEntries > maxMaxEntries {
			p.addf("maxEntries", "%d is out of range: use 1 to %d, or leave it unset for the archiver's default (1000000)", *a.MaxEntries, maxMaxEntries)
		}
		maxEntries = int64(*a.MaxEntries)
	}

	if err := p.err(); err != nil {
		return resolvedRestore{}, err
	}
	return resolvedRestore{
		Job: jobspec.Restore{
			Server:             a.Server,
			RunID:              a.RunID,
			ArchiveRef:         a.ArchiveRef,
			SHA256:             a.SHA256,
			Replace:            *a.Replace,
			MaxBytes:           maxBytes,
			MaxEntries:         maxEntries,
			Store:              store,
			Namespace:          j.Namespace,
			Image:              a.Image,
			ServiceAccountName: j.ServiceAccountName,
			WorldClaimName:     a.WorldClaimName,
			BackupClaimName:    a.BackupClaimName,
			WorldRoot:          a.WorldRoot,
			BackupRoot:         a.BackupRoot,
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

// resolvedRestore is a validated WorldRestore: the Job builder's arguments
// and the Pulumi create/update timeout.
type resolvedRestore struct {
	Job       jobspec.Restore
	Timeout   time.Duration
	Preflight preflightSettings
}

// sha256 checks a required SHA-256 in lowercase hex.
func (p *problems) sha256(input, sum string) {
	if !p.required(input, sum, "set it to the archive's SHA-256 as the catalog recorded it (the sha256 column of `archiver list`): 64 lowercase hex digits") {
		return
	}
	switch lower := strings.ToLower(sum); {
	case sha256RE.MatchString(sum):
	case sha256RE.MatchString(lower):
		p.addf(input, "%q has upper-case letters: use the lower-case form %q", sum, lower)
	default:
		p.addf(input, "%q is not a SHA-256: use 64 hex digits (0-9, a-f), as the sha256 column of `archiver list` shows it", sum)
	}
}

// archiveRef checks a required archive path: absolute, clean and strictly
// under root, where the Job mounts the backup claim (when root itself is a
// valid mount path; mountPaths reports it otherwise).
func (p *problems) archiveRef(input, ref, root string) {
	rootOK := strings.HasPrefix(root, "/") && root != "/" && path.Clean(root) == root
	const example = "/backups/survival/2025-06-01T0300Z.tar.zst"
	if !p.required(input, ref, "set it to the archive's path in the pod, under backupRoot: a WorldBackup's archiveRef output or the archive_ref column of `archiver list`, e.g. "+example) {
		return
	}
	switch {
	case !strings.HasPrefix(ref, "/"):
		p.addf(input, "%q is invalid: use the absolute path of the archive in the pod, under backupRoot, e.g. %s", ref, example)
	case path.Clean(ref) != ref:
		p.addf(input, "%q is invalid: use the clean form %q", ref, path.Clean(ref))
	case strings.IndexFunc(ref, unicode.IsControl) >= 0:
		p.addf(input, "%q is invalid: remove control characters (newlines, tabs, NUL)", ref)
	case rootOK && !strings.HasPrefix(ref, root+"/"):
		p.addf(input, "%q is not under backupRoot %q, where the Job mounts the backup claim: give the archive's path below it (e.g. %s/survival/<runId>.tar.zst), or set backupRoot to the mount path the backup ran with",
			ref, root, root)
	}
}
