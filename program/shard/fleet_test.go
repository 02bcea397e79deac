package shard_test

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
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/worldbackup/worldbackup/internal/stacktest"
	"github.com/worldbackup/worldbackup/program/deploy"
	"github.com/worldbackup/worldbackup/program/shard"
)

// fleet is a project folder with a stack "prod" whose config lists servers,
// rendered into renderDir, and the options that run its shards.
type fleet struct {
	tools     stacktest.Tools
	proj      string
	state     string
	renderDir string
	out       *strings.Builder
	opts      shard.Options
}

func newFleet(t *testing.T) *fleet {
	tools := stacktest.Require(t)
	f := &fleet{tools: tools, proj: t.TempDir(), state: t.TempDir(), renderDir: "render", out: &strings.Builder{}}
	b, err := os.ReadFile(filepath.Join(tools.Root, "Pulumi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.proj, "Pulumi.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	tools.CLI(t, f.proj, tools.Env(f.state), "stack", "init", "prod")
	cmd, err := auto.NewPulumiCommand(&auto.PulumiCommandOptions{Root: filepath.Dir(tools.Bin), SkipVersionCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	f.opts = shard.Options{ProjectDir: f.proj, Stack: "prod", Size: 2, Parallel: 2, Program: deploy.Program,
		Pulumi: cmd, PulumiHome: tools.PulumiHome, Env: tools.Env(f.state), Out: f.out}
	return f
}

// setServers writes the parent stack's config: servers (each scheduled),
// in render mode.
func (f *fleet) setServers(t *testing.T, runID string, servers ...string) {
	var list []map[string]any
	for _, s := range servers {
		list = append(list, map[string]any{"name": s, "schedule": "@daily-random"})
	}
	b, _ := json.Marshal(list)
	str := func(s string) *string { return &s }
	cfg := shard.Config{
		"worldbackup:image":       {Value: str("registry.example/worldbackup/archiver:test")},
		"worldbackup:backupClaim": {Value: str("backups")},
		"worldbackup:runId":       {Value: str(runID)},
		"worldbackup:renderDir":   {Value: str(f.renderDir)},
		"worldbackup:servers":     {Value: str(string(b)), ObjectValue: list},
	}
	j, _ := json.Marshal(cfg)
	f.tools.CLI(t, f.proj, f.tools.Env(f.state), "config", "set-all", "--stack", "prod", "--json", string(j))
}

func (f *fleet) run(t *testing.T, op string) []shard.Result {
	t.Helper()
	f.out.Reset()
	o := f.opts
	o.Op = op
	res, err := shard.Run(t.Context(), o)
	if err != nil {
		t.Fatalf("fleet %s: %v\n%s", op, err, f.out)
	}
	return res
}

// rendered lists the servers whose backup Job is rendered.
func (f *fleet) rendered(t *testing.T) []string {
	files, _ := filepath.Glob(filepath.Join(f.proj, f.renderDir, "default", "1-manifest", "batch_v1-job-*.yaml"))
	var servers []string
	for _, p := range files {
		name := strings.TrimPrefix(filepath.Base(p), "batch_v1-job-")
		name = name[strings.Index(name, "-")+1:] // namespace
		servers = append(servers, name[:strings.Index(name, "-backup-")])
	}
	slices.Sort(servers)
	return servers
}

// shards lists each shard stack's servers, from the fleet's stack files.
func (f *fleet) shards(t *testing.T) map[string][]string {
	files, _ := filepath.Glob(filepath.Join(f.proj, shard.DefaultWorkDir, "Pulumi.prod.shard-*.yaml"))
	m := map[string][]string{}
	for _, p := range files {
		st := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), "Pulumi."), ".yaml")
		out := f.tools.CLI(t, filepath.Join(f.proj, shard.DefaultWorkDir), f.tools.Env(f.state), "config", "get", "--stack", st, "worldbackup:servers")
		var list []struct{ Name string }
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			t.Fatalf("shard %s: servers %q: %v", st, out, err)
		}
		for _, s := range list {
			m[st] = append(m[st], s.Name)
		}
	}
	return m
}

