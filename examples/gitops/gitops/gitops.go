// Package gitops is the GitOps example: a Pulumi program that never touches
// a cluster. It renders one WorldBackup Job per server as YAML (the
// Kubernetes provider's renderYamlToDirectory) into a folder that Argo CD or
// Flux applies, and writes that folder's kustomization.yaml listing the
// rendered Jobs. Their file names contain the Job names, which change with
// every run ID, so the program rewrites kustomization.yaml on every
// `pulumi up`; a pipeline sets a new runId, runs `pulumi up` and commits the
// folder (see README.md). The example's main runs Program; the tests run the
// same function inline.
package gitops

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/config"

	"github.com/worldbackup/worldbackup/program/deploy"
	"github.com/worldbackup/worldbackup/provider"
)

// KustomizationFile is the file the program writes into the render folder.
const KustomizationFile = "kustomization.yaml"

// Config is the example's stack config (see its Pulumi.yaml).
type Config struct {
	Image       string   // the archiver image
	BackupClaim string   // the PVC that receives the archives
	RunID       string   // the trigger: a new value renders new Jobs, a new backup run
	Cluster     string   // the cluster the folder is for; it names the run IDs
	Namespace   string   // "" = the component's default, minecraft
	Servers     []string // the game servers to back up
	RenderDir   string   // the folder Argo CD or Flux watches, relative to the project folder
	// KeepFinished is the Jobs' ttlAfterFinished. It must outlast the time
	// between two runs: once Kubernetes deletes a finished Job, Argo CD or
	// Flux sees it missing from the cluster and creates it again (its pod
	// then finds the run recorded and exits 0, but it runs). A new run's
	// commit removes the old Job's file, and pruning deletes the old Job.
	KeepFinished string
}

// ParseConfig reads the config through get, which returns the value of a key
// of the project's namespace ("" when unset), and validates it.
func ParseConfig(get func(key string) string) (Config, error) {
	c := Config{
		Image:        get("image"),
		BackupClaim:  get("backupClaim"),
		RunID:        get("runId"),
		Cluster:      get("cluster"),
		Namespace:    get("namespace"),
		RenderDir:    get("renderDir"),
		KeepFinished: get("keepFinished"),
	}
	var errs []error
	if raw := get("servers"); raw != "" {
		if err := json.Unmarshal([]byte(raw), &c.Servers); err != nil {
			errs = append(errs, fmt.Errorf("servers: %w: give a list of server names, e.g. [lobby, survival]", err))
		}
	}
	if err := c.Validate(); err != nil {
		errs = append(errs, err)
	}
	return c, errors.Join(errs...)
}

// Validate reports what the example needs before it declares anything. The
// component validates the rest (names, run IDs, durations) itself.
func (c Config) Validate() error {
	var errs []error
	for _, req := range []struct{ key, value, example string }{
		{"image", c.Image, "ghcr.io/worldbackup/worldbackup-archiver:v0.1.0"},
		{"runId", c.RunID, `"$(date -u +%Y%m%dT%H%M%SZ)"`},
		{"cluster", c.Cluster, "prod"},
		{"renderDir", c.RenderDir, "rendered"},
	} {
		if req.value == "" {
			errs = append(errs, fmt.Errorf("%s is required: `pulumi config set %s %s`", req.key, req.key, req.example))
		}
	}
	if len(c.Servers) == 0 {
		errs = append(errs, errors.New("servers is empty: `pulumi config set --path 'servers[0]' survival`"))
	}
	for i, s := range c.Servers {
		if slices.Contains(c.Servers[:i], s) {
			errs = append(errs, fmt.Errorf("servers lists %q twice", s))
		}
	}
	return errors.Join(errs...)
}

// Program reads the stack config and runs Deploy.
func Program(ctx *pulumi.Context) error {
	cfg, err := ParseConfig(config.New(ctx, "").Get)
	if err != nil {
		return fmt.Errorf("invalid stack config (fix it with `pulumi config set`):\n%w", err)
	}
	return Deploy(ctx, cfg)
}

