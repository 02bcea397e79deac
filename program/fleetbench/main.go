// Command fleetbench measures what a fleet costs in render mode (the real
// Pulumi CLI and Kubernetes provider from the tool cache, a file state
// backend): for each number of servers and each variant (backups only;
// each server with a schedule, retention and a prune), the same stack config
// run as one stack and through the fleet's shards (program/shard): preview,
// first up, up with nothing changed, up with a new runId. It prints a
// Markdown table of wall time, CPU (user+system of the CLI, plugins and
// this process), peak RSS of the whole process tree (sampled) and state
// size. `make bench` runs it with BENCH_FLEET=1 (scripts/bench-fleet.sh).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optpreview"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"

	"github.com/worldbackup/worldbackup/internal/pulumitools"
	"github.com/worldbackup/worldbackup/program/deploy"
	"github.com/worldbackup/worldbackup/program/shard"
)

func main() {
	serversFlag := flag.String("servers", "10 100 1000", "fleet sizes")
	variantsFlag := flag.String("variants", "backup full", "backup (backups only), full (each server with a schedule, retention and a prune)")
	single := flag.Int("single-max", 100, "run the one-stack baseline up to this many servers (it is quadratic)")
	size := flag.Int("size", shard.DefaultSize, "servers per shard")
	parallel := flag.Int("parallel", shard.DefaultParallel, "shards at once")
	flag.Parse()
	if err := run(context.Background(), strings.Fields(*serversFlag), strings.Fields(*variantsFlag), *single, *size, *parallel); err != nil {
		fmt.Fprintln(os.Stderr, "fleetbench:", err)
		os.Exit(1)
	}
}

type row struct {
	servers         int
	variant, mode   string
	resources       int
	preview, first  measure
	unchanged, next measure
	stateBytes      int64
}

type measure struct {
	wall, cpu time.Duration
	rss       int64 // peak RSS of the process tree, bytes
	err       error
}

func (m measure) String() string {
	if m.err != nil {
		return "failed: " + firstLine(m.err.Error())
	}
	return fmt.Sprintf("%.1f s (CPU %.0f s, %d MiB)", m.wall.Seconds(), m.cpu.Seconds(), m.rss>>20)
}

func run(ctx context.Context, sizes, variants []string, singleMax, size, parallel int) error {
	wd, _ := os.Getwd()
	root, err := pulumitools.RepoRoot(wd)
	if err != nil {
		return err
	}
	tools, err := pulumitools.Find(root)
	if err != nil {
		return err
	}
	fmt.Printf("fleetbench: render mode, file state backend, CLI %s; shards of %d servers, %d at once; CPUs %d\n",
		filepath.Join(tools.Bin, "pulumi"), size, parallel, runtime.NumCPU())
	var rows []row
	for _, s := range sizes {
		n, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("servers %q: %w", s, err)
		}
		for _, v := range variants {
			modes := []string{"fleet"}
			if n <= singleMax {
				modes = []string{"one stack", "fleet"}
			}
			for _, mode := range modes {
				r, err := bench(ctx, tools, n, v, mode, size, parallel)
				if err != nil {
					return err
				}
				fmt.Fprintf(os.Stderr, "fleetbench: %d %s %s: preview %s, first up %s, unchanged %s, new runId %s\n",
					n, v, mode, r.preview, r.first, r.unchanged, r.next)
				rows = append(rows, r)
			}
		}
	}
	fmt.Println()
	fmt.Println("| servers | variant | stacks | resources | `preview` | first `up` | `up` unchanged | `up` new runId | state |")
	fmt.Println("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, r := range rows {
		fmt.Printf("| %d | %s | %s | %d | %s | %s | %s | %s | %.1f MB |\n", r.servers, r.variant, r.mode, r.resources,
			r.preview, r.first, r.unchanged, r.next, float64(r.stateBytes)/1e6)
	}
	return nil
}

// config is the stack config of n servers of variant v, rendered into dir.
func config(n int, v, renderDir, runID string) map[string]any {
	var servers []map[string]any
	for i := range n {
		s := map[string]any{"name": fmt.Sprintf("srv-%04d", i)}
		if v == "full" {
			s["schedule"] = "@daily-random"
			s["prune"] = map[string]any{"runId": "p1", "keepDaily": 7, "minKeep": 3}
		}
		servers = append(servers, s)
	}
	c := map[string]any{
		"worldbackup:image":       "registry.example/worldbackup/archiver:bench",
		"worldbackup:backupClaim": "backups",
		"worldbackup:runId":       runID,
		"worldbackup:renderDir":   renderDir,
		"worldbackup:servers":     servers,
	}
	if v == "full" {
		c["worldbackup:retention"] = map[string]any{"keepDaily": 7, "keepWeekly": 4, "minKeep": 3}
	}
	return c
}

// setAll writes c as the stack's config (shard.SetConfig: a value too long
// for the command line goes through stdin).
func setAll(ctx context.Context, tools pulumitools.Tools, dir, stateDir, stack string, c map[string]any) error {
	j := shard.Config{}
	for k, v := range c {
		if s, ok := v.(string); ok {
			j[k] = shard.Value{Value: &s}
			continue
		}
		b, _ := json.Marshal(v)
		s := string(b)
		j[k] = shard.Value{Value: &s, ObjectValue: v}
	}
	return shard.SetConfig(ctx, func(ctx context.Context, stdin io.Reader, args ...string) error {
		_, err := tools.CLIWithInput(ctx, dir, tools.Env(stateDir), stdin, args...)
		return err
	}, stack, j)
}

