package jobspec_test

import (
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/pod-security-admission/api"

	"github.com/worldbackup/worldbackup/jobapi"
	"github.com/worldbackup/worldbackup/provider/internal/jobtest"
	"github.com/worldbackup/worldbackup/provider/jobspec"
)

func metricsSpec() jobspec.Metrics {
	return jobspec.Metrics{
		Name: "worldbackup-metrics", Namespace: "minecraft", Image: "archiver:dev", ServiceAccountName: "felis-restore",
		ConfigSecretName: "felis-metrics-config", ConfigMountPath: "/etc/felis", Cluster: "eu-1", MaxAge: "36h",
		ServerMaxAges: []string{"survival=26h"}, Port: 9090,
		Resources: jobspec.Resources{CPULimit: resource.MustParse("200m"), MemoryLimit: resource.MustParse("128Mi")},
		Identity:  jobspec.Identity{RunAsUser: 1000, RunAsGroup: 1000, FSGroup: 1000},
	}
}

// TestBuildMetrics: the exporter's pod keeps the rules of every Job's pod
// (restricted Pod Security Standard, no token, read-only root, the config
// Secret read-only) and its Service exposes the metrics port by name.
func TestBuildMetrics(t *testing.T) {
	m := metricsSpec()
	m.Scheduling = jobspec.Scheduling{ImagePullSecrets: []string{"ghcr-pull"}, PriorityClassName: "infra",
		Tolerations: []corev1.Toleration{{Key: "games", Operator: corev1.TolerationOpExists}}}
	dep, svc := jobspec.BuildMetrics(m)
	pod := dep.Spec.Template
	if r := jobtest.PodSecurity(t, pod, api.LevelRestricted); !r.Allowed {
		t.Errorf("the exporter's pod is not restricted: %v %v", r.ForbiddenReasons, r.ForbiddenDetails)
	}
	spec := pod.Spec
	c := spec.Containers[0]
	checks := []struct {
		what string
		ok   bool
	}{
		{"no service-account token", spec.AutomountServiceAccountToken != nil && !*spec.AutomountServiceAccountToken},
		{"no service links", spec.EnableServiceLinks != nil && !*spec.EnableServiceLinks},
		{"non-root", spec.SecurityContext.RunAsNonRoot != nil && *spec.SecurityContext.RunAsNonRoot && *spec.SecurityContext.RunAsUser == 1000},
		{"fsGroup reads the Secret", spec.SecurityContext.FSGroup != nil && *spec.SecurityContext.FSGroup == 1000},
		{"read-only root", *c.SecurityContext.ReadOnlyRootFilesystem},
		{"every capability dropped", slices.Equal(c.SecurityContext.Capabilities.Drop, []corev1.Capability{"ALL"}) && len(c.SecurityContext.Capabilities.Add) == 0},
		{"one replica, recreate", *dep.Spec.Replicas == 1 && dep.Spec.Strategy.Type == "Recreate"},
		{"probes on /healthz", c.ReadinessProbe.HTTPGet.Path == jobspec.HealthPath && c.LivenessProbe.HTTPGet.Path == jobspec.HealthPath},
		{"service port named metrics", svc.Spec.Ports[0].Name == jobapi.MetricsPortName && svc.Spec.Ports[0].Port == 9090},
		{"service selects the pods", reflect.DeepEqual(svc.Spec.Selector, dep.Spec.Selector.MatchLabels)},
		{"service labels for a ServiceMonitor", svc.Labels[jobspec.LabelName] == "worldbackup" && svc.Labels[jobspec.LabelComponent] == "metrics"},
		// A private registry and a tainted pool, as for the Jobs.
		{"image pull Secrets", reflect.DeepEqual(spec.ImagePullSecrets, []corev1.LocalObjectReference{{Name: "ghcr-pull"}})},
		{"tolerations and priority class", len(spec.Tolerations) == 1 && spec.Tolerations[0].Key == "games" && spec.PriorityClassName == "infra"},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: no", c.what)
		}
	}
	var configMount *corev1.VolumeMount
	for i, vm := range c.VolumeMounts {
		if vm.Name == jobspec.ConfigVolumeName {
			configMount = &c.VolumeMounts[i]
		}
	}
	if configMount == nil || !configMount.ReadOnly || configMount.MountPath != "/etc/felis" {
		t.Errorf("config mount %+v: want read-only at /etc/felis", configMount)
	}
	for _, v := range spec.Volumes {
		if v.Name == jobspec.ConfigVolumeName && (v.Secret == nil || v.Secret.SecretName != "felis-metrics-config" || *v.Secret.DefaultMode != 0o400) {
			t.Errorf("config volume %+v: want the Secret, 0400", v)
		}
	}
	want := []string{jobapi.KindMetrics, "--config", "/etc/felis/felis.toml", "--listen", ":9090", "--cluster", "eu-1",
		"--max-age", "36h", "--server-max-age", "survival=26h", "--log-format", "json"}
	if !slices.Equal(c.Args, want) {
		t.Errorf("args %q, want %q", c.Args, want)
	}
	if len(c.Env) != 0 {
		t.Errorf("env %v: want none (nothing secret in env)", c.Env)
	}
}
