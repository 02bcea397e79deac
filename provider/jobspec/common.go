// Package jobspec builds the Kubernetes Jobs of the worldbackup components as
// pure functions from resolved, validated, plain arguments to *batchv1.Job.
// It knows nothing of Pulumi: the components validate their inputs, call a
// builder and register the result. Every Job kind embeds Job (the resolved
// arguments every Job shares) in its own arguments and builds its Job with
// BuildJob, passing what it adds (a Pod: arguments, capabilities, volumes);
// backup.go, restore.go, prune.go and verify.go hold those parts of their
// Jobs.
// This file holds the parts every Job shares: labels, annotations, identity
// (the two security modes), resources, placement and volumes.
package jobspec

import (
	"maps"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/worldbackup/worldbackup/jobapi"
	"github.com/worldbackup/worldbackup/provider/naming"
)

// ConfigFileName is the archiver's config file inside the config Secret.
const ConfigFileName = jobapi.ConfigFileName

// Volume names every Job kind shares for the same volume.
const (
	WorldVolumeName  = "world"
	BackupVolumeName = "backups"
	ConfigVolumeName = "config"
)

// Names shared by every Job.
const (
	// ArchiverPath is the archiver binary in the image (also its entrypoint).
	ArchiverPath = "/usr/local/bin/archiver"
	// ContainerName is the name of the one container of every Job.
	ContainerName = "archiver"

	// AnnotationRunID carries the run ID on the Job and its pod template.
	AnnotationRunID = "worldbackup.dev/run-id"
	// AnnotationSkipAwait tells pulumi-kubernetes not to wait for the Job.
	AnnotationSkipAwait = "pulumi.com/skipAwait"
	// AnnotationReplaceUnready tells pulumi-kubernetes to replace the Job
	// when its live object is not Complete at the next `pulumi up` (its
	// Diff reads the live Job and checks it with cloud-ready-checks'
	// JobChecker), so a failed run can be retried with the same run ID.
	AnnotationReplaceUnready = "pulumi.com/replaceUnready"
	// LabelServer carries the server name on the Job and its pods.
	LabelServer = "worldbackup.dev/server"

	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelComponent = "app.kubernetes.io/component"
	LabelManagedBy = "app.kubernetes.io/managed-by"

	// AppName is the value of app.kubernetes.io/name.
	AppName = "worldbackup"
	// ManagedBy is the value of app.kubernetes.io/managed-by.
	ManagedBy = "pulumi"

	// TmpPath is the writable scratch folder (the root filesystem is read-only).
	TmpPath = "/tmp"
	// TmpVolumeName is the emptyDir volume mounted at TmpPath.
	TmpVolumeName = "tmp"
)

// ImagePaths are the files of the archiver image that its container reads:
// the binary, the CA bundle (TLS to S3 and the database) and the user and
// group files. A volume mounted at one of them, or at a folder above one
// (/usr/local/bin, /etc), hides it.
func ImagePaths() []string {
	return []string{ArchiverPath, "/etc/ssl/certs/ca-certificates.crt", "/etc/passwd", "/etc/group"}
}

// RuntimePaths are what the container runtime and the kubelet put in every
// container: /dev (the termination log among it), /proc, /sys and the
// files the kubelet mounts in /etc. A volume mounted at, above or below one
// of them breaks the pod.
func RuntimePaths() []string {
	return []string{"/dev", "/proc", "/sys", "/etc/hosts", "/etc/hostname", "/etc/resolv.conf"}
}

// TmpSizeLimit caps the scratch emptyDir at /tmp.
var TmpSizeLimit = resource.MustParse("64Mi")

// Requests of every Job's container: modest, so that a pod pinned to the node
// of a ReadWriteOnce world volume still schedules next to the game server;
// each is capped at its limit. The limits are inputs.
var (
	DefaultCPURequest    = resource.MustParse("100m")
	DefaultMemoryRequest = resource.MustParse("256Mi")
)

// SecurityMode selects the identity of a Job's pod.
type SecurityMode string

const (
	// Baseline runs as root (runAsUser/runAsGroup 0 unless set) with every
	// capability dropped except the few its Job needs: DAC_OVERRIDE for the
	// backup, so it reads files that the game wrote 0600 under its own UID;
	// CHOWN, DAC_OVERRIDE and FOWNER for the restore, so it writes the world
	// back with its owners. It satisfies the baseline Pod Security Standard,
	// not restricted.
	Baseline SecurityMode = "baseline"
	// Restricted runs as a non-root UID/GID (the game's) with every capability
	// dropped. It satisfies the restricted Pod Security Standard.
	Restricted SecurityMode = "restricted"
)