// Deploy declares a Kubernetes provider in render mode and one WorldBackup
// per server with it, and, during `pulumi up` (not preview), writes the
// render folder's kustomization.yaml listing their manifests. It exports
// renderDir, the manifests (relative to it) and the runId trigger.
func Deploy(ctx *pulumi.Context, cfg Config) error {
	dir := cfg.RenderDir
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(ctx.RootDirectory(), dir)
	}
	k8s, err := kubernetes.NewProvider(ctx, "gitops", &kubernetes.ProviderArgs{
		RenderYamlToDirectory: pulumi.String(dir),
	})
	if err != nil {
		return fmt.Errorf("creating the render provider: %w", err)
	}
	var manifests []any
	for _, server := range cfg.Servers {
		b, err := provider.NewWorldBackup(ctx, server, provider.WorldBackupArgs{JobInputs: provider.JobInputs{
			Server:           server,
			RunID:            pulumi.String(deploy.RunID(cfg.Cluster, server, cfg.RunID)),
			Image:            pulumi.String(cfg.Image),
			BackupClaimName:  pulumi.String(cfg.BackupClaim),
			Namespace:        pulumi.String(cfg.Namespace),
			TTLAfterFinished: pulumi.String(cfg.KeepFinished),
			// The provider renders: the preflight and replaceUnready are
			// off by themselves (no cluster, no live Job to check).
		}}, pulumi.Provider(k8s))
		if err != nil {
			return fmt.Errorf("server %s: %w", server, err)
		}
		manifests = append(manifests, pulumi.All(b.Namespace, b.JobName).ApplyT(func(v []any) string {
			return ManifestPath(v[0].(string), v[1].(string))
		}).(pulumi.StringOutput))
	}
	// The outputs resolve once every Job is rendered. Exporting the result
	// makes a failed write fail the update.
	listed := pulumi.All(manifests...).ApplyT(func(v []any) ([]string, error) {
		files := make([]string, len(v))
		for i, f := range v {
			files[i] = f.(string)
		}
		if ctx.DryRun() {
			return files, nil // a preview changes nothing
		}
		return files, WriteKustomization(dir, cfg.RunID, files)
	})
	ctx.Export("renderDir", pulumi.String(dir))
	ctx.Export("manifests", listed)
	ctx.Export("runId", pulumi.String(cfg.RunID))
	return nil
}

// ManifestPath is where the Kubernetes provider's render mode writes a Job,
// relative to the render folder: 1-manifest/<apiVersion>-<kind>-<namespace>-<name>.yaml
// with the apiVersion's '/' replaced by '_'.
func ManifestPath(namespace, jobName string) string {
	return path.Join("1-manifest", fmt.Sprintf("batch_v1-job-%s-%s.yaml", namespace, jobName))
}

// Kustomization returns a kustomization.yaml that lists manifests (paths
// relative to it), sorted, with a header naming the run.
func Kustomization(runID string, manifests []string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Written by the worldbackup GitOps example on every `pulumi up` (run %s); do not edit.\n", strings.ReplaceAll(runID, "\n", " "))
	b.WriteString("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n")
	if len(manifests) == 0 {
		b.WriteString("resources: []\n")
		return b.Bytes()
	}
	b.WriteString("resources:\n")
	for _, m := range slices.Sorted(slices.Values(manifests)) {
		fmt.Fprintf(&b, "  - %s\n", m)
	}
	return b.Bytes()
}

// WriteKustomization replaces dir/kustomization.yaml with Kustomization's
// output atomically (a temp file in dir, renamed over it), so Argo CD or Flux
// never reads half a file.
func WriteKustomization(dir, runID string, manifests []string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating render folder %q: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, ".kustomization-*.yaml")
	if err != nil {
		return fmt.Errorf("writing %s in %q: %w", KustomizationFile, dir, err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename, a no-op
	if _, err := tmp.Write(Kustomization(runID, manifests)); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s in %q: %w", KustomizationFile, dir, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s in %q: %w", KustomizationFile, dir, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s in %q: %w", KustomizationFile, dir, err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, KustomizationFile)); err != nil {
		return fmt.Errorf("writing %s in %q: %w", KustomizationFile, dir, err)
	}
	return nil
}
