// Package jobspec builds the Kubernetes Jobs of the worldbackup components as
// pure functions from resolved, validated, plain arguments to *batchv1.Job.
// It knows nothing of Pulumi: the components validate their inputs, call a
// builder and register the result. Each Job's whole shape sits in one file
// (backup.go for the backup Job, restore.go for the restore Job); this file
// holds the parts every Job shares: labels, annotations, identity (the two
// security modes), resources, placement and volumes.
package jobspec

import (
	batchv1 "k8s.io/api/batch/v1"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/worldbackup/worldbackup/provider/naming"
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
// At most one of them is set.
type Placement struct {
	NodeName     string
	NodeSelector map[string]string
}

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

// ReservedAnnotations are the annotation keys the builders set; inputs may
// not set them.
var ReservedAnnotations = []string{AnnotationRunID}

// Annotations returns extra plus the run ID annotation (which wins).
func Annotations(runID string, extra map[string]string) map[string]string {
	a := make(map[string]string, len(extra)+1)
	maps.Copy(a, extra)
	a[AnnotationRunID] = runID
	return a
}

// JobAnnotations returns the annotations of a Job (not of its pod
// template): Annotations(runID, extra), plus pulumi.com/skipAwait "true"
// when skipAwait.
func JobAnnotations(runID string, extra map[string]string, skipAwait bool) map[string]string {
	a := Annotations(runID, extra)
	if skipAwait {
		a[AnnotationSkipAwait] = "true"
	}
	return a
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

// NodeAffinity returns a required node affinity matching every pair of
// selector (keys sorted, so the output is stable), or nil when it is empty.
func NodeAffinity(selector map[string]string) *corev1.Affinity {
	if len(selector) == 0 {
		return nil
	}
	exprs := make([]corev1.NodeSelectorRequirement, 0, len(selector))
	for _, k := range slices.Sorted(maps.Keys(selector)) {
		exprs = append(exprs, corev1.NodeSelectorRequirement{
			Key:      k,
			Operator: corev1.NodeSelectorOpIn,
			Values:   []string{selector[k]},
		})
	}
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: exprs}},
		},
	}}
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

// UsageExitCode is the archiver's exit code for a usage or configuration
// error (a bad flag, server name, run ID or felis.toml).
const UsageExitCode = 2

// RefusedExitCode is the archiver's exit code for a refused archive (a
// checksum mismatch, a tampered or malicious archive).
const RefusedExitCode = 3

// PodFailurePolicy fails the Job at once when the archiver exits with
// UsageExitCode or RefusedExitCode, since a retry would fail the same way, and does not count
// pods that were evicted or preempted against backoffLimit.
func PodFailurePolicy() *batchv1.PodFailurePolicy {
	return &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
		{
			Action: batchv1.PodFailurePolicyActionFailJob,
			OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
				ContainerName: new(ContainerName),
				Operator:      batchv1.PodFailurePolicyOnExitCodesOpIn,
				Values:        []int32{UsageExitCode, RefusedExitCode},
			},
		},
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