// Identity is the pod's security identity.
type Identity struct {
	Mode       SecurityMode
	RunAsUser  int64
	RunAsGroup int64
	// FSGroup is the pod's fsGroup; 0 omits it. Kubelet then gives the
	// writable volumes (and the config Secret's files) this group.
	FSGroup int64
}

// Resources are the container's CPU and memory limits.
type Resources struct {
	CPULimit    resource.Quantity
	MemoryLimit resource.Quantity
}

// Placement pins the pod to a node: NodeName bypasses the scheduler;
// NodeSelector becomes a required node affinity (every pair must match).
// At most one of them is set. GamePod and GamePodAffinity place the pod
// next to the game server's pod, so a ReadWriteOnce world volume that is
// attached to that node can be mounted.
type Placement struct {
	NodeName     string
	NodeSelector map[string]string
	// GamePod is the label selector of the game server's pod, e.g.
	// statefulset.kubernetes.io/pod-name=survival-0; empty or with
	// GamePodAffinity AffinityNone, no pod affinity.
	GamePod         map[string]string
	GamePodAffinity AffinityMode
}

// Scheduling is what a real cluster may ask of a pod beyond its placement:
// tolerations of tainted nodes, a priority class, and the Secrets the
// kubelet pulls a private image with. Every Job kind's pod and the
// CronJob's template get them (BuildJob).
type Scheduling struct {
	Tolerations       []corev1.Toleration
	PriorityClassName string
	ImagePullSecrets  []string
}

// pullSecrets returns the image pull Secrets of s as references.
func (s Scheduling) pullSecrets() []corev1.LocalObjectReference {
	var out []corev1.LocalObjectReference
	for _, n := range s.ImagePullSecrets {
		out = append(out, corev1.LocalObjectReference{Name: n})
	}
	return out
}

// AffinityMode says how the Job's pod is drawn to the game server's pod.
type AffinityMode string

const (
	// AffinityPreferred asks the scheduler to put the pod on the game pod's
	// node when it runs; a stopped server does not block the Job.
	AffinityPreferred AffinityMode = "preferred"
	// AffinityRequired schedules the pod only on the node the game pod runs
	// on: while the server is stopped the pod is unschedulable (the pod
	// watchdog of `pulumi up` fails the Job after its grace; an unwatched
	// Job waits until its deadline).
	AffinityRequired AffinityMode = "required"
	// AffinityNone sets no pod affinity.
	AffinityNone AffinityMode = "none"
)

// HostnameTopologyKey is the topology key of the game pod affinity: the
// same node.
const HostnameTopologyKey = "kubernetes.io/hostname"

// GamePodLabel is the label the StatefulSet controller gives each of its
// pods (its name, e.g. survival-0): the default game pod selector.
const GamePodLabel = "statefulset.kubernetes.io/pod-name"

// Labels returns the labels of a Job and its pod template: extra, then the
// standard app.kubernetes.io labels and worldbackup.dev/server (which win).
// The server's label value goes through naming.LabelValue, so even a name
// that is no valid label value gives a valid (hashed) one.
func Labels(server, component string, extra map[string]string) map[string]string {
	l := make(map[string]string, len(extra)+5)
	maps.Copy(l, extra)
	l[LabelName] = AppName
	l[LabelInstance] = naming.LabelValue(server)
	l[LabelComponent] = component
	l[LabelManagedBy] = ManagedBy
	l[LabelServer] = naming.LabelValue(server)
	return l
}

// ReservedLabels are the label keys the builders set; inputs may not set them.
var ReservedLabels = []string{LabelName, LabelInstance, LabelComponent, LabelManagedBy, LabelServer}

// ReservedAnnotations are the annotation keys the builders set (the Await
// ones from their own inputs); inputs may not set them.
var ReservedAnnotations = []string{AnnotationRunID, AnnotationSkipAwait, AnnotationReplaceUnready}

// AwaitAnnotations are annotations by which the Kubernetes provider would
// await or delete a Job otherwise than the component decides:
// pulumi.com/waitFor (the Job ready before it finished, as skipAwait, while
// replaceUnready would replace it running) and
// pulumi.com/deletionPropagationPolicy (orphan: a replaced Job's pod runs
// on beside its replacement). Inputs may not set them.
var AwaitAnnotations = []string{"pulumi.com/waitFor", "pulumi.com/deletionPropagationPolicy"}

// Annotations returns extra plus the run ID annotation (which wins).
func Annotations(runID string, extra map[string]string) map[string]string {
	a := make(map[string]string, len(extra)+1)
	maps.Copy(a, extra)
	a[AnnotationRunID] = runID
	return a
}

