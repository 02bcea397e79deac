package provider

import (
	"maps"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/distribution/reference"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/worldbackup/worldbackup/jobapi"
	"github.com/worldbackup/worldbackup/provider/jobspec"
	"github.com/worldbackup/worldbackup/provider/naming"
	"github.com/worldbackup/worldbackup/provider/preflight"
)

// Shared defaults of every component (documented on the inputs).
const (
	DefaultNamespace          = "minecraft"
	DefaultServiceAccountName = "felis-restore"
	DefaultDeadline           = "30m"
	DefaultCPULimit           = "1"
	DefaultMemoryLimit        = "1Gi"
	// DefaultBackoffLimit is 0: a failed pod fails the Job at once with
	// reason BackoffLimitExceeded, which `pulumi up` reports (see
	// jobspec.PodFailurePolicy). There is no default TTL: the finished Job
	// stays until the next run ID replaces it.
	DefaultBackoffLimit    = 0
	DefaultGamePodAffinity = string(jobspec.AffinityPreferred)
	DefaultSecurityMode    = string(jobspec.Baseline)
	// DefaultGameUID and DefaultGameGID are the identity of restricted mode
	// when runAsUser/runAsGroup are unset: the UID/GID the Paper images run
	// the game as, which owns level.dat (0600).
	DefaultGameUID = 1000
	DefaultGameGID = 1000
	// TimeoutMargin is added to the deadline for the default timeout: the
	// Job's deadline counts from its start, and Pulumi should see the Job
	// fail by its deadline rather than give up waiting first.
	TimeoutMargin = 5 * time.Minute
)

// Shared defaults of the mount paths (WorldBackup and WorldRestore).
const (
	DefaultBackupRoot = "/backups"
	DefaultWorldRoot  = jobapi.DefaultWorld
)

// Floors of the quantity inputs, one rule each (problems.quantityAtLeast). Each is
// well below what a run needs at all, so a value under it is a unit typo
// rather than a choice (512m is half a byte: 512Mi was meant; 1m is a
// thousandth of a CPU: 1 was meant), which would otherwise show only after
// `pulumi up`, as an OOM-killed, unschedulable or crawling pod.
var (
	// MinMemoryLimit: a whole archiver run was measured at 20-35 MiB RSS
	// (a tar backup or a restore of a small world) up to about 90 MiB (a
	// chunked backup, whose runtime keeps the heap near its 80 MiB soft
	// memory limit, archiver/cmd/archiver DefaultSoftMemoryLimit); below
	// 64Mi not even the smallest run has headroom.
	MinMemoryLimit = resource.MustParse("64Mi")
	// MinCPULimit is the CPU a Job requests by default
	// (jobspec.DefaultCPURequest): less throttles a run into its deadline.
	MinCPULimit = resource.MustParse("100m")
	// MinScratchSize: a verify's scratch volume holds the whole restored
	// world, and even a new world's region files, level.dat and player
	// data take tens of MiB.
	MinScratchSize = resource.MustParse("64Mi")
)

// maxID is the largest UID/GID accepted (Kubernetes allows 0..2^31-1).
const maxID = math.MaxInt32

// maxTTL is the limit of ttlAfterFinished; the deadline's is
// jobapi.MaxDeadline.
const maxTTL = time.Duration(math.MaxInt32) * time.Second

func setDefault(v *string, def string) {
	if *v == "" {
		*v = def
	}
}

// sharedInputs are the inputs every component's Job shares, as given: each
// component's args copy theirs into one (see WorldBackupArgs.shared).
type sharedInputs struct {
	Namespace          string
	ServiceAccountName string
	Deadline           string
	Timeout            string
	TTLAfterFinished   string
	BackoffLimit       *int
	CPULimit           string
	MemoryLimit        string
	SecurityMode       string
	RunAsUser          *int
	RunAsGroup         *int
	FSGroup            *int
	NodeName           string
	NodeSelector       map[string]string
	GamePodSelector    map[string]string
	GamePodAffinity    string
	Tolerations        []TolerationArgs
	PriorityClassName  string
	ImagePullSecrets   []string
	Labels             map[string]string
	Annotations        map[string]string
	SkipAwait          bool
	ReplaceUnready     *bool
	Preflight          *bool
	Kubeconfig         string
	KubeContext        string
	// Target is the Kubernetes provider the Job goes to: in render mode
	// preflight and replaceUnready default to off, and the preflight talks
	// to its cluster.
	Target kubeTarget
}

