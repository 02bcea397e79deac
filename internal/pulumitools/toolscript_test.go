package pulumitools

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// script runs bash -c body in the repository root with env added, and
// returns its stdout. The tool cache library is sourced first.
func script(t *testing.T, env []string, body string) (string, error) {
	t.Helper()
	root := repoRoot(t)
	cmd := exec.CommandContext(t.Context(), "bash", "-c", "set -euo pipefail; . scripts/lib/toolcache.sh; "+body)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Logf("stderr:\n%s", stderr.String())
	}
	return strings.TrimSpace(string(out)), err
}

// TestModdirDownloadsIntoAnEmptyModuleCache is the fresh-machine failure:
// asking for a tool module's folder with an empty GOMODCACHE must download
// it, not print an empty path.
func TestModdirDownloadsIntoAnEmptyModuleCache(t *testing.T) {
	modcache := t.TempDir()
	root := repoRoot(t)
	cmd := exec.CommandContext(t.Context(), "bash", "scripts/tools.sh", "moddir", "tools/pulumi-yaml", "github.com/pulumi/pulumi-yaml")
	cmd.Dir = root
	// -modcacherw: the module cache is writable, so t.TempDir can remove it.
	cmd.Env = append(os.Environ(), "GOMODCACHE="+modcache, "GOFLAGS=-modcacherw")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tools.sh moddir: %v\n%s", err, err.(*exec.ExitError).Stderr)
	}
	dir := strings.TrimSpace(string(out))
	if !strings.HasPrefix(dir, modcache+string(filepath.Separator)) {
		t.Fatalf("moddir printed %q, want a folder inside the empty module cache %s", dir, modcache)
	}
	if _, err := os.Stat(filepath.Join(dir, "cmd", "pulumi-language-yaml")); err != nil {
		t.Fatalf("the downloaded module has no cmd/pulumi-language-yaml: %v", err)
	}
}

// TestToolModulesAligned: the Kubernetes plugin's and the YAML host's
// modules compile each module they share with the CLI at the CLI's version
// or a newer one (scripts/tools.sh align), so those packages compile once,
// for the CLI, and a cold build of the tools does not compile them twice.
// A version changed without `scripts/tools.sh align` fails here.
func TestToolModulesAligned(t *testing.T) {
	cmd := exec.CommandContext(t.Context(), "bash", "scripts/tools.sh", "align", "check")
	cmd.Dir = repoRoot(t)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/tools.sh align check: %v\n%s\n(run scripts/tools.sh align after changing a tool's version)", err, out)
	}
	if n := strings.Count(string(out), "aligned with tools/pulumi-cli"); n != 2 {
		t.Fatalf("align check reported %d aligned modules, want 2:\n%s", n, out)
	}
}

func TestModver(t *testing.T) {
	got, err := script(t, nil, "modver tools/pulumi-yaml/go.mod github.com/pulumi/pulumi-yaml; modver go.mod github.com/pulumi/pulumi-kubernetes/sdk/v4")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(got, "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "v1.") || !strings.HasPrefix(lines[1], "v4.") {
		t.Fatalf("modver printed %q, want the pinned pulumi-yaml v1.x and pulumi-kubernetes sdk v4.x", got)
	}
}