// Await is how `pulumi up` treats the Job: the Job-level annotations of
// pulumi-kubernetes.
type Await struct {
	// Skip: pulumi.com/skipAwait "true", the provider does not wait for the
	// Job to finish.
	Skip bool
	// ReplaceUnready: pulumi.com/replaceUnready "true", the next `pulumi up`
	// replaces a Job that has not completed (a failed run is retried with the
	// same run ID).
	ReplaceUnready bool
}

// JobAnnotations returns the annotations of a Job (not of its pod
// template): Annotations(runID, extra), plus pulumi.com/skipAwait and
// pulumi.com/replaceUnready "true" as aw asks.
func JobAnnotations(runID string, extra map[string]string, aw Await) map[string]string {
	a := Annotations(runID, extra)
	if aw.Skip {
		a[AnnotationSkipAwait] = "true"
	}
	if aw.ReplaceUnready {
		a[AnnotationReplaceUnready] = "true"
	}
	return a
}

// Job holds the resolved arguments every Job kind shares: Backup and
// Restore embed it, and so does a next kind, so each is declared once. Paths
// are absolute and clean, names valid, durations positive (TTL zero: none).
type Job struct {
	Server string
	RunID  string // the run's own ID: names the Job

	Namespace          string
	Image              string
	ServiceAccountName string

	WorldClaimName  string
	BackupClaimName string

	WorldRoot  string // world claim mount
	BackupRoot string // backup claim mount; the archive root

	Deadline         time.Duration // activeDeadlineSeconds
	TTLAfterFinished time.Duration // ttlSecondsAfterFinished; 0 = keep the finished Job
	BackoffLimit     int32

	Resources  Resources
	Identity   Identity
	Placement  Placement
	Scheduling Scheduling

	Labels      map[string]string // extra labels, Job and pod
	Annotations map[string]string // extra annotations, Job and pod
	Await       Await             // pulumi.com/skipAwait, pulumi.com/replaceUnready on the Job

	// Notify is the webhook the run posts its outcome to; nil: none.
	Notify *Notify
}

// NotifyVolumeName is the volume of the webhook URL Secret.
const NotifyVolumeName = "notify"

// Notify is a Job's webhook: the Secret key SecretName/Key holds its URL,
// mounted read-only (0400) at jobapi.NotifyMountPath/jobapi.NotifyURLFile;
// Always notifies after every run, not only a failed one.
type Notify struct {
	SecretName string
	Key        string
	Always     bool
}

// Request returns the archiver's notification request of n: the URL
// file's path, never the URL.
func (n *Notify) Request() jobapi.Notify {
	if n == nil {
		return jobapi.Notify{}
	}
	on := jobapi.NotifyFailure
	if n.Always {
		on = jobapi.NotifyAlways
	}
	return jobapi.Notify{URLFile: jobapi.NotifyMountPath + "/" + jobapi.NotifyURLFile, On: on}
}

// Volume returns the webhook Secret's volume, only its key, as
// jobapi.NotifyURLFile with mode 0400, and its read-only mount. The volume
// is optional: a missing Secret or key leaves the file out and the pod
// starts, the archiver logging that the notification was not sent, since a
// notification never fails or delays a run.
func (n *Notify) Volume() (corev1.Volume, corev1.VolumeMount) {
	v := SecretVolume(NotifyVolumeName, n.SecretName)
	v.Secret.Items = []corev1.KeyToPath{{Key: n.Key, Path: jobapi.NotifyURLFile}}
	v.Secret.Optional = new(true)
	return v, corev1.VolumeMount{Name: NotifyVolumeName, MountPath: jobapi.NotifyMountPath, ReadOnly: true}
}

// Pod is what one Job kind adds to the shared Job: its component (the
// app.kubernetes.io/component label and the kind in the Job's name, e.g.
// backup), the archiver's arguments, the capabilities baseline mode keeps,
// and its mounts and volumes, the scratch /tmp of TmpVolume included.
type Pod struct {
	Component    string
	Args         []string
	Capabilities []corev1.Capability
	Mounts       []corev1.VolumeMount
	Volumes      []corev1.Volume
	// Init are the init containers that run the archiver before the main
	// container, in order, with the pod's identity and no capability.
	Init []InitContainer
}

// InitContainer is an init container of a Job's pod: the same image and
// binary as the main container, its own arguments and mounts.
type InitContainer struct {
	Name   string
	Args   []string
	Mounts []corev1.VolumeMount
}

