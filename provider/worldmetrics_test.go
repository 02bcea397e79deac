package provider

import (
	"encoding/json"
	"sync"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/worldbackup/worldbackup/provider/jobspec"
)

func validMetrics() WorldMetricsArgs {
	return WorldMetricsArgs{Image: pulumi.String("ghcr.io/worldbackup/worldbackup-archiver:v0.1.0")}
}

// decodeAs decodes a registration's inputs strictly as T.
func decodeAs[T any](t *testing.T, reg pulumi.MockResourceArgs) T {
	t.Helper()
	b, err := json.Marshal(reg.Inputs.Mappable())
	if err != nil {
		t.Fatal(err)
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("inputs do not decode: %v", err)
	}
	return v
}

// TestWorldMetricsRegistersDeploymentAndService: the component and its two
// children, exactly the builder's objects, and outputs a ServiceMonitor
// can select by.
func TestWorldMetricsRegistersDeploymentAndService(t *testing.T) {
	tests := []struct {
		name string
		args func() WorldMetricsArgs
		want func(m *jobspec.Metrics)
	}{
		{"defaults", validMetrics, func(*jobspec.Metrics) {}},
		{"everything", func() WorldMetricsArgs {
			a := validMetrics()
			a.Namespace, a.Name, a.Cluster, a.MaxAge = pulumi.String("games"), "exporter", pulumi.String("eu-1"), "36h"
			a.ServerMaxAges = map[string]string{"survival": "26h", "creative": "8h"}
			a.Port, a.RunAsUser, a.RunAsGroup = new(9100), new(2000), new(3000)
			a.ConfigSecretName = pulumi.String("felis-metrics-config")
			return a
		}, func(m *jobspec.Metrics) {
			m.Namespace, m.Name, m.Cluster, m.MaxAge = "games", "exporter", "eu-1", "36h"
			m.ServerMaxAges = []string{"creative=8h", "survival=26h"}
			m.Port = 9100
			m.Identity = jobspec.Identity{Mode: jobspec.Restricted, RunAsUser: 2000, RunAsGroup: 3000, FSGroup: 3000}
			m.ConfigSecretName = "felis-metrics-config"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, err := validMetrics().Spec()
			if err != nil {
				t.Fatal(err)
			}
			tt.want(&want)
			var url, portName string
			var selector map[string]string
			var wg sync.WaitGroup
			wg.Add(1)
			m, err := runMocked(t, func(ctx *pulumi.Context) error {
				c, err := NewWorldMetrics(ctx, "metrics", tt.args())
				if err != nil {
					return err
				}
				pulumi.All(c.URL, c.PortName, c.SelectorLabels).ApplyT(func(v []any) error {
					defer wg.Done()
					url, portName, selector = v[0].(string), v[1].(string), v[2].(map[string]string)
					return nil
				})
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			wantDep, wantSvc := jobspec.BuildMetrics(want)
			deps, svcs := m.ofType("kubernetes:apps/v1:Deployment"), m.ofType("kubernetes:core/v1:Service")
			if len(m.ofType(WorldMetricsType)) != 1 || len(deps) != 1 || len(svcs) != 1 || len(m.resources) != 3 {
				t.Fatalf("registered %d resources, want the component, one Deployment and one Service", len(m.resources))
			}
			if deps[0].Name != "metrics-deployment" || svcs[0].Name != "metrics-service" {
				t.Errorf("children named %q and %q", deps[0].Name, svcs[0].Name)
			}
			if want := "urn:pulumi:stack::project::" + WorldMetricsType + "::metrics"; deps[0].RegisterRPC.GetParent() != want {
				t.Errorf("Deployment parent %q", deps[0].RegisterRPC.GetParent())
			}
			gotDep := decodeAs[appsv1.Deployment](t, deps[0])
			gotSvc := decodeAs[corev1.Service](t, svcs[0])
			if a, b := mustJSON(t, gotDep), mustJSON(t, wantDep); a != b {
				t.Errorf("Deployment\n%s\nwant\n%s", a, b)
			}
			if a, b := mustJSON(t, gotSvc), mustJSON(t, wantSvc); a != b {
				t.Errorf("Service\n%s\nwant\n%s", a, b)
			}
			wantURL := "http://" + want.Name + "." + want.Namespace + ".svc:" + itoa(want.Port) + "/metrics"
			if url != wantURL || portName != "metrics" || selector["app.kubernetes.io/component"] != "metrics" {
				t.Errorf("outputs url %q port %q selector %v", url, portName, selector)
			}
		})
	}
}

func itoa(n int32) string { b, _ := json.Marshal(n); return string(b) }

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestWorldMetricsInvalidInputs(t *testing.T) {
	tests := []struct {
		name       string
		modify     func(a *WorldMetricsArgs)
		wantInputs []string
		wantText   string
	}{
		{"no image", func(a *WorldMetricsArgs) { a.Image = nil }, []string{"image"}, "is required"},
		{"name starting with a digit", func(a *WorldMetricsArgs) { a.Name = "9metrics" }, []string{"name"}, `"9metrics" is invalid: it names the Service too`},
		{"name not a label", func(a *WorldMetricsArgs) { a.Name = "Metrics" }, []string{"name"}, `"Metrics" is invalid`},
		{"bad max age", func(a *WorldMetricsArgs) { a.MaxAge = "daily" }, []string{"maxAge"}, "36h"},
		{"bad server", func(a *WorldMetricsArgs) { a.ServerMaxAges = map[string]string{"Survival": "1h"} }, []string{"serverMaxAges"}, "Survival"},
		{"root", func(a *WorldMetricsArgs) { a.RunAsUser = new(0) }, []string{"runAsUser"}, "non-root"},
		{"port", func(a *WorldMetricsArgs) { a.Port = new(70000) }, []string{"port"}, "out of range"},
		{"memory in thousandths", func(a *WorldMetricsArgs) { a.MemoryLimit = pulumi.String("128m") }, []string{"memoryLimit"}, "below the minimum 64Mi"},
		{"reserved label", func(a *WorldMetricsArgs) { a.Labels = pulumi.StringMap{"app.kubernetes.io/name": pulumi.String("x")} }, []string{"labels"}, "set by the component"},
		{"empty pull Secret", func(a *WorldMetricsArgs) { a.ImagePullSecrets = pulumi.ToStringArray([]string{"ghcr-pull", ""}) }, []string{"imagePullSecrets"}, "item 1 is empty"},
		{"bad toleration", func(a *WorldMetricsArgs) { a.Tolerations = []TolerationArgs{{Operator: "Matches"}} }, []string{"tolerations[0]"}, `operator "Matches"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := validMetrics()
			tt.modify(&a)
			checkComponentInputError(t, a.Validate, func(ctx *pulumi.Context) error {
				_, err := NewWorldMetrics(ctx, "metrics", a)
				return err
			}, tt.wantInputs, []string{tt.wantText})
		})
	}
}