// TestFleetRender runs one stack's config as a fleet of shards of 2 servers
// through the real CLI and Kubernetes provider, in render mode: up, up
// unchanged, new servers, a removed shard, destroy.
func TestFleetRender(t *testing.T) {
	f := newFleet(t)
	servers := []string{"s0", "s1", "s2", "s3", "s4"}
	f.setServers(t, "r1", servers...)

	for _, r := range f.run(t, shard.OpPreview) {
		if r.Changes["create"] < 2*r.Servers {
			t.Errorf("preview %s: changes %v, want at least %d to create", r.Stack, r.Changes, 2*r.Servers)
		}
	}
	if got := f.rendered(t); len(got) != 0 {
		t.Fatalf("a preview rendered %v", got)
	}
	res := f.run(t, shard.OpUp)
	if len(res) != 3 {
		t.Fatalf("%d shards, want 3 of at most 2 servers: %+v", len(res), res)
	}
	for _, r := range res {
		// The summary is read from the CLI's event log (inline.go): a
		// backup is a component and its Job.
		if r.Changes["create"] < 2*r.Servers {
			t.Errorf("%s: changes %v, want at least %d created", r.Stack, r.Changes, 2*r.Servers)
		}
	}
	if got := f.rendered(t); !slices.Equal(got, servers) {
		t.Fatalf("rendered backups of %q, want %q", got, servers)
	}
	if lines := strings.Count(f.out.String(), "fleet: ["); lines != 3 || !strings.Contains(f.out.String(), "prod.shard-002: 1 servers") {
		t.Errorf("progress:\n%s\nwant a line per shard", f.out)
	}
	before := f.shards(t)

	t.Run("up unchanged changes nothing", func(t *testing.T) {
		for _, r := range f.run(t, shard.OpUp) {
			if r.Changes["same"] < 2*r.Servers {
				t.Errorf("%s: changes %v, want at least %d same", r.Stack, r.Changes, 2*r.Servers)
			}
			for op, n := range r.Changes {
				if op != "same" && n > 0 {
					t.Errorf("%s: %d %s, want all same", r.Stack, n, op)
				}
			}
		}
	})

	t.Run("new servers go to shards with room, none moves", func(t *testing.T) {
		f.setServers(t, "r1", "s0", "s1", "s2", "s3", "s4", "s5", "s6")
		f.run(t, shard.OpUp)
		after := f.shards(t)
		for st, ns := range before {
			for _, n := range ns {
				if !slices.Contains(after[st], n) {
					t.Errorf("%s moved out of %s: before %v, after %v", n, st, before, after)
				}
			}
		}
		if want := []string{"s4", "s5"}; !slices.Equal(after["prod.shard-002"], want) {
			t.Errorf("shard 2 holds %v, want %v (s5 fills its room, s6 a new shard)", after["prod.shard-002"], want)
		}
		if len(after["prod.shard-003"]) != 1 {
			t.Errorf("shards %v: want s6 alone in shard 3", after)
		}
		if got := f.rendered(t); len(got) != 7 {
			t.Errorf("rendered %v, want 7 backups", got)
		}
	})

	t.Run("an emptied shard is destroyed and removed", func(t *testing.T) {
		f.setServers(t, "r1", "s0", "s1", "s4", "s5", "s6")
		f.run(t, shard.OpUp)
		after := f.shards(t)
		if _, ok := after["prod.shard-001"]; ok {
			t.Errorf("shard 1 (s2, s3) is still there: %v", after)
		}
		if got := f.rendered(t); !slices.Equal(got, []string{"s0", "s1", "s4", "s5", "s6"}) {
			t.Errorf("rendered %v after removing s2 and s3", got)
		}
	})

	t.Run("a stack deployed by itself is refused", func(t *testing.T) {
		o := f.opts
		o.Op, o.Stack = shard.OpUp, "prod.shard-000"
		if _, err := shard.Run(t.Context(), o); err == nil || !strings.Contains(err.Error(), "deployed with `pulumi up` itself") {
			t.Errorf("running a deployed stack as a fleet: %v", err)
		}
	})

	t.Run("destroy removes every shard", func(t *testing.T) {
		for _, r := range f.run(t, shard.OpDestroy) {
			if r.Changes["delete"] == 0 {
				t.Errorf("%s: changes %v, want deletes", r.Stack, r.Changes)
			}
		}
		if got := f.rendered(t); len(got) != 0 {
			t.Errorf("after destroy, rendered %v", got)
		}
		if m := f.shards(t); len(m) != 0 {
			t.Errorf("after destroy, shards %v", m)
		}
	})
}