// BuildJob returns the Job of j running the archiver as p says: one pod,
// never restarted in place (a replacement starts only once the previous pod
// has terminated), no service-account token, no service links, the identity
// of j.Identity, a read-only root filesystem. Every Job kind's builder
// calls it.
func BuildJob(j Job, p Pod) *batchv1.Job {
	if j.Notify != nil {
		v, m := j.Notify.Volume()
		p.Mounts = append(append([]corev1.VolumeMount(nil), p.Mounts...), m)
		p.Volumes = append(append([]corev1.Volume(nil), p.Volumes...), v)
	}
	return &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        naming.JobName(j.Server, p.Component, j.RunID),
			Namespace:   j.Namespace,
			Labels:      Labels(j.Server, p.Component, j.Labels),
			Annotations: JobAnnotations(j.RunID, j.Annotations, j.Await),
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:            new(j.BackoffLimit),
			ActiveDeadlineSeconds:   new(Seconds(j.Deadline)),
			TTLSecondsAfterFinished: TTLSeconds(j.TTLAfterFinished),
			// A replacement pod starts only once the previous one has
			// terminated, so two pods never write the same archive or world.
			PodReplacementPolicy: new(batchv1.Failed),
			PodFailurePolicy:     PodFailurePolicy(),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      Labels(j.Server, p.Component, j.Labels),
					Annotations: Annotations(j.RunID, j.Annotations),
				},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					ServiceAccountName:           j.ServiceAccountName,
					AutomountServiceAccountToken: new(false),
					EnableServiceLinks:           new(false),
					NodeName:                     j.Placement.NodeName,
					Affinity:                     Affinity(j.Placement),
					Tolerations:                  j.Scheduling.Tolerations,
					PriorityClassName:            j.Scheduling.PriorityClassName,
					ImagePullSecrets:             j.Scheduling.pullSecrets(),
					SecurityContext:              PodSecurityContext(j.Identity),
					Containers: []corev1.Container{{
						Name:                     ContainerName,
						Image:                    j.Image,
						Command:                  []string{ArchiverPath},
						Args:                     p.Args,
						Resources:                ContainerResources(j.Resources),
						SecurityContext:          ContainerSecurityContext(j.Identity, p.Capabilities),
						TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
						VolumeMounts:             p.Mounts,
					}},
					InitContainers: initContainers(j, p.Init),
					Volumes:        p.Volumes,
				},
			},
		},
	}
}

// initContainers returns the init containers of inits: the archiver of
// j.Image with its resources, every capability dropped (in both modes) and
// a read-only root filesystem; nil when there is none.
func initContainers(j Job, inits []InitContainer) []corev1.Container {
	var cs []corev1.Container
	for _, in := range inits {
		cs = append(cs, corev1.Container{
			Name:                     in.Name,
			Image:                    j.Image,
			Command:                  []string{ArchiverPath},
			Args:                     in.Args,
			Resources:                ContainerResources(j.Resources),
			SecurityContext:          ContainerSecurityContext(j.Identity, nil),
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			VolumeMounts:             in.Mounts,
		})
	}
	return cs
}

// TTLSeconds returns ttlSecondsAfterFinished for d, or nil (keep the finished
// Job) when d is 0.
func TTLSeconds(d time.Duration) *int32 {
	if d <= 0 {
		return nil
	}
	return new(int32(Seconds(d)))
}

// PodSecurityContext returns the pod-level security context of id: the user,
// group and fsGroup, runAsNonRoot in restricted mode, seccomp RuntimeDefault.
func PodSecurityContext(id Identity) *corev1.PodSecurityContext {
	sc := &corev1.PodSecurityContext{
		RunAsUser:      new(id.RunAsUser),
		RunAsGroup:     new(id.RunAsGroup),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	if id.Mode == Restricted {
		sc.RunAsNonRoot = new(true)
	}
	if id.FSGroup != 0 {
		sc.FSGroup = new(id.FSGroup)
		// Change ownership only when the volume's root does not match yet,
		// not on every mount of a large backup volume.
		sc.FSGroupChangePolicy = new(corev1.FSGroupChangeOnRootMismatch)
	}
	return sc
}

// ContainerSecurityContext returns the container-level security context of
// id: every capability dropped (plus baselineAdd, in baseline mode only), no
// privilege escalation, not privileged, a read-only root filesystem, seccomp
// RuntimeDefault, and runAsNonRoot in restricted mode. Each Job passes the
// few capabilities its root process needs (BackupCapabilities,
// RestoreCapabilities); all of them must be in the baseline Pod Security
// Standard's allowed list.
func ContainerSecurityContext(id Identity, baselineAdd []corev1.Capability) *corev1.SecurityContext {
	sc := &corev1.SecurityContext{
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		Privileged:               new(false),
		AllowPrivilegeEscalation: new(false),
		ReadOnlyRootFilesystem:   new(true),
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	switch id.Mode {
	case Restricted:
		sc.RunAsNonRoot = new(true)
	default:
		sc.Capabilities.Add = slices.Clone(baselineAdd)
	}
	return sc
}

// ContainerResources returns limits as given and requests of
// DefaultCPURequest and DefaultMemoryRequest, each capped at its limit.
func ContainerResources(r Resources) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Limits: corev1.ResourceList{
			corev1.ResourceCPU:    r.CPULimit,
			corev1.ResourceMemory: r.MemoryLimit,
		},
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    minQuantity(DefaultCPURequest, r.CPULimit),
			corev1.ResourceMemory: minQuantity(DefaultMemoryRequest, r.MemoryLimit),
		},
	}
}

