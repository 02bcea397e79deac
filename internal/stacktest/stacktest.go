// Package stacktest runs Pulumi programs in tests through the real Pulumi CLI
// and engine built by `make tools` (see internal/pulumitools). When the tools
// are missing, tests are skipped on a developer's machine and fail under
// CI=true, since a stack test that never runs proves nothing.
package stacktest

import (
	"errors"
	"github.com/worldbackup/worldbackup/internal/testenv"
	"os"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"github.com/worldbackup/worldbackup/internal/pulumitools"
)

// Tools wraps pulumitools.Tools with test-failing helpers.
type Tools struct{ pulumitools.Tools }

// Require finds the tools or skips (fails under CI=true).
func Require(t testing.TB) Tools {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := pulumitools.RepoRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := pulumitools.Find(root)
	switch {
	case errors.Is(err, pulumitools.ErrMissing):
		testenv.Require(t, false, err.Error(), "make tools")
	case err != nil:
		t.Fatal(err)
	}
	return Tools{tools}
}

// InlineStack creates a stack for program in temp folders, config set by path.
func (tt Tools) InlineStack(t testing.TB, stack string, program pulumi.RunFunc, config map[string]string) auto.Stack {
	t.Helper()
	s, err := tt.Tools.InlineStack(t.Context(), stack, program, t.TempDir(), t.TempDir(), config)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// ProjectStack is InlineStack with the project of projectDir/Pulumi.yaml
// (an example's own project) instead of the repository's.
func (tt Tools) ProjectStack(t testing.TB, projectDir, stack string, program pulumi.RunFunc, config map[string]string) auto.Stack {
	t.Helper()
	s, err := tt.Tools.ProjectStack(t.Context(), projectDir, stack, program, t.TempDir(), t.TempDir(), config)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// CLI runs the pulumi CLI in dir, failing the test on error.
func (tt Tools) CLI(t testing.TB, dir string, env map[string]string, args ...string) string {
	t.Helper()
	out, err := tt.Tools.CLI(t.Context(), dir, env, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return out
}

// SetConfig replaces the stack's config, keys taken as paths.
func SetConfig(t testing.TB, s auto.Stack, config map[string]string) {
	t.Helper()
	if err := pulumitools.SetConfig(t.Context(), s, config); err != nil {
		t.Fatal(err)
	}
}