// withDefaults returns a copy of j with every empty input set to its
// default. The identity inputs (runAsUser, runAsGroup, fsGroup) depend on
// the security mode and are resolved by problems.identity; timeout defaults
// to deadline plus TimeoutMargin when deadline parses.
func (j sharedInputs) withDefaults() sharedInputs {
	setDefault(&j.Namespace, DefaultNamespace)
	setDefault(&j.ServiceAccountName, DefaultServiceAccountName)
	setDefault(&j.Deadline, DefaultDeadline)
	setDefault(&j.CPULimit, DefaultCPULimit)
	setDefault(&j.MemoryLimit, DefaultMemoryLimit)
	setDefault(&j.SecurityMode, DefaultSecurityMode)
	setDefault(&j.GamePodAffinity, DefaultGamePodAffinity)
	if j.BackoffLimit == nil {
		j.BackoffLimit = new(DefaultBackoffLimit)
	}
	if j.ReplaceUnready == nil {
		// A Job that pulumi up does not wait for may still run at the next
		// up: replacing it then would kill the run. A rendered Job has no
		// live object for the provider to check.
		j.ReplaceUnready = new(!j.SkipAwait && !j.Target.Render)
	}
	if j.Preflight == nil {
		// Render mode: no cluster to look at (nor to warn about).
		j.Preflight = new(!j.Target.Render)
	}
	if d, err := time.ParseDuration(j.Deadline); err == nil && j.Timeout == "" {
		j.Timeout = (d + TimeoutMargin).String()
	}
	return j
}

// jobRules are what differs between components in checking sharedInputs.
type jobRules struct {
	// run names what the Job does in messages, e.g. "backup".
	run string
	// baselineCaps lists the capabilities baseline mode keeps, e.g.
	// "DAC_OVERRIDE".
	baselineCaps string
	// fsGroupNeed says why a non-root archiver (restricted mode, or
	// baseline mode with a non-root runAsUser) needs a non-zero fsGroup,
	// e.g. "so that ... can read the config Secret"; "" when it does not.
	fsGroupNeed string
}

// jobSettings are validated sharedInputs, in the builders' types.
type jobSettings struct {
	Namespace          string
	ServiceAccountName string
	Deadline           time.Duration
	Timeout            time.Duration // Pulumi's create/update timeout
	TTLAfterFinished   time.Duration
	BackoffLimit       int32
	Resources          jobspec.Resources
	Identity           jobspec.Identity
	Placement          jobspec.Placement
	Scheduling         jobspec.Scheduling
	Labels             map[string]string
	Annotations        map[string]string
	Await              jobspec.Await
	Preflight          preflightSettings
	Notify             *jobspec.Notify
}

// preflightSettings say whether and against which cluster the component
// looks up what its Job needs at preview.
type preflightSettings struct {
	Enabled bool
	Cluster preflight.Cluster
	// Pending: the Kubernetes provider's inputs are not known yet (at
	// preview: the cluster may not exist yet), so there is nothing to look
	// at until `pulumi up`.
	Pending bool
}