func minQuantity(a, b resource.Quantity) resource.Quantity {
	if b.Cmp(a) < 0 {
		return b.DeepCopy()
	}
	return a.DeepCopy()
}

// Affinity returns the pod's affinity for p: a required node affinity
// matching every pair of p.NodeSelector (keys sorted, so the output is
// stable), and a pod affinity to the game pod (p.GamePod) on the same node,
// preferred or required; nil when there is neither.
func Affinity(p Placement) *corev1.Affinity {
	var a corev1.Affinity
	if len(p.NodeSelector) > 0 {
		exprs := make([]corev1.NodeSelectorRequirement, 0, len(p.NodeSelector))
		for _, k := range slices.Sorted(maps.Keys(p.NodeSelector)) {
			exprs = append(exprs, corev1.NodeSelectorRequirement{
				Key:      k,
				Operator: corev1.NodeSelectorOpIn,
				Values:   []string{p.NodeSelector[k]},
			})
		}
		a.NodeAffinity = &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: exprs}},
			},
		}
	}
	if len(p.GamePod) > 0 {
		term := corev1.PodAffinityTerm{
			LabelSelector: &metav1.LabelSelector{MatchLabels: maps.Clone(p.GamePod)},
			TopologyKey:   HostnameTopologyKey,
		}
		switch p.GamePodAffinity {
		case AffinityRequired:
			a.PodAffinity = &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}
		case AffinityPreferred:
			a.PodAffinity = &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{
				{Weight: 100, PodAffinityTerm: term},
			}}
		}
	}
	if a.NodeAffinity == nil && a.PodAffinity == nil {
		return nil
	}
	return &a
}

// ClaimVolume returns a volume of the PersistentVolumeClaim claim. A
// read-only volume is read-only at the claim too, not only at its mount.
func ClaimVolume(name, claim string, readOnly bool) corev1.Volume {
	return corev1.Volume{
		Name: name,
		VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
			ClaimName: claim,
			ReadOnly:  readOnly,
		}},
	}
}

// SecretVolume returns a volume of the Secret secret whose files have mode
// 0400 (kubelet adds group read when the pod has an fsGroup).
func SecretVolume(name, secret string) corev1.Volume {
	return corev1.Volume{
		Name: name,
		VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  secret,
			DefaultMode: new(int32(0o400)),
		}},
	}
}

// PodFailurePolicy does not count pods that were evicted or preempted
// (condition DisruptionTarget) against backoffLimit, so a drained node does
// not fail the run. It has no FailJob rule: a Job failed by one ends with
// reason PodFailurePolicy, which pulumi-kubernetes' Job await does not
// recognise as a failure (it knows only BackoffLimitExceeded and
// DeadlineExceeded, cloud-ready-checks pkg/kubernetes/job), so `pulumi up`
// would wait for its timeout. With the default backoffLimit 0 a failed pod
// fails the Job at once with BackoffLimitExceeded, which it reports; a usage
// error (exit 2) or a refused archive (exit 3) then fails the run at once
// as the FailJob rule did.
func PodFailurePolicy() *batchv1.PodFailurePolicy {
	return &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
		{
			Action: batchv1.PodFailurePolicyActionIgnore,
			OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{
				{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue},
			},
		},
	}}
}

// TmpVolume returns the writable scratch emptyDir and its mount at TmpPath.
func TmpVolume() (corev1.Volume, corev1.VolumeMount) {
	return corev1.Volume{
			Name: TmpVolumeName,
			VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
				SizeLimit: new(TmpSizeLimit.DeepCopy()),
			}},
		}, corev1.VolumeMount{
			Name:      TmpVolumeName,
			MountPath: TmpPath,
		}
}

// Seconds returns d in whole seconds, rounded up.
func Seconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}