// exportServers is a program that declares nothing and exports the names of
// its stack's servers: it drives the fleet through the real CLI without the
// Kubernetes provider.
func exportServers(ctx *pulumi.Context) error {
	v, _ := ctx.GetConfig("worldbackup:servers")
	servers, err := shard.ParseServers(v)
	if err != nil {
		return err
	}
	var names []string
	for _, s := range servers {
		names = append(names, s.Name)
	}
	ctx.Export("servers", pulumi.ToStringArray(names))
	return nil
}

// TestFleetShardsThroughCLI: the fleet reads the stack's config through the
// real CLI, writes each shard's with `config set-all --json` (secrets stay
// secret), runs up on every shard, keeps servers where they are when the
// list changes, retires an emptied shard and refreshes the others.
func TestFleetShardsThroughCLI(t *testing.T) {
	f := newFleet(t)
	f.opts.Program = exportServers
	f.setServers(t, "r1", "s0", "s1", "s2", "s3", "s4")
	f.tools.CLI(t, f.proj, f.tools.Env(f.state), "config", "set", "--stack", "prod", "--secret", "worldbackup:clusters", `[{"name":"default"}]`)

	res := f.run(t, shard.OpUp)
	if len(res) != 3 || strings.Count(f.out.String(), "fleet: [") != 3 {
		t.Fatalf("%d shards, progress:\n%s\nwant 3 shards of at most 2 servers, a line each", len(res), f.out)
	}
	want := map[string][]string{"prod.shard-000": {"s0", "s1"}, "prod.shard-001": {"s2", "s3"}, "prod.shard-002": {"s4"}}
	if got := f.shards(t); !maps.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("shards %v, want %v", got, want)
	}
	b, err := os.ReadFile(filepath.Join(f.proj, shard.DefaultWorkDir, "Pulumi.prod.shard-000.yaml"))
	if err != nil || !strings.Contains(string(b), "secure:") || strings.Contains(string(b), `"name":"default"`) {
		t.Errorf("shard 0's stack file holds the secret in the clear or not at all:\n%s", b)
	}

	f.setServers(t, "r1", "s1", "s4", "s5")
	f.run(t, shard.OpUp)
	want = map[string][]string{"prod.shard-000": {"s1", "s5"}, "prod.shard-002": {"s4"}}
	if got := f.shards(t); !maps.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("after removing s0, s2, s3 and adding s5: shards %v, want %v (shard 1 retired, nobody moved)", got, want)
	}
	ws, err := auto.NewLocalWorkspace(t.Context(), auto.WorkDir(filepath.Join(f.proj, shard.DefaultWorkDir)),
		auto.Pulumi(f.opts.Pulumi), auto.PulumiHome(f.opts.PulumiHome), auto.EnvVars(f.opts.Env))
	if err != nil {
		t.Fatal(err)
	}
	st, err := auto.SelectStack(t.Context(), "prod.shard-002", ws)
	if err != nil {
		t.Fatal(err)
	}
	out, err := st.Outputs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(out["servers"].Value); got != "[s4]" {
		t.Errorf("shard 2 exports servers %s, want [s4]", got)
	}
	for _, r := range f.run(t, shard.OpRefresh) {
		if r.Changes["same"] == 0 {
			t.Errorf("refresh %s: changes %v, want the stack the same", r.Stack, r.Changes)
		}
	}
	stacks, err := ws.ListStacks(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stacks {
		if strings.HasSuffix(s.Name, "prod.shard-001") {
			t.Errorf("the emptied shard's stack %s is still in the backend", s.Name)
		}
	}
}