// job checks the shared inputs j (after withDefaults) and returns them
// resolved; the result is meaningful only when no problem was recorded.
func (p *problems) job(j sharedInputs, r jobRules) jobSettings {
	p.namespace("namespace", j.Namespace)
	p.dnsSubdomain("serviceAccountName", j.ServiceAccountName)
	deadline, deadlineOK := p.duration("deadline", j.Deadline, time.Second, jobapi.MaxDeadline)
	var ttl time.Duration
	if j.TTLAfterFinished != "" {
		ttl, _ = p.duration("ttlAfterFinished", j.TTLAfterFinished, time.Second, maxTTL)
	}
	var timeout time.Duration
	if deadlineOK {
		var ok bool
		if timeout, ok = p.duration("timeout", j.Timeout, time.Second, jobapi.MaxDeadline+TimeoutMargin); ok && timeout < deadline {
			p.addf("timeout", "%q is shorter than deadline %q: Pulumi would stop waiting while the %s still runs; use at least the deadline, or set skipAwait", j.Timeout, j.Deadline, r.run)
		}
	}
	cpu, _ := p.quantityAtLeast("cpuLimit", j.CPULimit, "500m or 2", MinCPULimit)
	mem, _ := p.quantityAtLeast("memoryLimit", j.MemoryLimit, "512Mi or 2Gi", MinMemoryLimit)
	id := p.identity(j.SecurityMode, j.RunAsUser, j.RunAsGroup, j.FSGroup, r)
	if *j.BackoffLimit < 0 || *j.BackoffLimit > 100 {
		p.addf("backoffLimit", "%d is out of range: use 0 to 100 (retries after a failed pod)", *j.BackoffLimit)
	}
	p.placement(j.NodeName, j.NodeSelector)
	p.gamePod(j.GamePodSelector, j.GamePodAffinity, j.NodeName)
	scheduling := p.scheduling(j.Tolerations, j.PriorityClassName, j.ImagePullSecrets)
	p.labels("labels", j.Labels, jobspec.ReservedLabels)
	p.annotations("annotations", j.Annotations, jobspec.ReservedAnnotations)
	for _, k := range jobspec.AwaitAnnotations {
		if _, ok := j.Annotations[k]; ok {
			p.addf("annotations", "key %q changes how the Kubernetes provider awaits or deletes the Job, which the component decides: remove it (use skipAwait, replaceUnready or timeout)", k)
		}
	}
	if *j.ReplaceUnready && j.SkipAwait {
		p.addf("replaceUnready", "is true while skipAwait is set: the next `pulumi up` would replace a Job that is still running and kill its run; leave replaceUnready unset (it is off with skipAwait)")
	}
	return jobSettings{
		Namespace:          j.Namespace,
		ServiceAccountName: j.ServiceAccountName,
		Deadline:           deadline,
		Timeout:            timeout,
		TTLAfterFinished:   ttl,
		BackoffLimit:       int32(*j.BackoffLimit),
		Resources:          jobspec.Resources{CPULimit: cpu, MemoryLimit: mem},
		Identity:           id,
		Placement: jobspec.Placement{
			NodeName:        j.NodeName,
			NodeSelector:    j.NodeSelector,
			GamePod:         j.GamePodSelector,
			GamePodAffinity: jobspec.AffinityMode(j.GamePodAffinity),
		},
		Scheduling:  scheduling,
		Labels:      j.Labels,
		Annotations: j.Annotations,
		Await:       jobspec.Await{Skip: j.SkipAwait, ReplaceUnready: *j.ReplaceUnready},
		Preflight: preflightSettings{
			Enabled: *j.Preflight,
			Cluster: j.Target.withOverrides(j.Kubeconfig, j.KubeContext),
			Pending: j.Target.Unknown && j.Kubeconfig == "",
		},
	}
}

// gamePod checks the game pod affinity: its mode, its selector (label keys
// and values), and that a required affinity is not combined with nodeName,
// which bypasses the scheduler that would enforce it.
func (p *problems) gamePod(selector map[string]string, mode, nodeName string) {
	switch jobspec.AffinityMode(mode) {
	case jobspec.AffinityPreferred, jobspec.AffinityNone:
	case jobspec.AffinityRequired:
		if len(selector) == 0 {
			p.addf("gamePodSelector", "is empty while gamePodAffinity is required: give the game pod's labels, e.g. {%s: survival-0}", jobspec.GamePodLabel)
		}
		if nodeName != "" {
			p.addf("gamePodAffinity", "is required while nodeName is set: nodeName bypasses the scheduler, which enforces pod affinity; set only one")
		}
	default:
		p.addf("gamePodAffinity", "%q is not supported: use preferred (next to the game pod when it runs), required (only next to it) or none", mode)
	}
	for _, k := range slices.Sorted(maps.Keys(selector)) {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			p.addf("gamePodSelector", "key %q is invalid: %s", k, strings.Join(errs, "; "))
			continue
		}
		if errs := validation.IsValidLabelValue(selector[k]); len(errs) > 0 {
			p.addf("gamePodSelector", "value %q of key %q is invalid: %s", selector[k], k, strings.Join(errs, "; "))
		}
	}
}

