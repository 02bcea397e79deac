// Command fleet runs the worldbackup program (program/deploy) over a large
// fleet: it shards the servers of one stack's config into stacks of at most
// -size servers (program/shard) and runs preview, up, refresh or destroy on
// them, -parallel at a time, with a line per stack. The stack's config is
// the only one written by hand; the shards' config is derived from it.
//
//	go run ./program/fleet -stack prod up
//	go run ./program/fleet -stack prod -config worldbackup:runId=nightly-2026-12-02 up
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"

	"github.com/worldbackup/worldbackup/program/deploy"
	"github.com/worldbackup/worldbackup/program/shard"
	"github.com/worldbackup/worldbackup/provider"
)

type configFlag map[string]string

func (c configFlag) String() string { return fmt.Sprint(map[string]string(c)) }
func (c configFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q: want key=value, e.g. worldbackup:runId=nightly-1", s)
	}
	c[k] = v
	return nil
}

func main() {
	o := shard.Options{Config: configFlag{}, Program: deploy.SharedProgram(&provider.Gates{}), Env: map[string]string{}}
	flag.StringVar(&o.Stack, "stack", "", "the stack whose config lists the servers (required)")
	flag.StringVar(&o.ProjectDir, "project", ".", "the folder of Pulumi.yaml")
	flag.StringVar(&o.WorkDir, "work-dir", "", "where the shards' stack files and logs live (default <project>/"+shard.DefaultWorkDir+")")
	flag.IntVar(&o.Size, "size", shard.DefaultSize, "servers per shard")
	flag.IntVar(&o.Parallel, "parallel", shard.DefaultParallel, "shards run at once")
	flag.Var(configFlag(o.Config), "config", "key=value replacing the stack's value in every shard (repeatable)")
	flag.BoolVar(&o.Force, "force", false, "render mode: run every shard, also one unchanged since its last up")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: fleet -stack <stack> [flags] preview|up|refresh|destroy\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	o.Op = flag.Arg(0)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o shard.Options) error {
	abs, err := filepath.Abs(o.ProjectDir)
	if err != nil {
		return err
	}
	o.ProjectDir = abs
	cmd, err := auto.NewPulumiCommand(&auto.PulumiCommandOptions{SkipVersionCheck: true})
	if err != nil {
		return fmt.Errorf("finding the Pulumi CLI: %w", err)
	}
	o.Pulumi = cmd
	if o.ProgramID, err = shard.ExecutableID(); err != nil {
		return fmt.Errorf("identifying the program's build: %w", err)
	}
	o.PulumiHome = os.Getenv("PULUMI_HOME")
	results, err := shard.Run(ctx, o)
	for _, r := range results {
		if r.Err != nil && r.Log != "" {
			fmt.Fprintf(os.Stderr, "--- %s ---\n%s\n", r.Stack, r.Log)
		}
	}
	return err
}