func bench(ctx context.Context, tools pulumitools.Tools, n int, variant, mode string, size, parallel int) (row, error) {
	tmp, err := os.MkdirTemp("", "fleetbench-")
	if err != nil {
		return row{}, err
	}
	defer os.RemoveAll(tmp)
	proj, state, render := filepath.Join(tmp, "project"), filepath.Join(tmp, "state"), filepath.Join(tmp, "render")
	for _, d := range []string{proj, state, render} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return row{}, err
		}
	}
	b, err := os.ReadFile(filepath.Join(tools.Root, "Pulumi.yaml"))
	if err != nil {
		return row{}, err
	}
	if err := os.WriteFile(filepath.Join(proj, "Pulumi.yaml"), b, 0o644); err != nil {
		return row{}, err
	}
	r := row{servers: n, variant: variant, mode: mode}
	env := tools.Env(state)
	var op func(kind, runID string) error
	if mode == "one stack" {
		s, err := tools.ProjectStack(ctx, proj, "bench", deploy.Program, proj, state, nil)
		if err != nil {
			return row{}, err
		}
		op = func(kind, runID string) error {
			if err := setAll(ctx, tools, proj, state, "bench", config(n, variant, render, runID)); err != nil {
				return err
			}
			if kind == "preview" {
				_, err := s.Preview(ctx, optpreview.ProgressStreams(io.Discard))
				return err
			}
			_, err := s.Up(ctx, optup.ProgressStreams(io.Discard))
			return err
		}
	} else {
		if _, err := tools.CLI(ctx, proj, env, "stack", "init", "bench"); err != nil {
			return row{}, err
		}
		cmd, err := auto.NewPulumiCommand(&auto.PulumiCommandOptions{Root: filepath.Dir(tools.Bin), SkipVersionCheck: true})
		if err != nil {
			return row{}, err
		}
		id, err := shard.ExecutableID()
		if err != nil {
			return row{}, err
		}
		op = func(kind, runID string) error {
			if err := setAll(ctx, tools, proj, state, "bench", config(n, variant, render, runID)); err != nil {
				return err
			}
			o := shard.Options{ProjectDir: proj, Stack: "bench", Op: kind, Size: size, Parallel: parallel,
				Program: deploy.Program, Pulumi: cmd, PulumiHome: tools.PulumiHome, Env: env, Out: io.Discard, ProgramID: id}
			_, err := shard.Run(ctx, o)
			return err
		}
	}
	r.preview = timed(func() error { return op("preview", "r1") })
	r.first = timed(func() error { return op("up", "r1") })
	r.unchanged = timed(func() error { return op("up", "r1") })
	r.next = timed(func() error { return op("up", "r2") })
	r.resources, r.stateBytes = stateOf(state)
	return r, nil
}

// stateOf counts the resources in the stacks' current state files and
// their bytes (not history or backups).
func stateOf(stateDir string) (int, int64) {
	var res int
	var bytes int64
	filepath.WalkDir(filepath.Join(stateDir, ".pulumi", "stacks"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".json") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		bytes += int64(len(b))
		var st struct {
			Checkpoint struct {
				Latest struct {
					Resources []struct {
						Type string `json:"type"`
					} `json:"resources"`
				} `json:"latest"`
			} `json:"checkpoint"`
		}
		if json.Unmarshal(b, &st) == nil {
			for _, r := range st.Checkpoint.Latest.Resources {
				if !strings.HasPrefix(r.Type, "pulumi:") { // not the stack nor providers
					res++
				}
			}
		}
		return nil
	})
	return res, bytes
}

// timed runs f, measuring wall time, the CPU of this process and of its
// waited-for children, and the peak RSS of this process and all its
// descendants (sampled every 100 ms from /proc).
func timed(f func() error) measure {
	var before, cbefore syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &cbefore)
	stop := make(chan struct{})
	var peak int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			peak = max(peak, treeRSS(os.Getpid()))
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	t0 := time.Now()
	err := f()
	wall := time.Since(t0)
	close(stop)
	wg.Wait()
	var after, cafter syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &cafter)
	cpu := tv(after.Utime) + tv(after.Stime) - tv(before.Utime) - tv(before.Stime) +
		tv(cafter.Utime) + tv(cafter.Stime) - tv(cbefore.Utime) - tv(cbefore.Stime)
	return measure{wall: wall, cpu: cpu, rss: peak, err: err}
}

func tv(t syscall.Timeval) time.Duration {
	return time.Duration(t.Sec)*time.Second + time.Duration(t.Usec)*time.Microsecond
}

// treeRSS sums the resident memory of pid and its descendants.
func treeRSS(pid int) int64 {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	parent := map[int]int{}
	rss := map[int]int64{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(f) < 22 {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		pages, _ := strconv.ParseInt(f[21], 10, 64)
		parent[p], rss[p] = pp, pages*int64(os.Getpagesize())
	}
	var total int64
	for p := range rss {
		for q := p; q > 1; q = parent[q] {
			if q == pid {
				total += rss[p]
				break
			}
		}
	}
	return total
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