func (p *problems) required(input, value, fix string) bool {
	if value == "" {
		p.addf(input, "is required: %s", fix)
		return false
	}
	return true
}

// server checks the server input; kind is the Job kind in the message
// (jobapi.KindBackup, jobapi.KindRestore).
func (p *problems) server(input, server, kind string) {
	if !p.required(input, server, "set it to the game server's name (its StatefulSet name), e.g. survival") {
		return
	}
	if jobapi.CheckJobServer(server) != nil {
		p.addf(input, "%q is invalid: use at most %d lowercase letters, digits and '-', starting and ending with a letter or digit, so the Job name <server>-%s-<suffix> fits in 63 characters",
			server, jobapi.MaxJobServerLen, kind)
	}
}

// runID checks the run ID of a Job of kind for server: required, valid,
// and not one whose Job name has the form of a scheduled run's Job
// (jobspec.IsScheduledJobName), which a schedule's CronJob could give
// one of its Jobs.
func (p *problems) runID(input, server, kind, runID string) {
	if !p.required(input, runID, "set it to a unique ID of this run, e.g. 2025-06-01T0300Z; a new runId starts a new run, the same runId none") {
		return
	}
	if jobapi.CheckRunID(runID) != nil {
		if strings.EqualFold(runID, jobapi.RunLatest) {
			p.addf(input, "%q is a spelling of %q, which a restore's or verify's fromRun reads as the server's newest run: use another runId",
				runID, jobapi.RunLatest)
			return
		}
		p.addf(input, "%q is invalid: use 1 to %d characters from A-Z a-z 0-9 . _ -, starting with a letter or digit (it becomes a file name)",
			runID, jobapi.MaxRunIDLen)
		return
	}
	if name := naming.JobName(server, kind, runID); jobapi.CheckJobServer(server) == nil && jobspec.IsScheduledJobName(name) {
		p.addf(input, "%q names the Job %s, which has the form of a scheduled run's Job (<server>-sched-<minutes>, <server>-vsched-<minutes>) "+
			"that a schedule's CronJob could create too: use another runId, one that does not end in sched-<digits>", runID, name)
	}
}

func (p *problems) image(input, image string) {
	if !p.required(input, image, "set it to the archiver image, e.g. ghcr.io/worldbackup/worldbackup-archiver:v0.1.0 (see `make image`)") {
		return
	}
	if strings.IndexFunc(image, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		p.addf(input, "%q is invalid: an image reference has no spaces or control characters", image)
		return
	}
	// The kubelet's own parser: what it would refuse (InvalidImageName,
	// a pod that never starts) is refused here.
	if _, err := reference.ParseNormalizedNamed(image); err != nil {
		p.addf(input, "%q is not an image reference the kubelet can pull: %s; e.g. ghcr.io/worldbackup/worldbackup-archiver:v0.1.0 "+
			"(a lower-case repository, an optional :tag and @sha256:digest)", image, err)
	}
}

// dnsLabel checks an optional name that must be a DNS-1123 label.
func (p *problems) dnsLabel(input, value string) {
	if value == "" {
		return
	}
	if errs := validation.IsDNS1123Label(value); len(errs) > 0 {
		p.addf(input, "%q is invalid: %s", value, strings.Join(errs, "; "))
	}
}

// namespace checks an optional namespace by the rule the archiver applies
// to the --namespace the Job passes it (jobapi.CheckNamespace).
func (p *problems) namespace(input, value string) {
	if jobapi.CheckNamespace(value) != nil {
		p.addf(input, "%q is invalid: a namespace's name is at most %d lowercase letters, digits and '-', starting and ending with a letter or digit",
			value, jobapi.MaxLabelLen)
	}
}