// TestSetConfigLongValue: a config value longer than one command-line
// argument may be (a list of 3000 servers, about 200 KB; Linux refuses an
// argument over 128 KiB) is written through stdin, the short ones in one
// set-all; the real CLI reads back every value as written, and the program
// parses the list.
func TestSetConfigLongValue(t *testing.T) {
	f := newFleet(t)
	var list []map[string]any
	for i := range 3000 {
		list = append(list, map[string]any{"name": fmt.Sprintf("srv-%04d", i), "schedule": "@daily-random"})
	}
	b, _ := json.Marshal(list)
	if len(b) <= 128<<10 {
		t.Fatalf("the list is %d bytes: too short to test the limit", len(b))
	}
	str := func(s string) *string { return &s }
	cfg := shard.Config{
		"worldbackup:image":       {Value: str("registry.example/worldbackup/archiver:test")},
		"worldbackup:backupClaim": {Value: str("backups")},
		"worldbackup:runId":       {Value: str("r1")},
		"worldbackup:servers":     {Value: str(string(b)), ObjectValue: list},
	}
	cmd := f.opts.Pulumi
	run := func(ctx context.Context, stdin io.Reader, args ...string) error {
		_, stderr, code, err := cmd.Run(ctx, f.proj, stdin, nil, nil, envList(f.tools.PulumiHome, f.tools.Env(f.state)), args...)
		if err != nil {
			return fmt.Errorf("exit %d: %w: %s", code, err, stderr)
		}
		return nil
	}
	if err := shard.SetConfig(t.Context(), run, "prod", cfg); err != nil {
		t.Fatal(err)
	}
	out := f.tools.CLI(t, f.proj, f.tools.Env(f.state), "config", "--stack", "prod", "--json")
	var got map[string]struct {
		Value string `json:"value"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("pulumi config --json: %v\n%.500s", err, out)
	}
	if got["worldbackup:servers"].Value != string(b) || got["worldbackup:runId"].Value != "r1" {
		t.Fatalf("read back: servers %d bytes (want %d), runId %q", len(got["worldbackup:servers"].Value), len(b), got["worldbackup:runId"].Value)
	}
	c, err := deploy.ParseConfig(func(key string) (string, bool) { v, ok := got[key]; return v.Value, ok }, nil)
	if err != nil || len(c.Servers) != 3000 {
		t.Fatalf("the program's config: %d servers, %v", len(c.Servers), err)
	}
}

// envList is env in the form exec takes, with PULUMI_HOME.
func envList(home string, env map[string]string) []string {
	l := []string{"PULUMI_HOME=" + home}
	for k, v := range env {
		l = append(l, k+"="+v)
	}
	return l
}

// TestFleetRenderSkipsUnchanged: in render mode an up whose shard has the
// config, stack file and program of its last successful up is skipped; a
// new runId, a changed secret, another program build or -force runs it.
func TestFleetRenderSkipsUnchanged(t *testing.T) {
	f := newFleet(t)
	f.opts.ProgramID = "build-1"
	f.setServers(t, "r1", "s0", "s1", "s2")
	clusters := func(ns string) {
		f.tools.CLI(t, f.proj, f.tools.Env(f.state), "config", "set", "--stack", "prod", "--secret", "worldbackup:clusters", `[{"name":"default","namespace":"`+ns+`"}]`)
	}
	clusters("default")
	skippedAll := func(t *testing.T, res []shard.Result, want bool) {
		t.Helper()
		for _, r := range res {
			if got := r.Changes[shard.Skipped] > 0; got != want {
				t.Errorf("%s: skipped %v, want %v (changes %v)", r.Stack, got, want, r.Changes)
			}
		}
	}
	skippedAll(t, f.run(t, shard.OpUp), false)
	if f.opts.Env["PULUMI_SKIP_CHECKPOINTS"] != "" {
		t.Fatal("Run changed the caller's environment map")
	}

	t.Run("unchanged: every shard skipped", func(t *testing.T) {
		skippedAll(t, f.run(t, shard.OpUp), true)
		if !strings.Contains(f.out.String(), "unchanged since its last up, skipped") {
			t.Errorf("progress:\n%s", f.out)
		}
	})
	t.Run("force runs every shard", func(t *testing.T) {
		o := f.opts
		o.Op, o.Force = shard.OpUp, true
		res, err := shard.Run(t.Context(), o)
		if err != nil {
			t.Fatal(err)
		}
		skippedAll(t, res, false)
		for _, r := range res {
			if r.Changes["same"] == 0 {
				t.Errorf("%s: changes %v, want all same", r.Stack, r.Changes)
			}
		}
	})
	t.Run("a new runId runs every shard", func(t *testing.T) {
		f.setServers(t, "r2", "s0", "s1", "s2")
		skippedAll(t, f.run(t, shard.OpUp), false)
		if got := f.rendered(t); !slices.Equal(got, []string{"s0", "s1", "s2"}) {
			t.Errorf("rendered %v", got)
		}
		skippedAll(t, f.run(t, shard.OpUp), true)
	})
	t.Run("a changed secret runs every shard", func(t *testing.T) {
		clusters("games")
		skippedAll(t, f.run(t, shard.OpUp), false)
		skippedAll(t, f.run(t, shard.OpUp), true)
	})
	t.Run("another program build runs every shard", func(t *testing.T) {
		f.opts.ProgramID = "build-2"
		skippedAll(t, f.run(t, shard.OpUp), false)
	})
	t.Run("a shard changed outside the fleet runs", func(t *testing.T) {
		f.tools.CLI(t, filepath.Join(f.proj, shard.DefaultWorkDir), f.tools.Env(f.state), "config", "set", "--stack", "prod.shard-000", "worldbackup:runId", "by-hand")
		for _, r := range f.run(t, shard.OpUp) {
			if want := r.Stack != "prod.shard-000"; (r.Changes[shard.Skipped] > 0) != want {
				t.Errorf("%s: skipped %v, want %v", r.Stack, !want, want)
			}
		}
	})
}

// TestFleetRenderRecoversAKilledUp: a shard whose CLI was killed without
// checkpoints (render mode) kept files its state does not know. The next
// up brings it up again with the killed run's config first, so removing a
// server then removes that server's files too. Simulated: an up adds s1,
// then the state from before it is imported back and the shard marked.
func TestFleetRenderRecoversAKilledUp(t *testing.T) {
	f := newFleet(t)
	work := filepath.Join(f.proj, shard.DefaultWorkDir)
	f.setServers(t, "r1", "s0")
	f.run(t, shard.OpUp)
	before := filepath.Join(t.TempDir(), "state.json")
	f.tools.CLI(t, work, f.tools.Env(f.state), "stack", "export", "--stack", "prod.shard-000", "--file", before)
	f.setServers(t, "r1", "s0", "s1")
	f.run(t, shard.OpUp)
	if got := f.rendered(t); !slices.Equal(got, []string{"s0", "s1"}) {
		t.Fatalf("rendered %v", got)
	}
	f.tools.CLI(t, work, f.tools.Env(f.state), "stack", "import", "--stack", "prod.shard-000", "--file", before)
	if err := os.WriteFile(filepath.Join(work, "prod.shard-000.unsaved"), nil, 0o644); err != nil {
		t.Fatal(err)
	}

	f.setServers(t, "r1", "s0")
	f.run(t, shard.OpUp)
	if !strings.Contains(f.out.String(), "killed before it saved its state") {
		t.Errorf("progress:\n%s\nwant the recovery said", f.out)
	}
	if got := f.rendered(t); !slices.Equal(got, []string{"s0"}) {
		t.Errorf("rendered %v after removing s1, want [s0]: the killed run's files are left", got)
	}
	if _, err := os.Stat(filepath.Join(work, "prod.shard-000.unsaved")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the mark is still there after a finished up: %v", err)
	}
}