// TestToolBuild: an entry appears only when its build succeeded, is keyed
// by name, version and Go version, and is never built twice.
func TestToolBuild(t *testing.T) {
	cache := t.TempDir()
	env := []string{"WB_TOOL_CACHE=" + cache}
	count := filepath.Join(t.TempDir(), "count")
	builders := `
good() { echo x >> ` + count + `; echo built > "$out/tool"; }
bad() { echo partial > "$out/tool"; return 1; }
`
	if _, err := script(t, env, builders+"tool_build demo 1.0 bad"); err == nil {
		t.Fatal("a failing build was reported as built")
	}
	if ents, _ := os.ReadDir(cache); len(ents) != 1 || ents[0].Name() != ".lock" {
		t.Fatalf("a failed build left %v in the cache, want only the lock", names(ents))
	}
	dir, err := script(t, env, builders+"tool_build demo 1.0 good")
	if err != nil {
		t.Fatal(err)
	}
	gover, _ := exec.Command("go", "env", "GOVERSION").Output()
	if want := filepath.Join(cache, "demo-1.0-"+strings.TrimSpace(string(gover))); dir != want {
		t.Fatalf("entry %q, want %q", dir, want)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "tool")); err != nil || string(b) != "built\n" {
		t.Fatalf("entry holds %q, %v", b, err)
	}
	again, err := script(t, env, builders+"tool_build demo 1.0 good")
	if err != nil || again != dir {
		t.Fatalf("second call: %q, %v; want %q", again, err, dir)
	}
	if b, _ := os.ReadFile(count); string(b) != "x\n" {
		t.Fatalf("the good builder ran %d times, want once", strings.Count(string(b), "x"))
	}
	if other, _ := script(t, env, builders+"tool_dir demo 2.0"); other == dir {
		t.Fatal("another version maps to the same entry")
	}
}

// TestToolPrefetch: tool_prefetch downloads a tools module's modules when
// one of the entries it names is not built, and does nothing when all are
// (a machine with its tools built downloads nothing for them). go is a shell
// function here that records what it is asked.
func TestToolPrefetch(t *testing.T) {
	cache := t.TempDir()
	calls := filepath.Join(t.TempDir(), "calls")
	fake := `go() { if [ "$1" = env ]; then echo go9.9; else echo "${PWD##*/} $*" >> ` + calls + `; fi; }
mkdir -p "$WB_TOOL_CACHE/built-1.0-go9.9" "$WB_TOOL_CACHE/other-2.0-go9.9"
`
	for _, tc := range []struct {
		name, call, want string
	}{
		{"every entry built: nothing", "tool_prefetch tools/pulumi-yaml built 1.0 other 2.0", ""},
		{"the entry missing: its modules", "tool_prefetch tools/pulumi-yaml missing 1.0", "pulumi-yaml mod download\n"},
		{"another version of a built tool: its modules", "tool_prefetch tools/versitygw built 1.1", "versitygw mod download\n"},
		{"one of two missing: the modules once", "tool_prefetch tools/prometheus built 1.0 missing 2.0", "prometheus mod download\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(calls)
			if _, err := script(t, []string{"WB_TOOL_CACHE=" + cache}, fake+tc.call); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(calls)
			if string(got) != tc.want {
				t.Fatalf("go was asked %q, want %q", got, tc.want)
			}
		})
	}
}

// TestToolBuildKilled: a build killed with SIGKILL halfway leaves no entry,
// and the next build removes its temp folder and builds.
func TestToolBuildKilled(t *testing.T) {
	cache := t.TempDir()
	started := filepath.Join(t.TempDir(), "started")
	root := repoRoot(t)
	cmd := exec.Command("bash", "-c", `. scripts/lib/toolcache.sh
slow() { echo partial > "$out/tool"; touch `+started+`; sleep 60; }
tool_build demo 1.0 slow`)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "WB_TOOL_CACHE="+cache)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(started); err == nil {
			break
		}
		if time.Now().After(deadline) {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			t.Fatal("the build never started")
		}
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	cmd.Wait()

	dir, err := script(t, []string{"WB_TOOL_CACHE=" + cache}, "tool_dir demo 1.0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("a killed build left the entry %s: %v", dir, err)
	}
	if _, err := script(t, []string{"WB_TOOL_CACHE=" + cache}, `good() { echo built > "$out/tool"; }; tool_build demo 1.0 good`); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(cache)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp.") {
			t.Errorf("the killed build's temp folder %s is still there", e.Name())
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "tool")); err != nil || string(b) != "built\n" {
		t.Fatalf("rebuilt entry holds %q, %v", b, err)
	}
}

func names(ents []os.DirEntry) []string {
	var n []string
	for _, e := range ents {
		n = append(n, e.Name())
	}
	return n
}

func repoRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := RepoRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	return root
}