// dnsSubdomain checks an optional name that must be a DNS-1123 subdomain
// (the names of claims, Secrets, service accounts and nodes).
func (p *problems) dnsSubdomain(input, value string) {
	if value == "" {
		return
	}
	if errs := validation.IsDNS1123Subdomain(value); len(errs) > 0 {
		p.addf(input, "%q is invalid: %s", value, strings.Join(errs, "; "))
	}
}

// secretKey checks a key of a Secret that a Job mounts: what a Secret's
// data may hold (validation.IsConfigMapKey, the API server's rule: letters,
// digits, '-', '_' and '.', at most 253, not "." or "..", not starting
// with ".."). example is a valid key for the message.
func (p *problems) secretKey(input, key, example string) {
	if errs := validation.IsConfigMapKey(key); len(errs) > 0 {
		p.addf(input, "%q is not a valid Secret key (%s): use letters, digits, '-', '_' and '.', e.g. %s", key, strings.Join(errs, "; "), example)
	}
}

func (p *problems) text(input, value string, maxLen int) {
	if len(value) > maxLen {
		p.addf(input, "is %d bytes long: use at most %d", len(value), maxLen)
	}
	if strings.IndexFunc(value, unicode.IsControl) >= 0 {
		p.addf(input, "%q is invalid: remove control characters (newlines, tabs, NUL)", value)
	}
}

// mount is a mount-path input: its schema name and value.
type mount struct{ input, path string }

// fixed reports whether m is a path of the Job's own ("the scratch
// volume"), not an input.
func (m mount) fixed() bool { return strings.HasPrefix(m.input, "the ") }

// mountPaths checks that each path is absolute, clean and not "/", that
// none is, or is above or below, a path the container needs (the image's
// binary, CA bundle and user files, the runtime's /dev, /proc, /sys and
// kubelet files), and that no two of them (nor the scratch folder /tmp)
// are equal or nested.
func (p *problems) mountPaths(mounts ...mount) {
	var good []mount
	for _, m := range mounts {
		v := m.path
		switch {
		case !strings.HasPrefix(v, "/"):
			p.addf(m.input, "%q is invalid: use an absolute path, e.g. /world", v)
		case v == "/":
			p.addf(m.input, "is \"/\": use a folder of its own, e.g. /world")
		case path.Clean(v) != v:
			p.addf(m.input, "%q is invalid: use the clean form %q", v, path.Clean(v))
		case strings.Contains(v, ":") || strings.IndexFunc(v, unicode.IsControl) >= 0:
			p.addf(m.input, "%q is invalid: a mount path has no ':' or control characters", v)
		default:
			if r, ok := overNeeded(v); ok {
				p.addf(m.input, "%q would hide %s, which the archiver's container needs: mount it at a folder of its own, e.g. /world", v, r)
				continue
			}
			good = append(good, m)
		}
	}
	good = append(good, mount{"the scratch folder", jobspec.TmpPath})
	for i, a := range good {
		for _, b := range good[i+1:] {
			if overlaps(a.path, b.path) {
				in, other := a, b
				if a.fixed() && !b.fixed() { // name the input the user can change
					in, other = b, a
				}
				p.addf(in.input, "%q overlaps %s (%q): mount each volume at a folder of its own", in.path, other.input, other.path)
			}
		}
	}
}

// overlaps reports whether the clean absolute paths a and b are equal or
// one is below the other.
func overlaps(a, b string) bool {
	return a == b || strings.HasPrefix(a, b+"/") || strings.HasPrefix(b, a+"/")
}

// overNeeded returns the path the container needs (jobspec.ImagePaths,
// jobspec.RuntimePaths) that a volume mounted at v would hide or break:
// v is it, above it or below it.
func overNeeded(v string) (string, bool) {
	for _, r := range append(jobspec.ImagePaths(), jobspec.RuntimePaths()...) {
		if overlaps(v, r) {
			return r, true
		}
	}
	return "", false
}

