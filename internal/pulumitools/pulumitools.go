// Package pulumitools finds the Pulumi CLI and plugins that `make tools`
// builds (into the tool cache, linked from .tools/bin) and runs Go programs through them with the Automation
// API: a local file state backend, an empty passphrase, no prompts, no update
// checks. The stack tests (through internal/stacktest) and `make demo` use it.
package pulumitools

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
//
// The keys go to `pulumi config set-all --path` in PathOrder, not in map
// order: the CLI sets them one after the other, and an array element can
// only be set once the one before it exists (servers[2] before servers[1]
// fails with "array index out of range"). The Automation API's
// SetAllConfigWithOptions ranges over its map, so the CLI is run directly,
// with the workspace's command, folder and environment.
func SetConfig(ctx context.Context, s auto.Stack, cfg map[string]string) error {
	old, err := s.GetAllConfig(ctx)
	if err != nil {
		return fmt.Errorf("reading config: %w", err)
	}
	if len(old) > 0 {
		if err := s.RemoveAllConfig(ctx, slices.Collect(maps.Keys(old))); err != nil {
			return fmt.Errorf("removing the old config: %w", err)
		}
	}
	if len(cfg) == 0 {
		return nil
	}
	args := []string{"config", "set-all", "--stack", s.Name(), "--path"}
	for _, k := range PathOrder(slices.Collect(maps.Keys(cfg))) {
		args = append(args, "--plaintext", k+"="+cfg[k])
	}
	ws := s.Workspace()
	env := []string{}
	if ws.PulumiHome() != "" {
		env = append(env, "PULUMI_HOME="+ws.PulumiHome())
	}
	for k, v := range ws.GetEnvVars() {
		env = append(env, k+"="+v)
	}
	stdout, stderr, code, err := ws.PulumiCommand().Run(ctx, ws.WorkDir(), nil, nil, nil, env, args...)
	if err != nil {
		return fmt.Errorf("setting config (pulumi config set-all exited %d): %w\n%s%s", code, err, stdout, stderr)
	}
	return nil
}

// PathOrder sorts config paths so that the elements of every array come in
// ascending index order (servers[2] after servers[1], servers[10] after
// servers[9]): paths compare part by part, a run of digits by its number.
func PathOrder(keys []string) []string {
	keys = slices.Clone(keys)
	slices.SortFunc(keys, comparePaths)
	return keys
}

// comparePaths compares a and b as runs of digits (by value) and of other
// bytes (byte-wise).
func comparePaths(a, b string) int {
	for a != "" && b != "" {
		ra, rb := leadingRun(a), leadingRun(b)
		if c := compareRuns(a[:ra], b[:rb]); c != 0 {
			return c
		}
		a, b = a[ra:], b[rb:]
	}
	return cmp.Compare(len(a), len(b))
}

// leadingRun is the length of s's first run of digits or of non-digits.
func leadingRun(s string) int {
	digit := isDigit(s[0])
	n := 1
	for n < len(s) && isDigit(s[n]) == digit {
		n++
	}
	return n
}

func compareRuns(a, b string) int {
	if isDigit(a[0]) && isDigit(b[0]) {
		ta, tb := strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
		if c := cmp.Compare(len(ta), len(tb)); c != 0 {
			return c
		}
		if c := strings.Compare(ta, tb); c != 0 {
			return c
		}
	}
	return strings.Compare(a, b)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// CLI runs the pulumi CLI non-interactively in dir with env added to this
// process's environment, and returns its combined output.
func (t Tools) CLI(ctx context.Context, dir string, env map[string]string, args ...string) (string, error) {
	return t.CLIWithInput(ctx, dir, env, nil, args...)
}

// CLIWithInput is CLI with stdin as the CLI's input (nil: none). An error
// names the command by its first words only (a config value may be long).
func (t Tools) CLIWithInput(ctx context.Context, dir string, env map[string]string, stdin io.Reader, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(t.Bin, "pulumi"), append(args, "--non-interactive")...)
	cmd.Dir = dir
	cmd.Stdin = stdin
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("pulumi %s: %w", strings.Join(args[:min(3, len(args))], " "), err)
	}
	return string(out), nil
}
