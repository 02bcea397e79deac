// Package yaml_test runs the YAML example the way a user does, with the
// Pulumi CLI and the YAML language host, and checks it renders the Job that
// a Go program renders for the same inputs.
package yaml_test

import (
	"encoding/json"
	"fmt"
	"github.com/worldbackup/worldbackup/internal/testenv"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"sigs.k8s.io/yaml"

	"github.com/worldbackup/worldbackup/internal/stacktest"
	"github.com/worldbackup/worldbackup/provider"
)

// pluginPath is the plugin folder the checked-in Pulumi.yaml names (where
// `make build` puts the plugin); the test points it at a fresh build.
const pluginPath = "path: ../../bin"

const (
	testImage = "registry.example/worldbackup/archiver:test"
	testRunID = "2025-06-01T0300Z"
)

// goArgs are the WorldBackup inputs of Pulumi.yaml with the config the test
// sets, as a Go program passes them.
func goArgs() provider.WorldBackupArgs {
	return provider.WorldBackupArgs{
		JobInputs: provider.JobInputs{
			Server:          "survival",
			RunID:           pulumi.String(testRunID),
			Image:           pulumi.String(testImage),
			BackupClaimName: pulumi.String("world-backups"),
			Deadline:        pulumi.String("45m"),
			BackoffLimit:    pulumi.Int(1),
			Labels:          pulumi.StringMap{"team": pulumi.String("games")},
		},
		Excludes: pulumi.ToStringArray([]string{"*.jar", "cache/", "logs/"}),
	}
}

type outputs struct {
	JobName    string `json:"jobName"`
	Namespace  string `json:"namespace"`
	RunID      string `json:"runId"`
	ArchiveRef string `json:"archiveRef"`
}

// TestYAMLProgramRendersTheGoJob runs `pulumi up` on the example through
// the CLI, with the YAML language host, the plugin built from this
// repository and the real Kubernetes provider in render mode (the example
// passes a PersistentVolumeClaim's name output as backupClaimName), then renders
// the same inputs from an inline Go program with provider.NewWorldBackup:
// the two rendered Jobs and the components' outputs must be equal. Then
// `pulumi destroy` removes the rendered Job.
func TestYAMLProgramRendersTheGoJob(t *testing.T) {
	tools := stacktest.Require(t)
	requireLanguageHost(t, tools)
	pluginDir := buildPlugin(t, tools.Root)

	// A copy of the example, its plugin path pointed at the fresh build.
	src, err := os.ReadFile("Pulumi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(src), pluginPath); n != 1 {
		t.Fatalf("Pulumi.yaml has %d %q lines, want 1", n, pluginPath)
	}
	projDir := t.TempDir()
	project := strings.Replace(string(src), pluginPath, "path: "+pluginDir, 1)
	if err := os.WriteFile(filepath.Join(projDir, "Pulumi.yaml"), []byte(project), 0o644); err != nil {
		t.Fatal(err)
	}
	env := tools.Env(t.TempDir())
	tools.CLI(t, projDir, env, "stack", "init", "test")
	tools.CLI(t, projDir, env, "config", "set", "image", testImage)
	tools.CLI(t, projDir, env, "config", "set", "runId", testRunID)
	tools.CLI(t, projDir, env, "up", "--yes")
	var yamlOut outputs
	if err := json.Unmarshal([]byte(tools.CLI(t, projDir, env, "stack", "output", "--json")), &yamlOut); err != nil {
		t.Fatal(err)
	}
	// renderDir is unset: the default, rendered/ in the project folder.
	yamlFile := filepath.Join(projDir, "rendered", "1-manifest", manifestName(yamlOut))
	yamlJob := readObject(t, yamlFile, "Job")
	// The claim whose name output the backup takes as backupClaimName.
	claimFile := filepath.Join(projDir, "rendered", "1-manifest", "v1-persistentvolumeclaim-minecraft-world-backups.yaml")
	readObject(t, claimFile, "PersistentVolumeClaim")

	goDir := t.TempDir()
	stack := tools.InlineStack(t, "go", func(ctx *pulumi.Context) error {
		k8s, err := kubernetes.NewProvider(ctx, "cluster", &kubernetes.ProviderArgs{
			RenderYamlToDirectory: pulumi.String(goDir),
		})
		if err != nil {
			return err
		}
		b, err := provider.NewWorldBackup(ctx, "backup", goArgs(), pulumi.Provider(k8s))
		if err != nil {
			return err
		}
		ctx.Export("jobName", b.JobName)
		ctx.Export("namespace", b.Namespace)
		ctx.Export("runId", b.RunID)
		ctx.Export("archiveRef", b.ArchiveRef)
		return nil
	}, nil)
	up, err := stack.Up(t.Context(), optup.ProgressStreams(io.Discard))
	if err != nil {
		t.Fatalf("up (Go): %v", err)
	}
	str := func(k string) string { s, _ := up.Outputs[k].Value.(string); return s }
	goOut := outputs{str("jobName"), str("namespace"), str("runId"), str("archiveRef")}
	goFile := filepath.Join(goDir, "1-manifest", manifestName(goOut))
	goJob := readObject(t, goFile, "Job")

	if yamlOut != goOut {
		t.Errorf("outputs differ:\nYAML: %+v\nGo:   %+v", yamlOut, goOut)
	}
	if yamlOut.RunID != testRunID || yamlOut.ArchiveRef != "/backups/_chunked/runs/survival/"+testRunID+".manifest" {
		t.Errorf("YAML outputs %+v: want run %s recorded at its manifest /backups/_chunked/runs/survival/%s.manifest", yamlOut, testRunID, testRunID)
	}
	if !reflect.DeepEqual(yamlJob, goJob) {
		y, _ := os.ReadFile(yamlFile)
		g, _ := os.ReadFile(goFile)
		t.Fatalf("the rendered Jobs differ\nYAML program (%s):\n%s\nGo program (%s):\n%s", yamlFile, y, goFile, g)
	}

	tools.CLI(t, projDir, env, "destroy", "--yes")
	for _, f := range []string{yamlFile, claimFile} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("destroy left %s (stat: %v)", f, err)
		}
	}
}

// manifestName is the file render mode writes a Job to.
func manifestName(o outputs) string {
	return fmt.Sprintf("batch_v1-job-%s-%s.yaml", o.Namespace, o.JobName)
}

// readObject parses a rendered manifest of the given kind as a generic
// object, so the comparison sees every field the provider wrote.
func readObject(t *testing.T, path, kind string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(b, &obj); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if obj["kind"] != kind {
		t.Fatalf("%s is a %v %v, want a %s", path, obj["apiVersion"], obj["kind"], kind)
	}
	return obj
}

// requireLanguageHost checks that `make tools` built the YAML language host
// next to the CLI (tools.Env puts that folder first on PATH). Missing: skip,
// or fail under CI=true.
func requireLanguageHost(t *testing.T, tools stacktest.Tools) {
	t.Helper()
	host := filepath.Join(tools.Bin, "pulumi-language-yaml")
	_, err := os.Stat(host)
	testenv.Require(t, err == nil, "no YAML language host at "+host, "make tools")
}

// buildPlugin builds pulumi-resource-worldbackup into a temp folder, the
// folder a Pulumi.yaml's plugins.providers path names.
func buildPlugin(t *testing.T, root string) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "pulumi-resource-worldbackup"),
		"github.com/worldbackup/worldbackup/provider/cmd/pulumi-resource-worldbackup")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the plugin: %v\n%s", err, out)
	}
	return dir
}