// duration parses value as a duration (a number with a unit: 90s, 30m,
// 1h30m) in [minimum, maximum].
func (p *problems) duration(input, value string, minimum, maximum time.Duration) (time.Duration, bool) {
	d, err := time.ParseDuration(value)
	switch {
	case err != nil && isNumber(value):
		p.addf(input, "%q has no unit: give a duration like %sm (minutes) or %ss (seconds)", value, value, value)
		return 0, false
	case err != nil:
		p.addf(input, "%q is not a duration: give a number with a unit (s, m, h), e.g. 30m, 1h30m or 90s", value)
		return 0, false
	case d < minimum:
		p.addf(input, "%q is too short: use at least %s", value, minimum)
		return 0, false
	case d > maximum:
		p.addf(input, "%q is too long: use at most %s", value, maximum)
		return 0, false
	}
	return d, true
}

// isNumber reports whether s is a plain decimal number, e.g. 30 or 1.5.
func isNumber(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil && strings.Trim(s, "0123456789.") == ""
}

// quantity parses a positive Kubernetes resource quantity.
func (p *problems) quantity(input, value, example string) (resource.Quantity, bool) {
	q, err := resource.ParseQuantity(value)
	if err != nil {
		p.addf(input, "%q is not a Kubernetes quantity: use e.g. %s", value, example)
		return resource.Quantity{}, false
	}
	if q.Sign() <= 0 {
		p.addf(input, "%q must be greater than zero: use e.g. %s", value, example)
		return resource.Quantity{}, false
	}
	return q, true
}

// quantityAtLeast parses a Kubernetes resource quantity of at least
// minimum (a memory or storage size when minimum is in bytes, else CPUs);
// one below it is refused with the likely typo: a lower-case m is
// thousandths, a plain number bytes.
func (p *problems) quantityAtLeast(input, value, example string, minimum resource.Quantity) (resource.Quantity, bool) {
	q, ok := p.quantity(input, value, example)
	if !ok || q.Cmp(minimum) >= 0 {
		return q, ok
	}
	bytes := minimum.Format == resource.BinarySI
	var hint string
	switch {
	case strings.HasSuffix(value, "m") && bytes:
		hint = "m means thousandths, so " + value + " is a fraction of a byte: write Mi or Gi"
	case strings.HasSuffix(value, "m"):
		hint = "m means thousandths of a CPU: write 1 for one CPU"
	case bytes && isNumber(value):
		hint = "a plain number counts bytes: write Mi or Gi"
	case bytes:
		hint = "write Mi or Gi"
	default:
		hint = "write CPUs or thousandths of one"
	}
	p.addf(input, "%q is below the minimum %s, which no run can work with: %s, e.g. %s", value, minimum.String(), hint, example)
	return q, false
}

// id checks an optional UID/GID.
func (p *problems) id(input string, v *int) {
	if v != nil && (*v < 0 || *v > maxID) {
		p.addf(input, "%d is out of range: use 0 to %d", *v, maxID)
	}
}

// labels checks label keys and values; reserved keys are refused.
func (p *problems) labels(input string, m map[string]string, reserved []string) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			p.addf(input, "key %q is invalid: %s", k, strings.Join(errs, "; "))
			continue
		}
		if slices.Contains(reserved, k) {
			p.addf(input, "key %q is set by the component: remove it", k)
			continue
		}
		if errs := validation.IsValidLabelValue(m[k]); len(errs) > 0 {
			p.addf(input, "value %q of key %q is invalid: %s", m[k], k, strings.Join(errs, "; "))
		}
	}
}

// annotations checks annotation keys; reserved keys are refused.
func (p *problems) annotations(input string, m map[string]string, reserved []string) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if errs := validation.IsQualifiedName(strings.ToLower(k)); len(errs) > 0 {
			p.addf(input, "key %q is invalid: %s", k, strings.Join(errs, "; "))
			continue
		}
		if slices.Contains(reserved, k) {
			p.addf(input, "key %q is set by the component: remove it", k)
		}
	}
}

