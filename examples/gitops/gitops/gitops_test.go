package gitops_test

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"sigs.k8s.io/yaml"

	"github.com/worldbackup/worldbackup/examples/gitops/gitops"
	"github.com/worldbackup/worldbackup/internal/jobrun"
	"github.com/worldbackup/worldbackup/internal/stacktest"
)

const project = "worldbackup-gitops"

func config(renderDir, runID string) map[string]string {
	return map[string]string{
		project + ":image":      "registry.example/archiver:test",
		project + ":runId":      runID,
		project + ":renderDir":  renderDir,
		project + ":servers[0]": "survival",
		project + ":servers[1]": "lobby",
	}
}

// kustomization is the part of kustomization.yaml that kustomize reads.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
}

func readKustomization(t *testing.T, dir string) kustomization {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, gitops.KustomizationFile))
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := yaml.UnmarshalStrict(b, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v\n%s", err, b)
	}
	return k
}

// renderedFiles lists every file under dir except kustomization.yaml,
// relative to dir.
func renderedFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if rel != gitops.KustomizationFile {
			files = append(files, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	return files
}

// checkFolder checks that the render folder is what Argo CD or Flux must
// apply: kustomization.yaml lists exactly the rendered files, each a Job of
// run runID, and the stack exports the same list.
func checkFolder(t *testing.T, dir, runID string, outputs auto.OutputMap) {
	t.Helper()
	k := readKustomization(t, dir)
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Errorf("kustomization.yaml is %s %s", k.APIVersion, k.Kind)
	}
	files := renderedFiles(t, dir)
	if !slices.Equal(k.Resources, files) || len(files) != 2 {
		t.Fatalf("kustomization.yaml lists %v; the folder holds %v; want the 2 Jobs, each listed", k.Resources, files)
	}
	var exported []string
	for _, v := range outputs["manifests"].Value.([]any) {
		exported = append(exported, v.(string))
	}
	slices.Sort(exported)
	if !slices.Equal(exported, files) {
		t.Errorf("exported manifests %v, want %v", exported, files)
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		job, err := jobrun.ParseJob(b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		args := job.Spec.Template.Spec.Containers[0].Args
		i := slices.Index(args, "--run-id")
		if i < 0 || i+1 == len(args) || !strings.HasPrefix(args[i+1], "main.") || !strings.HasSuffix(args[i+1], "."+runID) {
			t.Errorf("%s runs %q, want run main.<server>.%s", f, args, runID)
		}
		// Kept until the next run's commit prunes it (keepFinished 2160h).
		if ttl := job.Spec.TTLSecondsAfterFinished; ttl == nil || *ttl != 2160*3600 {
			t.Errorf("%s: ttlSecondsAfterFinished %v, want %d", f, ttl, 2160*3600)
		}
	}
}

// TestRenderedFolderIsAKustomization drives the example's program inline
// through the real CLI, engine and Kubernetes provider: preview writes
// nothing; up renders the Jobs and a kustomization.yaml listing them; up
// with the same run ID changes nothing; a new run ID replaces the Jobs and
// the list, leaving no stale file.
func TestRenderedFolderIsAKustomization(t *testing.T) {
	tools := stacktest.Require(t)
	ctx := t.Context()
	dir := t.TempDir()
	stack := tools.ProjectStack(t, "..", "gitops", gitops.Program, config(dir, "r1"))

	if _, err := stack.Preview(ctx, optpreview.ProgressStreams(io.Discard)); err != nil {
		t.Fatalf("preview: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, gitops.KustomizationFile)); !os.IsNotExist(err) {
		t.Fatalf("preview wrote %s (stat: %v)", gitops.KustomizationFile, err)
	}

	up, err := stack.Up(ctx, optup.ProgressStreams(io.Discard))
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	checkFolder(t, dir, "r1", up.Outputs)
	first, err := os.ReadFile(filepath.Join(dir, gitops.KustomizationFile))
	if err != nil {
		t.Fatal(err)
	}

	t.Run("same run ID changes nothing", func(t *testing.T) {
		res, err := stack.Up(ctx, optup.ProgressStreams(io.Discard))
		if err != nil {
			t.Fatalf("up: %v", err)
		}
		for op, n := range *res.Summary.ResourceChanges {
			if op != "same" && n > 0 {
				t.Errorf("%d resources %s, want none", n, op)
			}
		}
		again, err := os.ReadFile(filepath.Join(dir, gitops.KustomizationFile))
		if err != nil {
			t.Fatal(err)
		}
		if string(again) != string(first) {
			t.Errorf("kustomization.yaml changed:\n%s\nwas:\n%s", again, first)
		}
	})

	t.Run("new run ID replaces the Jobs and the list", func(t *testing.T) {
		stacktest.SetConfig(t, stack, config(dir, "r2"))
		res, err := stack.Up(ctx, optup.ProgressStreams(io.Discard))
		if err != nil {
			t.Fatalf("up: %v", err)
		}
		if n := (*res.Summary.ResourceChanges)["replace"]; n != 2 {
			t.Errorf("replaced %d resources, want the 2 Jobs (%v)", n, *res.Summary.ResourceChanges)
		}
		checkFolder(t, dir, "r2", res.Outputs)
	})
}

func TestKustomization(t *testing.T) {
	const header = "# Written by the worldbackup GitOps example on every `pulumi up` (run r1); do not edit.\n" +
		"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
	tests := []struct {
		name      string
		manifests []string
		want      string
	}{
		{"none", nil, header + "resources: []\n"},
		{"sorted", []string{
			gitops.ManifestPath("minecraft", "survival-backup-r1"),
			gitops.ManifestPath("minecraft", "lobby-backup-r1"),
		}, header + "resources:\n" +
			"  - 1-manifest/batch_v1-job-minecraft-lobby-backup-r1.yaml\n" +
			"  - 1-manifest/batch_v1-job-minecraft-survival-backup-r1.yaml\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(gitops.Kustomization("r1", tc.manifests)); got != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

func TestParseConfig(t *testing.T) {
	valid := map[string]string{
		"image": "registry.example/archiver:test", "runId": "r1", "cluster": "main",
		"renderDir": "rendered", "servers": `["lobby","survival"]`,
	}
	tests := []struct {
		name string
		edit func(map[string]string)
		want string // "" = valid
	}{
		{"valid", func(map[string]string) {}, ""},
		{"missing image", func(c map[string]string) { delete(c, "image") }, "image is required"},
		{"missing renderDir", func(c map[string]string) { delete(c, "renderDir") }, "renderDir is required"},
		{"no servers", func(c map[string]string) { delete(c, "servers") }, "servers is empty"},
		{"servers not a list", func(c map[string]string) { c["servers"] = `"survival"` }, "servers: "},
		{"duplicate server", func(c map[string]string) { c["servers"] = `["a","a"]` }, `servers lists "a" twice`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := map[string]string{}
			for k, v := range valid {
				c[k] = v
			}
			tc.edit(c)
			_, err := gitops.ParseConfig(func(k string) string { return c[k] })
			if tc.want == "" && err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}
