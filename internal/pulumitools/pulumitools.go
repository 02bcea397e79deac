// Package pulumitools finds the Pulumi CLI and plugins that `make tools`
// builds (into the tool cache, linked from .tools/bin) and runs Go programs through them with the Automation
// API: a local file state backend, an empty passphrase, no prompts, no update
// checks. The stack tests (through internal/stacktest) and `make demo` use it.
package pulumitools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/common/workspace"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// ErrMissing means the tools are not built; run `make tools`.
var ErrMissing = errors.New("the Pulumi tools are not built: run `make tools`")

// Tools are the locally built Pulumi binaries.
type Tools struct {
	Root       string // the repository root
	Bin        string // .tools/bin: pulumi and the YAML language host (links into the tool cache)
	PulumiHome string // $WB_CACHE/pulumi-home: the Kubernetes plugin is installed here
}

// RepoRoot walks up from dir to the folder holding the module's go.mod.
func RepoRoot(dir string) (string, error) {
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/worldbackup/worldbackup\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no worldbackup go.mod above " + dir)
		}
		dir = parent
	}
}

// CacheDir is the machine-wide cache that scripts/env.sh calls WB_CACHE:
// $WB_CACHE, else $XDG_CACHE_HOME/worldbackup, else ~/.cache/worldbackup.
func CacheDir() (string, error) {
	if v := os.Getenv("WB_CACHE"); v != "" {
		return v, nil
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("finding the tool cache: %w", err)
	}
	return filepath.Join(dir, "worldbackup"), nil
}

// ToolsDir is the folder that scripts/env.sh calls WB_TOOLS, where the
// checkout's links into the tool cache live: $WB_TOOLS, else root/.tools.
func ToolsDir(root string) string {
	if v := os.Getenv("WB_TOOLS"); v != "" {
		return v
	}
	return filepath.Join(root, ".tools")
}

// Find locates the tools for the checkout at root, honouring WB_TOOLS,
// WB_CACHE and PULUMI_HOME as scripts/env.sh does. The error wraps
// ErrMissing when they are not built.
func Find(root string) (Tools, error) {
	tools := ToolsDir(root)
	home := os.Getenv("PULUMI_HOME")
	if home == "" {
		cache, err := CacheDir()
		if err != nil {
			return Tools{}, err
		}
		home = filepath.Join(cache, "pulumi-home")
	}
	t := Tools{Root: root, Bin: filepath.Join(tools, "bin"), PulumiHome: home}
	if _, err := os.Stat(filepath.Join(t.Bin, "pulumi")); err != nil {
		return t, fmt.Errorf("%w (no %s)", ErrMissing, filepath.Join(t.Bin, "pulumi"))
	}
	if m, _ := filepath.Glob(filepath.Join(home, "plugins", "resource-kubernetes-v*")); len(m) == 0 {
		return t, fmt.Errorf("%w (no Kubernetes plugin in %s)", ErrMissing, home)
	}
	return t, nil
}

// Env is the environment every Pulumi command gets: a file backend under
// stateDir, no passphrase, no update checks, the tools first on PATH.
func (t Tools) Env(stateDir string) map[string]string {
	return map[string]string{
		"PULUMI_BACKEND_URL":                       "file://" + stateDir,
		"PULUMI_CONFIG_PASSPHRASE":                 "",
		"PULUMI_SKIP_UPDATE_CHECK":                 "1",
		"PULUMI_DIY_BACKEND_NO_LOCK_WARNING":       "1",
		"PULUMI_HOME":                              t.PulumiHome,
		"PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK": "1",
		"PATH": t.Bin + string(os.PathListSeparator) + os.Getenv("PATH"),
	}
}

// InlineStack creates (or selects) a stack for program with the project
// settings of the repository's Pulumi.yaml, so its config block applies; see
// ProjectStack.
func (t Tools) InlineStack(ctx context.Context, stack string, program pulumi.RunFunc, workDir, stateDir string, config map[string]string) (auto.Stack, error) {
	return t.ProjectStack(ctx, t.Root, stack, program, workDir, stateDir, config)
}

// ProjectStack creates (or selects) a stack for the inline program with the
// project settings of projectDir/Pulumi.yaml (its config block's types and
// defaults apply as for `pulumi up` in that folder), in workDir with its
// state under stateDir, and sets config by path (`pulumi config set --path`,
// as a user would).
func (t Tools) ProjectStack(ctx context.Context, projectDir, stack string, program pulumi.RunFunc, workDir, stateDir string, config map[string]string) (auto.Stack, error) {
	proj, err := workspace.LoadProject(filepath.Join(projectDir, "Pulumi.yaml"))
	if err != nil {
		return auto.Stack{}, fmt.Errorf("loading %s: %w", filepath.Join(projectDir, "Pulumi.yaml"), err)
	}
	proj.Main = "" // an inline program has no program folder
	cmd, err := auto.NewPulumiCommand(&auto.PulumiCommandOptions{Root: filepath.Dir(t.Bin), SkipVersionCheck: true})
	if err != nil {
		return auto.Stack{}, fmt.Errorf("finding the Pulumi CLI: %w", err)
	}
	s, err := auto.UpsertStackInlineSource(ctx, stack, string(proj.Name), program,
		auto.Project(*proj), auto.WorkDir(workDir), auto.Pulumi(cmd),
		auto.PulumiHome(t.PulumiHome), auto.EnvVars(t.Env(stateDir)))
	if err != nil {
		return auto.Stack{}, fmt.Errorf("creating stack %s: %w", stack, err)
	}
	return s, SetConfig(ctx, s, config)
}

// SetConfig replaces the stack's config with cfg, keys taken as paths.
func SetConfig(ctx context.Context, s auto.Stack, cfg map[string]string) error {
	old, err := s.GetAllConfig(ctx)
	if err != nil {
		return fmt.Errorf("reading config: %w", err)
	}
	for k := range old {
		if err := s.RemoveConfig(ctx, k); err != nil {
			return fmt.Errorf("removing config %s: %w", k, err)
		}
	}
	m := auto.ConfigMap{}
	for k, v := range cfg {
		m[k] = auto.ConfigValue{Value: v}
	}
	if err := s.SetAllConfigWithOptions(ctx, m, &auto.ConfigOptions{Path: true}); err != nil {
		return fmt.Errorf("setting config: %w", err)
	}
	return nil
}

// CLI runs the pulumi CLI non-interactively in dir with env added to this
// process's environment, and returns its combined output.
func (t Tools) CLI(ctx context.Context, dir string, env map[string]string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(t.Bin, "pulumi"), append(args, "--non-interactive")...)
	cmd.Dir = dir
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("pulumi %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}