// placement checks nodeName and nodeSelector, of which at most one is set.
func (p *problems) placement(nodeName string, selector map[string]string) {
	p.dnsSubdomain("nodeName", nodeName)
	if nodeName != "" && len(selector) > 0 {
		p.addf("nodeName", "and nodeSelector are both set: set only one (nodeName pins the pod to a node and bypasses the scheduler)")
	}
	for _, k := range slices.Sorted(maps.Keys(selector)) {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			p.addf("nodeSelector", "key %q is invalid: %s", k, strings.Join(errs, "; "))
			continue
		}
		if errs := validation.IsValidLabelValue(selector[k]); len(errs) > 0 {
			p.addf("nodeSelector", "value %q of key %q is invalid: %s", selector[k], k, strings.Join(errs, "; "))
		}
	}
}

// identity resolves the security mode and identity inputs. Restricted mode
// defaults runAsUser/runAsGroup to the game's UID/GID and fsGroup to
// runAsGroup; baseline mode defaults them to 0 (root) and omits fsGroup.
// r says which capabilities baseline mode keeps and whether a non-root
// identity (restricted mode, or baseline mode with runAsUser set) needs a
// non-zero fsGroup.
func (p *problems) identity(mode string, runAsUser, runAsGroup, fsGroup *int, r jobRules) jobspec.Identity {
	p.id("runAsUser", runAsUser)
	p.id("runAsGroup", runAsGroup)
	p.id("fsGroup", fsGroup)
	id := jobspec.Identity{Mode: jobspec.SecurityMode(mode)}
	switch id.Mode {
	case jobspec.Baseline:
		id.RunAsUser = int64(deref(runAsUser, 0))
		id.RunAsGroup = int64(deref(runAsGroup, 0))
		id.FSGroup = int64(deref(fsGroup, 0))
		// Baseline's capabilities work only for root: a non-root archiver
		// reads a mounted Secret (root's, 0400) only through fsGroup, which
		// baseline mode omits unless it is set.
		if id.RunAsUser > 0 && id.FSGroup <= 0 && r.fsGroupNeed != "" {
			p.addf("runAsUser", "is %d (not root), but securityMode baseline sets no fsGroup, which a non-root archiver needs %s (baseline's %s work only for root): "+
				"set fsGroup to the archiver's GID, e.g. %d, or set securityMode restricted (fsGroup then defaults to runAsGroup), or leave runAsUser unset to run as root",
				id.RunAsUser, r.fsGroupNeed, r.baselineCaps, DefaultGameGID)
		}
	case jobspec.Restricted:
		id.RunAsUser = int64(deref(runAsUser, DefaultGameUID))
		id.RunAsGroup = int64(deref(runAsGroup, DefaultGameGID))
		id.FSGroup = int64(deref(fsGroup, int(id.RunAsGroup)))
		if id.RunAsUser == 0 {
			p.addf("runAsUser", "is 0 (root), which securityMode restricted forbids: set it to the game's UID, e.g. %d, or leave it unset", DefaultGameUID)
		}
		switch {
		case r.fsGroupNeed == "" || id.FSGroup != 0:
		case fsGroup == nil:
			p.addf("runAsGroup", "is 0, so fsGroup defaults to 0, but securityMode restricted needs a non-zero fsGroup %s: set runAsGroup or fsGroup to the game's GID, e.g. %d", r.fsGroupNeed, DefaultGameGID)
		default:
			p.addf("fsGroup", "is 0, but securityMode restricted needs a non-zero fsGroup %s: leave fsGroup unset (it defaults to runAsGroup) or set it to the game's GID, e.g. %d", r.fsGroupNeed, DefaultGameGID)
		}
	default:
		p.addf("securityMode", "%q is not supported: use baseline (root with %s only) or restricted (the game's non-root UID, for namespaces that enforce the restricted Pod Security Standard)", mode, r.baselineCaps)
	}
	if id.FSGroup < 0 {
		id.FSGroup = 0
	}
	return id
}

func deref(v *int, def int) int {
	if v == nil {
		return def
	}
	return *v
}
