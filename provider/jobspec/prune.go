package jobspec

import (
	"path"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/worldbackup/worldbackup/provider/naming"
)

// ComponentPrune is the app.kubernetes.io/component label of prune Jobs.
const ComponentPrune = "prune"

// PruneCapabilities are the capabilities the prune Job's root process keeps
// in baseline mode: DAC_OVERRIDE only, to remove archives that a backup in
// restricted mode wrote under another UID.
var PruneCapabilities = []corev1.Capability{"DAC_OVERRIDE"}

// Prune holds the resolved, validated arguments of one prune Job: the
// archiver expires the server's archives by Retention. Paths are absolute
// and clean, names valid, durations positive (TTL zero: none).
type Prune struct {
	Server    string
	RunID     string // names the Job; a new one prunes again
	Retention Retention
	DryRun    bool // --dry-run: report, change nothing

	Namespace          string
	Image              string
	ServiceAccountName string

	BackupClaimName  string
	ConfigSecretName string

	BackupRoot      string // backup claim mount, read-write; the archive root
	ConfigMountPath string // config Secret mount, read-only

	Deadline         time.Duration // activeDeadlineSeconds
	TTLAfterFinished time.Duration // ttlSecondsAfterFinished; 0 = keep the finished Job
	BackoffLimit     int32

	Resources Resources
	Identity  Identity
	Placement Placement

	Labels      map[string]string // extra labels, Job and pod
	Annotations map[string]string // extra annotations, Job and pod
	Await       Await             // pulumi.com/skipAwait, pulumi.com/replaceUnready on the Job
}

// PruneJobName returns the prune Job's name for server and runID.
func PruneJobName(server, runID string) string {
	return naming.JobName(server, naming.KindPrune, runID)
}

// PruneArgs returns the archiver's command-line arguments for p (after the
// command ArchiverPath). The database URL is read from the mounted config
// file, never passed here. A prune is idempotent by itself: the run ID only
// names the Job.
func PruneArgs(p Prune) []string {
	args := []string{"prune", "--server", p.Server,
		"--config", path.Join(p.ConfigMountPath, ConfigFileName),
		"--archive-root", p.BackupRoot}
	args = append(args, p.Retention.Args()...)
	if p.DryRun {
		args = append(args, "--dry-run")
	}
	return append(args, "--log-format", "json")
}

// BuildPrune returns the prune Job of p: one pod, never restarted in place,
// running `archiver prune` with the backup claim read-write, the config
// Secret read-only (0400), a small writable /tmp, no world claim, no
// service-account token, and the identity of p.Identity.Mode.
func BuildPrune(p Prune) *batchv1.Job {
	tmpVolume, tmpMount := TmpVolume()
	return &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        PruneJobName(p.Server, p.RunID),
			Namespace:   p.Namespace,
			Labels:      Labels(p.Server, ComponentPrune, p.Labels),
			Annotations: JobAnnotations(p.RunID, p.Annotations, p.Await),
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:            new(p.BackoffLimit),
			ActiveDeadlineSeconds:   new(Seconds(p.Deadline)),
			TTLSecondsAfterFinished: TTLSeconds(p.TTLAfterFinished),
			// Two prunes of one server serialize on the catalog's lock;
			// one pod at a time keeps the logs readable.
			PodReplacementPolicy: new(batchv1.Failed),
			PodFailurePolicy:     PodFailurePolicy(),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      Labels(p.Server, ComponentPrune, p.Labels),
					Annotations: Annotations(p.RunID, p.Annotations),
				},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					ServiceAccountName:           p.ServiceAccountName,
					AutomountServiceAccountToken: new(false),
					EnableServiceLinks:           new(false),
					NodeName:                     p.Placement.NodeName,
					Affinity:                     Affinity(p.Placement),
					SecurityContext:              PodSecurityContext(p.Identity),
					Containers: []corev1.Container{{
						Name:                     ContainerName,
						Image:                    p.Image,
						Command:                  []string{ArchiverPath},
						Args:                     PruneArgs(p),
						Resources:                ContainerResources(p.Resources),
						SecurityContext:          ContainerSecurityContext(p.Identity, PruneCapabilities),
						TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
						VolumeMounts: []corev1.VolumeMount{
							{Name: BackupVolumeName, MountPath: p.BackupRoot},
							{Name: ConfigVolumeName, MountPath: p.ConfigMountPath, ReadOnly: true},
							tmpMount,
						},
					}},
					Volumes: []corev1.Volume{
						ClaimVolume(BackupVolumeName, p.BackupClaimName, false),
						SecretVolume(ConfigVolumeName, p.ConfigSecretName),
						tmpVolume,
					},
				},
			},
		},
	}
}
