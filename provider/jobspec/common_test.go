package jobspec_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/worldbackup/worldbackup/provider/internal/jobtest"
	"github.com/worldbackup/worldbackup/provider/jobspec"
)

func TestAffinity(t *testing.T) {
	game := map[string]string{"statefulset.kubernetes.io/pod-name": "survival-0"}
	term := corev1.PodAffinityTerm{
		LabelSelector: &metav1.LabelSelector{MatchLabels: game},
		TopologyKey:   "kubernetes.io/hostname",
	}
	nodeAffinity := &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}},
		}}},
	}}
	tests := []struct {
		name string
		p    jobspec.Placement
		want *corev1.Affinity
	}{
		{"nothing", jobspec.Placement{}, nil},
		{"none", jobspec.Placement{GamePod: game, GamePodAffinity: jobspec.AffinityNone}, nil},
		{"empty selector", jobspec.Placement{GamePodAffinity: jobspec.AffinityRequired}, nil},
		{"required", jobspec.Placement{GamePod: game, GamePodAffinity: jobspec.AffinityRequired},
			&corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}}}},
		{"preferred and a node selector", jobspec.Placement{NodeSelector: map[string]string{"zone": "a"}, GamePod: game, GamePodAffinity: jobspec.AffinityPreferred},
			&corev1.Affinity{NodeAffinity: nodeAffinity, PodAffinity: &corev1.PodAffinity{
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 100, PodAffinityTerm: term}},
			}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eq(t, "affinity", jobspec.Affinity(tt.p), tt.want)
		})
	}
}

func TestJobAnnotations(t *testing.T) {
	tests := []struct {
		name string
		aw   jobspec.Await
		want map[string]string
	}{
		{"neither", jobspec.Await{}, map[string]string{"worldbackup.dev/run-id": "r1", "note": "x"}},
		{"skip", jobspec.Await{Skip: true}, map[string]string{"worldbackup.dev/run-id": "r1", "note": "x", "pulumi.com/skipAwait": "true"}},
		{"replaceUnready", jobspec.Await{ReplaceUnready: true}, map[string]string{"worldbackup.dev/run-id": "r1", "note": "x", "pulumi.com/replaceUnready": "true"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			eq(t, "annotations", jobspec.JobAnnotations("r1", map[string]string{"note": "x"}, tt.aw), tt.want)
		})
	}
}

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
			// No TTL: the finished Job stays until a new run ID replaces it.
			eq(t, "ttlSecondsAfterFinished", job.Spec.TTLSecondsAfterFinished, (*int32)(nil))
			// A failed pod fails the Job with BackoffLimitExceeded, which pulumi up reports.
			eq(t, "backoffLimit", job.Spec.BackoffLimit, new(int32(0)))
			eq(t, "restartPolicy", pod.RestartPolicy, corev1.RestartPolicyNever)
			eq(t, "podReplacementPolicy", job.Spec.PodReplacementPolicy, new(batchv1.Failed))
		}},
		{"evictions are not failures, and no FailJob rule the provider's await would not recognise", func(t *testing.T) {
			rules := job.Spec.PodFailurePolicy.Rules
			if len(rules) != 1 {
				t.Fatalf("podFailurePolicy has %d rules, want 1: %+v", len(rules), rules)
			}
			eq(t, "rule 0 action", rules[0].Action, batchv1.PodFailurePolicyActionIgnore)
			eq(t, "rule 0 condition", rules[0].OnPodConditions[0].Type, corev1.DisruptionTarget)
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
		{"run ID annotation on Job and pod, replaceUnready on the Job, no skipAwait", func(t *testing.T) {
			eq(t, "job annotations", job.Annotations, map[string]string{"worldbackup.dev/run-id": runID, "pulumi.com/replaceUnready": "true"})
			eq(t, "pod annotations", job.Spec.Template.Annotations, map[string]string{"worldbackup.dev/run-id": runID})
		}},
		{"next to the game pod by default, preferred", func(t *testing.T) {
			eq(t, "nodeName", pod.NodeName, "")
			eq(t, "affinity", pod.Affinity, &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
					Weight: 100,
					PodAffinityTerm: corev1.PodAffinityTerm{
						LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"statefulset.kubernetes.io/pod-name": "survival-0"}},
						TopologyKey:   "kubernetes.io/hostname",
					},
				}},
			}})
		}},
		{"nothing from the host", func(t *testing.T) {
			if pod.HostNetwork || pod.HostPID || pod.HostIPC {
				t.Fatal("pod uses host namespaces")
			}
			eq(t, "enableServiceLinks", pod.EnableServiceLinks, new(false))
		}},
	}
}

