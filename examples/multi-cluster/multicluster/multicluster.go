// Package multicluster is the multi-cluster example: one Pulumi program that
// backs up worlds in several Kubernetes clusters. Each cluster gets its own
// Kubernetes provider, and each WorldBackup is given its cluster's provider
// with pulumi.Provider, so its Job lands in that cluster (or, in render mode,
// in that cluster's folder of YAML). The example's main runs Program; the
// tests run the same function inline.
package multicluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/config"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/worldbackup/worldbackup/program/deploy"
	"github.com/worldbackup/worldbackup/provider"
)

// Config is the example's stack config (see its Pulumi.yaml).
type Config struct {
	Image       string    // the archiver image
	BackupClaim string    // the PVC that receives the archives, in every cluster
	RunID       string    // the trigger: a new value performs a new backup run everywhere
	RenderDir   string    // set: render YAML into <RenderDir>/<cluster> instead of applying
	Clusters    []Cluster // where the worlds live
}

// Cluster is one Kubernetes cluster and the servers whose worlds live there.
type Cluster struct {
	Name      string   `json:"name"`                // names its provider, its backups and its render folder
	Context   string   `json:"context,omitempty"`   // kubeconfig context; "" = the current one
	Namespace string   `json:"namespace,omitempty"` // "" = the component's default, minecraft
	Servers   []string `json:"servers"`             // the game servers (StatefulSet names) to back up
}

// ParseConfig reads the config through get, which returns the value of a key
// of the project's namespace ("" when unset), and validates it.
func ParseConfig(get func(key string) string) (Config, error) {
	c := Config{
		Image:       get("image"),
		BackupClaim: get("backupClaim"),
		RunID:       get("runId"),
		RenderDir:   get("renderDir"),
	}
	var errs []error
	if raw := get("clusters"); raw != "" {
		dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c.Clusters); err != nil {
			errs = append(errs, fmt.Errorf("clusters: %w: give a list of {name, context, namespace, servers}", err))
		}
	}
	if err := c.Validate(); err != nil {
		errs = append(errs, err)
	}
	return c, errors.Join(errs...)
}

// Validate reports what the example needs before it declares anything. The
// component validates the rest (server names, run IDs, image) itself.
func (c Config) Validate() error {
	var errs []error
	if c.Image == "" {
		errs = append(errs, errors.New("image is required: `pulumi config set image ghcr.io/worldbackup/worldbackup-archiver:v0.1.0`"))
	}
	if c.RunID == "" {
		errs = append(errs, errors.New("runId is required: `pulumi config set runId \"$(date -u +%Y%m%dT%H%M%SZ)\"`"))
	}
	if len(c.Clusters) == 0 {
		errs = append(errs, errors.New("clusters is empty: list at least one cluster with its servers"))
	}
	var names []string
	for i, cl := range c.Clusters {
		switch {
		case len(validation.IsDNS1123Label(cl.Name)) > 0:
			errs = append(errs, fmt.Errorf("clusters[%d].name %q is invalid: use a DNS-1123 label, e.g. eu", i, cl.Name))
		case slices.Contains(names, cl.Name):
			errs = append(errs, fmt.Errorf("clusters[%d].name %q is listed twice: give each cluster its own name", i, cl.Name))
		}
		names = append(names, cl.Name)
		if len(cl.Servers) == 0 {
			errs = append(errs, fmt.Errorf("clusters[%d] (%s) has no servers: list the servers whose worlds live there", i, cl.Name))
		}
		for j, s := range cl.Servers {
			if slices.Contains(cl.Servers[:j], s) {
				errs = append(errs, fmt.Errorf("clusters[%d] (%s) lists server %q twice", i, cl.Name, s))
			}
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

// Deploy declares one Kubernetes provider per cluster and one WorldBackup per
// server of that cluster, given that provider, and exports `backups`: a map
// from "<cluster>/<server>" to the run's runId, namespace, jobName and
// archiveRef.
func Deploy(ctx *pulumi.Context, cfg Config) error {
	backups := pulumi.Map{}
	for _, cl := range cfg.Clusters {
		args := &kubernetes.ProviderArgs{}
		if cfg.RenderDir != "" {
			// Render mode never contacts the cluster, so no context is needed.
			args.RenderYamlToDirectory = pulumi.String(RenderPath(ctx, cfg.RenderDir, cl.Name))
		} else if cl.Context != "" {
			args.Context = pulumi.String(cl.Context)
		}
		k8s, err := kubernetes.NewProvider(ctx, cl.Name, args)
		if err != nil {
			return fmt.Errorf("cluster %s: %w", cl.Name, err)
		}
		for _, server := range cl.Servers {
			b, err := provider.NewWorldBackup(ctx, cl.Name+"-"+server, provider.WorldBackupArgs{JobInputs: provider.JobInputs{
				Server: server,
				// One catalog may serve every cluster: the run ID names the
				// cluster and the server, as the main program's do.
				RunID:           pulumi.String(deploy.RunID(cl.Name, server, cfg.RunID)),
				Image:           pulumi.String(cfg.Image),
				BackupClaimName: pulumi.String(cfg.BackupClaim),
				Namespace:       pulumi.String(cl.Namespace),
				// The preflight asks the cluster of the provider (its
				// context); rendering, it and replaceUnready are off.
			}}, pulumi.Provider(k8s))
			if err != nil {
				return fmt.Errorf("cluster %s, server %s: %w", cl.Name, server, err)
			}
			backups[cl.Name+"/"+server] = pulumi.Map{
				"runId":      b.RunID,
				"namespace":  b.Namespace,
				"jobName":    b.JobName,
				"archiveRef": b.ArchiveRef,
			}
		}
	}
	ctx.Export("backups", backups)
	return nil
}

// RenderPath is the folder a cluster's manifests are rendered into:
// <renderDir>/<cluster>, renderDir taken relative to the project folder.
func RenderPath(ctx *pulumi.Context, renderDir, cluster string) string {
	if !filepath.IsAbs(renderDir) {
		renderDir = filepath.Join(ctx.RootDirectory(), renderDir)
	}
	return filepath.Join(renderDir, cluster)
}
