package shard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/common/workspace"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"golang.org/x/sync/errgroup"
	"sigs.k8s.io/yaml"
)

// Operations the fleet runs on every shard.
const (
	OpPreview = "preview"
	OpUp      = "up"
	OpRefresh = "refresh"
	OpDestroy = "destroy"
)

// Defaults of Options.
const (
	DefaultSize     = 50
	DefaultParallel = 2
	DefaultWorkDir  = ".fleet"
)

// Options say which stack to shard and how.
type Options struct {
	ProjectDir string // the folder of Pulumi.yaml (and of the stack's Pulumi.<stack>.yaml)
	Stack      string // the stack whose config lists the fleet
	Op         string // preview, up, refresh or destroy
	Size       int    // servers per shard (DefaultSize)
	Parallel   int    // shards run at once (DefaultParallel)
	// WorkDir holds the shards' Pulumi.<shard>.yaml and logs
	// (default ProjectDir/.fleet).
	WorkDir string
	// Config values (plain text) replacing the stack's in every shard, e.g.
	// worldbackup:runId for a nightly run.
	Config  map[string]string
	Program pulumi.RunFunc // the program every shard runs (deploy.Program)
	// Pulumi, PulumiHome and Env are the CLI, its home and the environment
	// of every command (the backend, the passphrase).
	Pulumi     auto.PulumiCommand
	PulumiHome string
	Env        map[string]string
	Out        io.Writer // one progress line per shard (os.Stdout)
	// ProgramID identifies the program's build (a hash of its binary, see
	// ExecutableID): in render mode an up skips a shard whose config,
	// stack file and ProgramID are those of its last successful up. Empty:
	// no shard is skipped.
	ProgramID string
	Force     bool // run every shard, even one with nothing new to do
}

func (o *Options) withDefaults() {
	if o.Size == 0 {
		o.Size = DefaultSize
	}
	if o.Parallel == 0 {
		o.Parallel = DefaultParallel
	}
	if o.WorkDir == "" {
		o.WorkDir = filepath.Join(o.ProjectDir, DefaultWorkDir)
	}
	if o.Out == nil {
		o.Out = os.Stdout
	}
}

// Validate reports what is wrong with o.
func (o Options) Validate() error {
	var errs []error
	if !slices.Contains([]string{OpPreview, OpUp, OpRefresh, OpDestroy}, o.Op) {
		errs = append(errs, fmt.Errorf("operation %q: use preview, up, refresh or destroy", o.Op))
	}
	if o.Stack == "" {
		errs = append(errs, errors.New("a stack is required: the one whose config lists the servers"))
	}
	if o.Size < 1 || o.Parallel < 1 {
		errs = append(errs, fmt.Errorf("the shard size (%d) and parallelism (%d) must be at least 1", o.Size, o.Parallel))
	}
	if o.Program == nil || o.Pulumi == nil {
		errs = append(errs, errors.New("a program and a Pulumi CLI are required"))
	}
	return errors.Join(errs...)
}

// Result is what one shard's operation did.
type Result struct {
	Stack   string
	Servers int
	Changes map[string]int // by operation: create, same, replace, delete, ...
	Elapsed time.Duration
	Log     string // the CLI's output
	Err     error
}

