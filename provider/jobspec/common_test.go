package jobspec_test

import (
	"reflect"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/worldbackup/worldbackup/provider/jobspec"
)

// This file holds what the backup and restore Jobs' tests share: getters
// of a Job's parts, eq, and the rows of the contract that every Job meets in
// the same way.

func container(t *testing.T, job *batchv1.Job) corev1.Container {
	t.Helper()
	cs := job.Spec.Template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("containers = %d, want 1", len(cs))
	}
	return cs[0]
}

func volume(t *testing.T, job *batchv1.Job, name string) corev1.Volume {
	t.Helper()
	for _, v := range job.Spec.Template.Spec.Volumes {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("no volume %q in %+v", name, job.Spec.Template.Spec.Volumes)
	return corev1.Volume{}
}

func mountAt(t *testing.T, job *batchv1.Job, name string) corev1.VolumeMount {
	t.Helper()
	for _, m := range container(t, job).VolumeMounts {
		if m.Name == name {
			return m
		}
	}
	t.Fatalf("no mount of volume %q", name)
	return corev1.VolumeMount{}
}

func eq[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s = %#v, want %#v", what, got, want)
	}
}

// contractRow is one row of a Job's contract, checked on one built Job.
type contractRow struct {
	name  string
	check func(t *testing.T)
}

// sharedContract returns the rows of the contract that every Job of the
// contract's defaults (baseline mode) meets in the same way, whatever it
// runs: job is of component, for run runID.
func sharedContract(job *batchv1.Job, component, runID string) []contractRow {
	pod := job.Spec.Template.Spec
	return []contractRow{
		{"type meta", func(t *testing.T) {
			eq(t, "apiVersion/kind", job.APIVersion+" "+job.Kind, "batch/v1 Job")
		}},
		{"service account without token", func(t *testing.T) {
			eq(t, "serviceAccountName", pod.ServiceAccountName, "felis-restore")
			eq(t, "automountServiceAccountToken", pod.AutomountServiceAccountToken, new(false))
		}},
		{"writable /tmp emptyDir", func(t *testing.T) {
			v := volume(t, job, jobspec.TmpVolumeName)
			if v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.String() != "64Mi" {
				t.Fatalf("tmp volume = %+v, want emptyDir with sizeLimit 64Mi", v.VolumeSource)
			}
			eq(t, "tmp mount", mountAt(t, job, jobspec.TmpVolumeName), corev1.VolumeMount{Name: jobspec.TmpVolumeName, MountPath: "/tmp"})
		}},
		{"baseline pod security context", func(t *testing.T) {
			eq(t, "pod securityContext", pod.SecurityContext, &corev1.PodSecurityContext{
				RunAsUser:      new(int64(0)),
				RunAsGroup:     new(int64(0)),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			})
		}},
		{"resources", func(t *testing.T) {
			r := container(t, job).Resources
			eq(t, "cpu limit", r.Limits.Cpu().String(), "1")
			eq(t, "memory limit", r.Limits.Memory().String(), "1Gi")
			eq(t, "cpu request", r.Requests.Cpu().String(), "100m")
			eq(t, "memory request", r.Requests.Memory().String(), "256Mi")
		}},
		{"deadline, TTL, backoff, restart", func(t *testing.T) {
			eq(t, "activeDeadlineSeconds", job.Spec.ActiveDeadlineSeconds, new(int64(1800)))
			eq(t, "ttlSecondsAfterFinished", job.Spec.TTLSecondsAfterFinished, new(int32(600)))
			eq(t, "backoffLimit", job.Spec.BackoffLimit, new(int32(2)))
			eq(t, "restartPolicy", pod.RestartPolicy, corev1.RestartPolicyNever)
			eq(t, "podReplacementPolicy", job.Spec.PodReplacementPolicy, new(batchv1.Failed))
		}},
		{"usage errors fail the Job at once, evictions are not failures", func(t *testing.T) {
			rules := job.Spec.PodFailurePolicy.Rules
			if len(rules) != 2 {
				t.Fatalf("podFailurePolicy has %d rules, want 2: %+v", len(rules), rules)
			}
			eq(t, "rule 0 action", rules[0].Action, batchv1.PodFailurePolicyActionFailJob)
			eq(t, "rule 0 exit codes", rules[0].OnExitCodes.Values, []int32{2, 3})
			eq(t, "rule 0 container", *rules[0].OnExitCodes.ContainerName, container(t, job).Name)
			eq(t, "rule 1 action", rules[1].Action, batchv1.PodFailurePolicyActionIgnore)
			eq(t, "rule 1 condition", rules[1].OnPodConditions[0].Type, corev1.DisruptionTarget)
		}},
		{"termination message", func(t *testing.T) {
			eq(t, "terminationMessagePolicy", container(t, job).TerminationMessagePolicy, corev1.TerminationMessageFallbackToLogsOnError)
		}},
		{"labels on Job and pod", func(t *testing.T) {
			want := map[string]string{
				"app.kubernetes.io/name":       "worldbackup",
				"app.kubernetes.io/instance":   "survival",
				"app.kubernetes.io/component":  component,
				"app.kubernetes.io/managed-by": "pulumi",
				"worldbackup.dev/server":       "survival",
			}
			eq(t, "job labels", job.Labels, want)
			eq(t, "pod labels", job.Spec.Template.Labels, want)
		}},
		{"run ID annotation on Job and pod, no skipAwait", func(t *testing.T) {
			want := map[string]string{"worldbackup.dev/run-id": runID}
			eq(t, "job annotations", job.Annotations, want)
			eq(t, "pod annotations", job.Spec.Template.Annotations, want)
		}},
		{"no placement by default", func(t *testing.T) {
			eq(t, "nodeName", pod.NodeName, "")
			eq(t, "affinity", pod.Affinity, (*corev1.Affinity)(nil))
		}},
		{"nothing from the host", func(t *testing.T) {
			if pod.HostNetwork || pod.HostPID || pod.HostIPC {
				t.Fatal("pod uses host namespaces")
			}
			eq(t, "enableServiceLinks", pod.EnableServiceLinks, new(false))
		}},
	}
}