// TestBuildJob: a Job kind's Pod sets the component label, the name's kind,
// the arguments, the baseline capabilities and the volumes; the rest comes
// from the shared Job.
func TestBuildJob(t *testing.T) {
	j := jobspec.Job{Server: "survival", RunID: "r1", Namespace: "games", Image: "img:1", Identity: jobspec.Identity{Mode: jobspec.Baseline}}
	tmp, tmpMount := jobspec.TmpVolume()
	job := jobspec.BuildJob(j, jobspec.Pod{Component: "prune", Args: []string{"prune"}, Capabilities: []corev1.Capability{"DAC_OVERRIDE"},
		Mounts: []corev1.VolumeMount{tmpMount}, Volumes: []corev1.Volume{tmp}})
	c := job.Spec.Template.Spec.Containers[0]
	switch {
	case job.Name != "survival-prune-r1" || job.Namespace != "games":
		t.Errorf("Job %s/%s, want games/survival-prune-r1", job.Namespace, job.Name)
	case job.Labels[jobspec.LabelComponent] != "prune" || job.Spec.Template.Labels[jobspec.LabelComponent] != "prune":
		t.Errorf("component labels %v", job.Labels)
	case !slices.Equal(c.Args, []string{"prune"}) || c.Image != "img:1":
		t.Errorf("container %s %q", c.Image, c.Args)
	case !slices.Equal(c.SecurityContext.Capabilities.Add, []corev1.Capability{"DAC_OVERRIDE"}):
		t.Errorf("capabilities %v", c.SecurityContext.Capabilities)
	case len(job.Spec.Template.Spec.Volumes) != 1 || len(c.VolumeMounts) != 1:
		t.Errorf("volumes %v mounts %v", job.Spec.Template.Spec.Volumes, c.VolumeMounts)
	}
}

// TestNotifyMountsTheURLFile: a Job with a webhook mounts only the Secret's
// key, read-only, and passes the file's path, never the URL; every kind.
func TestNotifyMountsTheURLFile(t *testing.T) {
	n := &jobspec.Notify{SecretName: "felis-notify", Key: "url", Always: true}
	b, r, p := jobtest.DefaultBackup(), jobtest.DefaultRestore(), jobtest.DefaultPrune()
	b.Notify, r.Notify, p.Notify = n, n, n
	for name, job := range map[string]*batchv1.Job{"backup": jobspec.BuildBackup(b), "restore": jobspec.BuildRestore(r), "prune": jobspec.BuildPrune(p)} {
		t.Run(name, func(t *testing.T) {
			v := volume(t, job, jobspec.NotifyVolumeName)
			eq(t, "items", v.Secret.Items, []corev1.KeyToPath{{Key: "url", Path: "url"}})
			eq(t, "secret", v.Secret.SecretName, "felis-notify")
			if v.Secret.Optional == nil || !*v.Secret.Optional {
				t.Errorf("the notify volume is not optional: a missing Secret or key would keep the pod from starting")
			}
			eq(t, "mount", mountAt(t, job, jobspec.NotifyVolumeName), corev1.VolumeMount{Name: "notify", MountPath: "/etc/felis-notify", ReadOnly: true})
			args := strings.Join(container(t, job).Args, " ")
			if !strings.Contains(args, "--notify-url-file /etc/felis-notify/url --notify-on always") {
				t.Errorf("args %q lack the notification flags", args)
			}
		})
	}
	if args := strings.Join(jobspec.BuildBackup(jobtest.DefaultBackup()).Spec.Template.Spec.Containers[0].Args, " "); strings.Contains(args, "notify") {
		t.Errorf("a Job without notify passes %q", args)
	}
}