// Run plans the shards of o.Stack's servers and runs o.Op on each, at most
// o.Parallel at once, printing a line as each starts and ends. A shard left
// without servers is destroyed and removed by up and destroy (preview only
// says so). The error joins every shard's.
func Run(ctx context.Context, o Options) ([]Result, error) {
	o.withDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	parent, err := o.parentConfig(ctx)
	if err != nil {
		return nil, err
	}
	for k, v := range o.Config {
		parent[k] = Value{Value: &v}
	}
	render := parent.Text(KeyRenderDir) != ""
	if render {
		// See render.go: safe only where every resource is a file.
		o.Env = maps.Clone(o.Env)
		if o.Env == nil {
			o.Env = map[string]string{}
		}
		o.Env[envSkipCheckpoints] = "true"
	}
	ws, err := o.workspace(ctx)
	if err != nil {
		return nil, err
	}
	servers, err := ParseServers(parent.Text(KeyServers))
	if err != nil {
		return nil, err
	}
	prev, updated, err := o.existingShards(ctx, ws)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, s := range servers {
		names = append(names, s.Name)
	}
	plan := Plan(names, prev, o.Size)
	if o.Op == OpDestroy {
		for i := range plan {
			plan[i] = nil // every shard goes
		}
	}
	idx := Indices(plan)
	first := -1
	for _, i := range idx {
		if len(plan[i]) > 0 {
			first = i
			break
		}
	}
	fmt.Fprintf(o.Out, "fleet: %s %s: %d servers in %d shards of at most %d, %d at once\n",
		o.Op, o.Stack, len(servers), len(idx), o.Size, o.Parallel)
	results := make([]Result, len(idx))
	var mu sync.Mutex
	done := 0
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(o.Parallel)
	start := time.Now()
	for n, i := range idx {
		g.Go(func() error {
			name := StackName(o.Stack, i)
			r := Result{Stack: name, Servers: len(plan[i])}
			t0 := time.Now()
			_, exists := prev[i]
			sh := shardRun{name: name, exists: exists, lastUpdate: updated[name], render: render}
			if len(plan[i]) == 0 {
				r.Changes, r.Log, r.Err = o.retire(gctx, ws, sh)
			} else {
				var cfg Config
				if cfg, r.Err = For(parent, servers, plan[i], i == first, o.ProjectDir); r.Err == nil {
					r.Changes, r.Log, r.Err = o.runShard(gctx, ws, sh, cfg)
				}
			}
			r.Elapsed = time.Since(t0)
			mu.Lock()
			done++
			results[n] = r
			fmt.Fprintln(o.Out, progressLine(o.Op, r, done, len(idx), time.Since(start)))
			mu.Unlock()
			return nil // one shard's failure does not stop the others
		})
	}
	_ = g.Wait()
	var errs []error
	for _, r := range results {
		if r.Err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.Stack, r.Err))
		}
	}
	if render && o.Op == OpUp && o.ProgramID != "" {
		if err := o.recordApplied(ctx, ws, results); err != nil {
			errs = append(errs, fmt.Errorf("recording which shards are up to date: %w", err))
		}
	}
	return results, errors.Join(errs...)
}

// progressLine is the line printed when a shard is done.
func progressLine(op string, r Result, done, total int, since time.Duration) string {
	var ch []string
	for _, k := range slices.Sorted(maps.Keys(r.Changes)) {
		if r.Changes[k] > 0 {
			ch = append(ch, fmt.Sprintf("%s %d", k, r.Changes[k]))
		}
	}
	if r.Changes[Skipped] > 0 {
		ch = []string{Skipped}
	}
	state := "ok"
	if r.Err != nil {
		state = "FAILED: " + firstLine(r.Err.Error())
	}
	if len(ch) == 0 {
		ch = []string{"no changes"}
	}
	return fmt.Sprintf("fleet: [%d/%d %5.1fs] %s %s: %d servers, %s, in %.1fs: %s",
		done, total, since.Seconds(), op, r.Stack, r.Servers, strings.Join(ch, ", "), r.Elapsed.Seconds(), state)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// workspace is the shards' workspace: o.WorkDir with the project of
// o.ProjectDir/Pulumi.yaml (its program is served by operate, inline.go).
func (o Options) workspace(ctx context.Context) (auto.Workspace, error) {
	proj, err := workspace.LoadProject(filepath.Join(o.ProjectDir, "Pulumi.yaml"))
	if err != nil {
		return nil, fmt.Errorf("loading the project: %w", err)
	}
	proj.Main = "" // the shards run the program inline
	if err := os.MkdirAll(o.WorkDir, 0o755); err != nil {
		return nil, err
	}
	return auto.NewLocalWorkspace(ctx, auto.WorkDir(o.WorkDir), auto.Project(*proj),
		auto.Pulumi(o.Pulumi), auto.PulumiHome(o.PulumiHome), auto.EnvVars(o.Env))
}

// cli runs the Pulumi CLI in dir with o's environment.
func (o Options) cli(ctx context.Context, dir string, args ...string) (string, error) {
	return o.cliIn(ctx, dir, nil, args...)
}

// cliIn is cli with stdin as the CLI's input (nil: none).
func (o Options) cliIn(ctx context.Context, dir string, stdin io.Reader, args ...string) (string, error) {
	return o.run(ctx, dir, stdin, nil, args...)
}

// cliTo is cli with the CLI's output copied to out as it comes.
func (o Options) cliTo(ctx context.Context, dir string, out io.Writer, args ...string) (string, error) {
	return o.run(ctx, dir, nil, []io.Writer{out}, args...)
}

// run runs the CLI in dir with o's environment; its errors hold the
// CLI's standard error.
func (o Options) run(ctx context.Context, dir string, stdin io.Reader, out []io.Writer, args ...string) (string, error) {
	// PULUMI_DEBUG_COMMANDS: the CLI's --event-log (inline.go) is a
	// debug flag, as it is for the Automation API.
	env := []string{"PULUMI_DEBUG_COMMANDS=true"}
	if o.PulumiHome != "" {
		env = append(env, "PULUMI_HOME="+o.PulumiHome)
	}
	for k, v := range o.Env {
		env = append(env, k+"="+v)
	}
	stdout, stderr, code, err := o.Pulumi.Run(ctx, dir, stdin, out, nil, env, args...)
	if err != nil {
		return stdout, fmt.Errorf("pulumi %s exited %d: %w\n%s", strings.Join(args[:min(2, len(args))], " "), code, err, stderr)
	}
	return stdout, nil
}

// parentConfig is o.Stack's config, secrets in the clear (they are set as
// secrets again in each shard).
func (o Options) parentConfig(ctx context.Context) (Config, error) {
	out, err := o.cli(ctx, o.ProjectDir, "config", "--json", "--show-secrets", "--stack", o.Stack)
	if err != nil {
		return nil, fmt.Errorf("reading the config of stack %s: %w", o.Stack, err)
	}
	c := Config{}
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		return nil, fmt.Errorf("reading the config of stack %s: %w", o.Stack, err)
	}
	return c, nil
}

