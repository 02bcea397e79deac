package provider

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/worldbackup/worldbackup/provider/jobspec"
	"github.com/worldbackup/worldbackup/provider/preflight"
)

// TestTargetOf checks that a component reads the Kubernetes provider its
// Job goes to from the engine: the one passed with pulumi.Provider or
// pulumi.Providers (next to a provider of another package), its
// renderYamlToDirectory, kubeconfig and context; and none without one.
func TestTargetOf(t *testing.T) {
	// The Go SDK's NewProvider takes $KUBECONFIG for an unset kubeconfig.
	t.Setenv("KUBECONFIG", "/k/ambient.yaml")
	render := &kubernetes.ProviderArgs{RenderYamlToDirectory: pulumi.String("rendered")}
	cluster := &kubernetes.ProviderArgs{Kubeconfig: pulumi.String("/etc/clusters/b.yaml"), Context: pulumi.String("b")}
	tests := []struct {
		name string
		args *kubernetes.ProviderArgs
		opts func(k8s, other pulumi.ProviderResource) []pulumi.ResourceOption
		want kubeTarget
	}{
		{"pulumi.Provider, rendering", render, func(k8s, _ pulumi.ProviderResource) []pulumi.ResourceOption {
			return []pulumi.ResourceOption{pulumi.Provider(k8s)}
		}, kubeTarget{Render: true, Cluster: preflight.Cluster{Kubeconfig: "/k/ambient.yaml"}}},
		{"pulumi.Providers after another package's, a cluster", cluster, func(k8s, other pulumi.ProviderResource) []pulumi.ResourceOption {
			return []pulumi.ResourceOption{pulumi.Providers(other, k8s)}
		}, kubeTarget{Cluster: preflight.Cluster{Kubeconfig: "/etc/clusters/b.yaml", Context: "b"}}},
		{"pulumi.Provider of another package only: the default", render, func(_, other pulumi.ProviderResource) []pulumi.ResourceOption {
			return []pulumi.ResourceOption{pulumi.Providers(other)}
		}, kubeTarget{}},
		{"no provider: the default", render, func(pulumi.ProviderResource, pulumi.ProviderResource) []pulumi.ResourceOption {
			return nil
		}, kubeTarget{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got kubeTarget
			_, err := runMocked(t, func(ctx *pulumi.Context) error {
				k8s, err := kubernetes.NewProvider(ctx, "cluster", tt.args)
				if err != nil {
					return err
				}
				var other pulumi.ProviderResourceState
				if err := ctx.RegisterResource("pulumi:providers:random", "other", pulumi.Map{}, &other); err != nil {
					return err
				}
				got, err = targetOf(ctx, tt.opts(k8s, &other))
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("target = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestRenderModeDefaults checks that a Job for a rendering provider has
// the preflight and replaceUnready off by default, and that an explicit
// value still wins; and that the preflight talks to the provider's cluster,
// each part overridden by kubeContext or the Go Kubeconfig field.
func TestRenderModeDefaults(t *testing.T) {
	tests := []struct {
		name                  string
		target                kubeTarget
		set                   func(*WorldBackupArgs)
		wantPreflight, wantRU bool
		wantCluster           preflight.Cluster
	}{
		{"a cluster", kubeTarget{}, nil, true, true, preflight.Cluster{}},
		{"render mode", kubeTarget{Render: true}, nil, false, false, preflight.Cluster{}},
		{"render mode, both set", kubeTarget{Render: true}, func(a *WorldBackupArgs) {
			a.Preflight, a.ReplaceUnready = new(true), new(true)
		}, true, true, preflight.Cluster{}},
		{"the provider's cluster", kubeTarget{Cluster: preflight.Cluster{Kubeconfig: "/k/b.yaml", Context: "b"}}, nil,
			true, true, preflight.Cluster{Kubeconfig: "/k/b.yaml", Context: "b"}},
		{"kubeContext over the provider's", kubeTarget{Cluster: preflight.Cluster{Kubeconfig: "/k/b.yaml", Context: "b"}},
			func(a *WorldBackupArgs) { a.KubeContext = "c" }, true, true, preflight.Cluster{Kubeconfig: "/k/b.yaml", Context: "c"}},
		{"Kubeconfig over the provider's", kubeTarget{Cluster: preflight.Cluster{Kubeconfig: "/k/b.yaml", Context: "b"}},
			func(a *WorldBackupArgs) { a.Kubeconfig = "/k/go.yaml" }, true, true, preflight.Cluster{Kubeconfig: "/k/go.yaml", Context: "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := validArgs()
			if tt.set != nil {
				tt.set(&a)
			}
			a.setTarget(tt.target)
			r, err := a.resolve()
			if err != nil {
				t.Fatal(err)
			}
			if r.Preflight.Enabled != tt.wantPreflight || r.Job.Await.ReplaceUnready != tt.wantRU {
				t.Fatalf("preflight %v, replaceUnready %v; want %v, %v", r.Preflight.Enabled, r.Job.Await.ReplaceUnready, tt.wantPreflight, tt.wantRU)
			}
			if r.Preflight.Cluster != tt.wantCluster {
				t.Fatalf("cluster = %+v, want %+v", r.Preflight.Cluster, tt.wantCluster)
			}
			_, annotated := jobspec.BuildBackup(r.Job).Annotations[jobspec.AnnotationReplaceUnready]
			if annotated != tt.wantRU {
				t.Fatalf("Job annotated %s: %v, want %v", jobspec.AnnotationReplaceUnready, annotated, tt.wantRU)
			}
		})
	}
}

// TestRenderModeJob checks the whole path under mocks: a WorldBackup given
// a rendering provider registers a Job without pulumi.com/replaceUnready.
func TestRenderModeJob(t *testing.T) {
	m, err := runMocked(t, func(ctx *pulumi.Context) error {
		k8s, err := kubernetes.NewProvider(ctx, "render", &kubernetes.ProviderArgs{RenderYamlToDirectory: pulumi.String("out")})
		if err != nil {
			return err
		}
		_, err = NewWorldBackup(ctx, "backup", validArgs(), pulumi.Provider(k8s))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	jobs := m.ofType("kubernetes:batch/v1:Job")
	if len(jobs) != 1 {
		t.Fatalf("Jobs = %d, want 1", len(jobs))
	}
	if job := decodeJob(t, jobs[0], true); job.Annotations[jobspec.AnnotationReplaceUnready] != "" {
		t.Fatalf("rendered Job annotations = %v, want no %s", job.Annotations, jobspec.AnnotationReplaceUnready)
	}
}

// refusingKubeconfig writes a kubeconfig whose server is a loopback port
// nothing listens on, and points $KUBECONFIG at it: the ambient kubeconfig
// is the wrong one.
func refusingKubeconfig(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	path := filepath.Join(t.TempDir(), "refusing.yaml")
	if err := os.WriteFile(path, []byte(kubeconfigFor("http://"+addr)), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", path)
	return path
}

// TestProvidersClusterIsObserved runs a backup at `pulumi up` (mocks) with
// a wrong ambient kubeconfig and a Kubernetes provider whose kubeconfig (a
// path, or the contents) and context name the cluster where the run
// finished: the preflight passes there and the run's report is read from
// there (status, sha256), which the ambient cluster could not give.
func TestProvidersClusterIsObserved(t *testing.T) {
	r, err := validArgs().resolve()
	if err != nil {
		t.Fatal(err)
	}
	sum := strings.Repeat("ab", 32)
	objs := finishedBackup(jobspec.BuildBackup(r.Job),
		`{"status":"done","run_id":"20250601-0300","sha256":"`+sum+`","size_bytes":7,"duration_seconds":1}`)
	good := clusterWith(t, objs[0].(*batchv1.Job), *objs[1].(*corev1.Pod))
	refusing := refusingKubeconfig(t)
	// Two contexts: the current one refuses, "good" is the cluster.
	refusingDoc, err := os.ReadFile(refusing)
	if err != nil {
		t.Fatal(err)
	}
	twoContexts := strings.Replace(strings.Replace(good, "name: ctx", "name: good", 1), "current-context: ctx", "current-context: bad", 1) +
		""
	twoContexts = mergeKubeconfigs(t, twoContexts, string(refusingDoc))
	path := filepath.Join(t.TempDir(), "provider.yaml")
	if err := os.WriteFile(path, []byte(twoContexts), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args *kubernetes.ProviderArgs
	}{
		{"kubeconfig contents", &kubernetes.ProviderArgs{Kubeconfig: pulumi.String(good)}},
		{"kubeconfig path and context", &kubernetes.ProviderArgs{Kubeconfig: pulumi.String(path), Context: pulumi.String("good")}},
		{"secret kubeconfig contents and context", &kubernetes.ProviderArgs{Kubeconfig: pulumi.ToSecret(pulumi.String(twoContexts)).(pulumi.StringOutput), Context: pulumi.String("good")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var status, sha string
			_, err := runMocked(t, func(ctx *pulumi.Context) error {
				k8s, err := kubernetes.NewProvider(ctx, "cluster", tt.args)
				if err != nil {
					return err
				}
				b, err := NewWorldBackup(ctx, "backup", validArgs(), pulumi.Provider(k8s))
				if err != nil {
					return err
				}
				pulumi.All(b.Status, b.SHA256).ApplyT(func(v []any) error {
					mu.Lock()
					defer mu.Unlock()
					status, sha = v[0].(string), v[1].(string)
					return nil
				})
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if status != "done" || sha != sum {
				t.Fatalf("status %q, sha256 %q: want done, %s read from the provider's cluster", status, sha, sum)
			}
		})
	}
}

// mergeKubeconfigs returns a kubeconfig with the clusters, users and
// contexts of a, and of b renamed to bad (its current context a's).
func mergeKubeconfigs(t *testing.T, a, b string) string {
	t.Helper()
	ca, err := clientcmd.Load([]byte(a))
	if err != nil {
		t.Fatal(err)
	}
	cb, err := clientcmd.Load([]byte(b))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cb.Contexts {
		ca.Clusters["bad"] = cb.Clusters[c.Cluster]
		ca.AuthInfos["bad"] = cb.AuthInfos[c.AuthInfo]
		ca.Contexts["bad"] = &clientcmdapi.Context{Cluster: "bad", AuthInfo: "bad"}
	}
	out, err := clientcmd.Write(*ca)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestRenderedRestoreFromBackup declares, at preview in render mode, a
// restore from a backup's outputs: with the backup's sha256 (empty: no
// cluster ran the backup) it fails naming sha256 and why, not a bare
// "is required"; with its archiveRef and a recorded checksum it renders a
// Job that depends on the backup's Job.
func TestRenderedRestoreFromBackup(t *testing.T) {
	const backupJob = "urn:pulumi:stack::project::worldbackup:index:WorldBackup$kubernetes:batch/v1:Job::backup-job"
	program := func(fromOutputs bool) pulumi.RunFunc {
		return func(ctx *pulumi.Context) error {
			k8s, err := kubernetes.NewProvider(ctx, "render", &kubernetes.ProviderArgs{RenderYamlToDirectory: pulumi.String("out")})
			if err != nil {
				return err
			}
			b, err := NewWorldBackup(ctx, "backup", validArgs(), pulumi.Provider(k8s))
			if err != nil {
				return err
			}
			ra := validRestoreArgs()
			ra.ArchiveRef = b.ArchiveRef
			if fromOutputs {
				ra.SHA256 = b.SHA256
			}
			_, err = NewWorldRestore(ctx, "restore", ra, pulumi.Provider(k8s))
			return err
		}
	}
	t.Run("the backup's sha256", func(t *testing.T) {
		_, err := runMockedPreview(t, program(true))
		var ie *InputError
		if !errors.As(err, &ie) || !slices.Equal(ie.Inputs(), []string{"sha256"}) {
			t.Fatalf("error = %v, want an *InputError of sha256", err)
		}
		for _, want := range []string{"another resource's output", "renders", "archiver list --server survival --json"} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("error %q does not say %q", err, want)
			}
		}
	})
	t.Run("a recorded checksum", func(t *testing.T) {
		m, err := runMockedPreview(t, program(false))
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range m.ofType(jobType) {
			if j.Name != "restore-job" {
				continue
			}
			if deps := j.RegisterRPC.GetDependencies(); !slices.Contains(deps, backupJob) {
				t.Fatalf("restore Job depends on %q, want the backup's Job among them", deps)
			}
			return
		}
		t.Fatal("no restore Job registered")
	})
}
