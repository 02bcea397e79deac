// Package extest runs the examples' Go programs in tests: inline, through the
// Automation API with the real Pulumi CLI, engine and Kubernetes provider that
// internal/stacktest finds, and with each example's own Pulumi.yaml as the
// project, so its config block (types and defaults) applies as it does for
// `pulumi up` in that folder.
package extest

import (
	"path/filepath"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/common/workspace"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/worldbackup/worldbackup/internal/pulumitools"
	"github.com/worldbackup/worldbackup/internal/stacktest"
)

// InlineStack creates stack for program with the project of
// projectDir/Pulumi.yaml, its state and work folders in temp folders, and
// sets config (keys taken as paths, e.g. "proj:servers[0]").
func InlineStack(t testing.TB, tools stacktest.Tools, projectDir, stack string, program pulumi.RunFunc, config map[string]string) auto.Stack {
	t.Helper()
	proj, err := workspace.LoadProject(filepath.Join(projectDir, "Pulumi.yaml"))
	if err != nil {
		t.Fatalf("loading the example's Pulumi.yaml: %v", err)
	}
	proj.Main = "" // an inline program has no program folder
	cmd, err := auto.NewPulumiCommand(&auto.PulumiCommandOptions{Root: filepath.Dir(tools.Bin), SkipVersionCheck: true})
	if err != nil {
		t.Fatalf("finding the Pulumi CLI: %v", err)
	}
	s, err := auto.UpsertStackInlineSource(t.Context(), stack, string(proj.Name), program,
		auto.Project(*proj), auto.WorkDir(t.TempDir()), auto.Pulumi(cmd),
		auto.PulumiHome(tools.PulumiHome), auto.EnvVars(tools.Env(t.TempDir())))
	if err != nil {
		t.Fatalf("creating stack %s: %v", stack, err)
	}
	if err := pulumitools.SetConfig(t.Context(), s, config); err != nil {
		t.Fatal(err)
	}
	return s
}
