package multicluster_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"

	"github.com/worldbackup/worldbackup/examples/multi-cluster/multicluster"
	"github.com/worldbackup/worldbackup/internal/jobrun"
	"github.com/worldbackup/worldbackup/internal/stacktest"
)

const project = "worldbackup-multi-cluster"

// TestProgramRendersEachClusterIntoItsFolder runs the example's program
// inline through the real CLI, engine and Kubernetes provider in render mode,
// with the two clusters of its Pulumi.yaml: each cluster's provider renders
// exactly that cluster's Jobs into that cluster's folder.
func TestProgramRendersEachClusterIntoItsFolder(t *testing.T) {
	tools := stacktest.Require(t)
	renderDir := t.TempDir()
	stack := tools.ProjectStack(t, "..", "render", multicluster.Program, map[string]string{
		project + ":image":     "registry.example/archiver:test",
		project + ":runId":     "r1",
		project + ":renderDir": renderDir,
	})
	up, err := stack.Up(t.Context(), optup.ProgressStreams(io.Discard))
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	exported, ok := up.Outputs["backups"].Value.(map[string]any)
	if !ok {
		t.Fatalf("output backups is %T, want a map", up.Outputs["backups"].Value)
	}

	tests := []struct {
		cluster, namespace string
		servers            []string
	}{
		{"eu", "minecraft", []string{"lobby", "survival"}},
		{"us", "games", []string{"survival"}},
	}
	if len(exported) != 3 {
		t.Errorf("exported %d backups, want 3: %v", len(exported), exported)
	}
	for _, tc := range tests {
		t.Run(tc.cluster, func(t *testing.T) {
			dir := filepath.Join(renderDir, tc.cluster, "1-manifest")
			var want []string
			for _, server := range tc.servers {
				out, ok := exported[tc.cluster+"/"+server].(map[string]any)
				if !ok {
					t.Fatalf("no exported backup %s/%s", tc.cluster, server)
				}
				runID := fmt.Sprintf("%s.%s.r1", tc.cluster, server)
				if out["runId"] != runID || out["namespace"] != tc.namespace {
					t.Errorf("%s: exported %v, want runId %s in namespace %s", server, out, runID, tc.namespace)
				}
				name := fmt.Sprintf("batch_v1-job-%s-%s.yaml", tc.namespace, out["jobName"])
				want = append(want, name)

				b, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil {
					t.Fatalf("%s: %v", server, err)
				}
				job, err := jobrun.ParseJob(b)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				args := strings.Join(job.Spec.Template.Spec.Containers[0].Args, " ")
				if job.Namespace != tc.namespace || !strings.Contains(args, "--server "+server+" --run-id "+runID) {
					t.Errorf("%s: namespace %q, args %q; want namespace %s, server %s, run %s", name, job.Namespace, args, tc.namespace, server, runID)
				}
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range entries {
				got = append(got, e.Name())
			}
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("%s holds %v, want exactly this cluster's Jobs %v", dir, got, want)
			}
		})
	}
}

func TestParseConfig(t *testing.T) {
	valid := map[string]string{
		"image":    "registry.example/archiver:test",
		"runId":    "r1",
		"clusters": `[{"name":"eu","servers":["lobby"]},{"name":"us","namespace":"games","servers":["survival"]}]`,
	}
	tests := []struct {
		name string
		edit func(map[string]string)
		want string // "" = valid
	}{
		{"valid", func(map[string]string) {}, ""},
		{"missing image", func(c map[string]string) { delete(c, "image") }, "image is required"},
		{"missing runId", func(c map[string]string) { delete(c, "runId") }, "runId is required"},
		{"no clusters", func(c map[string]string) { delete(c, "clusters") }, "clusters is empty"},
		{"duplicate cluster", func(c map[string]string) {
			c["clusters"] = `[{"name":"eu","servers":["a"]},{"name":"eu","servers":["b"]}]`
		}, `clusters[1].name "eu" is listed twice`},
		{"invalid cluster name", func(c map[string]string) { c["clusters"] = `[{"name":"EU","servers":["a"]}]` }, `clusters[0].name "EU" is invalid`},
		{"cluster without servers", func(c map[string]string) { c["clusters"] = `[{"name":"eu"}]` }, "clusters[0] (eu) has no servers"},
		{"duplicate server", func(c map[string]string) { c["clusters"] = `[{"name":"eu","servers":["a","a"]}]` }, `lists server "a" twice`},
		{"unknown field", func(c map[string]string) { c["clusters"] = `[{"name":"eu","server":["a"]}]` }, `unknown field "server"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := map[string]string{}
			for k, v := range valid {
				c[k] = v
			}
			tc.edit(c)
			cfg, err := multicluster.ParseConfig(func(k string) string { return c[k] })
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want == "" && len(cfg.Clusters) != 2:
				t.Fatalf("clusters = %+v", cfg.Clusters)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}