// stackFile is the stack file of the shard name in the work folder.
func (o Options) stackFile(name string) string {
	return filepath.Join(o.WorkDir, "Pulumi."+name+".yaml")
}

// shortName is a listed stack's name without its organization and project.
func shortName(listed string) string { return listed[strings.LastIndex(listed, "/")+1:] }

// existingShards reads which servers each shard of o.Stack holds, from the
// shards' own stack files (Pulumi.<shard>.yaml in the work folder), for
// the shards the backend lists, and each stack's last update by name.
func (o Options) existingShards(ctx context.Context, ws auto.Workspace) (map[int][]string, map[string]string, error) {
	stacks, err := ws.ListStacks(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("listing the shards: %w", err)
	}
	prev := map[int][]string{}
	updated := map[string]string{}
	for _, st := range stacks {
		name := shortName(st.Name)
		if name == o.Stack && st.ResourceCount != nil && *st.ResourceCount > 0 {
			// Its Jobs would be managed by two stacks at once.
			return nil, nil, fmt.Errorf("stack %s holds %d resources: it is deployed with `pulumi up` itself. Keep doing that, or `pulumi destroy` it before running its servers as a fleet", o.Stack, *st.ResourceCount)
		}
		i, ok := ShardIndex(o.Stack, name)
		if !ok {
			continue
		}
		prev[i] = nil
		updated[name] = st.LastUpdate
		b, err := os.ReadFile(o.stackFile(name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		var f struct {
			Config map[string]json.RawMessage `json:"config"`
		}
		if err := yaml.Unmarshal(b, &f); err != nil {
			return nil, nil, fmt.Errorf("reading shard %s: %w", name, err)
		}
		var list []struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(f.Config[KeyServers], &list)
		for _, s := range list {
			prev[i] = append(prev[i], s.Name)
		}
	}
	return prev, updated, nil
}

// shardRun is one shard as Run found it.
type shardRun struct {
	name       string
	exists     bool   // the backend lists its stack
	lastUpdate string // the stack's last update, as listed
	render     bool   // the fleet renders manifests (render.go)
}

// runShard sets the config of the shard (its stack made when new) and runs
// o.Op on it; in render mode an up with nothing new to do is skipped.
func (o Options) runShard(ctx context.Context, ws auto.Workspace, sh shardRun, cfg Config) (map[string]int, string, error) {
	var old auto.ConfigMap
	var err error
	if sh.exists {
		if old, err = ws.GetAllConfig(ctx, sh.name); err != nil {
			return nil, "", err
		}
		if sh.render && o.Op == OpUp && !o.isUnsaved(sh.name) && o.upToDate(sh.name, sh.lastUpdate, old, cfg) {
			return map[string]int{Skipped: 1}, "", nil
		}
	}
	_, ferr := os.Stat(o.stackFile(sh.name))
	hadFile := ferr == nil
	// Every command names its stack (--stack): none is selected.
	if !sh.exists {
		if err := ws.CreateStack(ctx, sh.name); err != nil {
			return nil, "", err
		}
		if hadFile {
			// A new stack with an old stack file keeps that file's config.
			if old, err = ws.GetAllConfig(ctx, sh.name); err != nil {
				return nil, "", err
			}
		}
	}
	var log strings.Builder
	if err := o.recover(ctx, sh, &log); err != nil {
		return nil, log.String(), err
	}
	var stale []string
	for k := range old {
		if _, ok := cfg[k]; !ok {
			stale = append(stale, k)
		}
	}
	if len(stale) > 0 {
		if err := ws.RemoveAllConfig(ctx, sh.name, stale); err != nil {
			return nil, "", err
		}
	}
	if err := SetConfig(ctx, func(ctx context.Context, stdin io.Reader, args ...string) error {
		_, err := o.cliIn(ctx, o.WorkDir, stdin, args...)
		return err
	}, sh.name, cfg); err != nil {
		return nil, "", err
	}
	if o.Op == OpPreview || o.Op == OpRefresh {
		ch, err := o.operate(ctx, o.Op, sh.name, &log)
		return ch, log.String(), err
	}
	var ch map[string]int
	err = o.unsaved(ctx, sh, func() error {
		ch, err = o.operate(ctx, OpUp, sh.name, &log)
		return err
	})
	return ch, log.String(), err
}

// Skipped is the change reported by a shard skipped as up to date (render.go).
const Skipped = "unchanged since its last up, skipped"

// unsaved runs an up or destroy of sh through run, marked unsaved in
// render mode while it runs (render.go).
func (o Options) unsaved(ctx context.Context, sh shardRun, run func() error) error {
	if !sh.render {
		return run()
	}
	if err := o.markUnsaved(sh.name); err != nil {
		return err
	}
	err := run()
	if cerr := o.clearUnsaved(ctx, sh.name, err); cerr != nil && err == nil {
		err = cerr
	}
	return err
}

// recover brings up a shard whose last CLI run was killed in render mode
// with the config that run had, before the fleet changes it (render.go).
func (o Options) recover(ctx context.Context, sh shardRun, log io.Writer) error {
	if !sh.render || !o.isUnsaved(sh.name) || (o.Op != OpUp && o.Op != OpDestroy) {
		return nil
	}
	fmt.Fprintf(o.Out, "fleet: %s: its last run was killed before it saved its state: bringing it up again with that run's config first\n", sh.name)
	err := o.unsaved(ctx, sh, func() error {
		_, err := o.operate(ctx, OpUp, sh.name, log)
		return err
	})
	if err != nil {
		return fmt.Errorf("bringing up again after a killed run: %w", err)
	}
	return nil
}

// recordApplied records, for each shard whose up succeeded, the fingerprint
// that lets the next up skip it (render.go), with the stack's new last update.
func (o Options) recordApplied(ctx context.Context, ws auto.Workspace, results []Result) error {
	stacks, err := ws.ListStacks(ctx)
	if err != nil {
		return err
	}
	updated := map[string]string{}
	for _, st := range stacks {
		updated[shortName(st.Name)] = st.LastUpdate
	}
	var errs []error
	for _, r := range results {
		if r.Err != nil || r.Servers == 0 || r.Changes[Skipped] > 0 {
			continue
		}
		if err := o.record(r.Stack, updated[r.Stack]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// retire destroys the shard, which holds no server any more, and removes
// its stack; preview and refresh leave it.
func (o Options) retire(ctx context.Context, ws auto.Workspace, sh shardRun) (map[string]int, string, error) {
	if o.Op != OpUp && o.Op != OpDestroy {
		return map[string]int{"retire": 1}, "", nil
	}
	var log strings.Builder
	if err := o.recover(ctx, sh, &log); err != nil {
		return nil, log.String(), err
	}
	var ch map[string]int
	err := o.unsaved(ctx, sh, func() error {
		var err error
		ch, err = o.operate(ctx, OpDestroy, sh.name, &log)
		return err
	})
	if err != nil {
		return nil, log.String(), err
	}
	if err := ws.RemoveStack(ctx, sh.name); err != nil {
		return nil, log.String(), err
	}
	for _, p := range []string{o.appliedPath(sh.name), o.unsavedPath(sh.name)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, log.String(), err
		}
	}
	return ch, log.String(), nil
}
