package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/worldbackup/worldbackup/internal/stacktest"
	"github.com/worldbackup/worldbackup/internal/testenv"
)

// This file holds the harness of the tests that run Pulumi YAML programs
// using the plugin as a user does: the real Pulumi CLI, the YAML language
// host, the Kubernetes provider and this plugin built from the checkout.

// yamlProject is a Pulumi YAML project with one stack, test, on a file
// backend of its own.
type yamlProject struct {
	t     *testing.T
	tools stacktest.Tools
	dir   string
	env   map[string]string
}

// pluginBuild is the plugin built once per test binary.
var pluginBuild = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "wb-plugin-")
	if err != nil {
		return "", err
	}
	out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "pulumi-resource-worldbackup"), ".").CombinedOutput()
	if err != nil {
		return "", &buildError{err, string(out)}
	}
	return dir, nil
})

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return "building the plugin: " + e.err.Error() + "\n" + e.out }

// newYAMLProject writes a project whose Pulumi.yaml is the plugin's
// declaration followed by body (config, resources, outputs), and inits its
// stack; env is added to every command's environment (e.g. KUBECONFIG).
func newYAMLProject(t *testing.T, body string, env map[string]string) *yamlProject {
	t.Helper()
	tools := stacktest.Require(t)
	host := filepath.Join(tools.Bin, "pulumi-language-yaml")
	_, err := os.Stat(host)
	testenv.Require(t, err == nil, "no YAML language host at "+host, "make tools")
	plugin, err := pluginBuild()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	project := "name: wb-cli-test\nruntime: yaml\nplugins:\n  providers:\n    - name: worldbackup\n      path: " + plugin + "\n" + body
	if err := os.WriteFile(filepath.Join(dir, "Pulumi.yaml"), []byte(project), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &yamlProject{t: t, tools: tools, dir: dir, env: tools.Env(t.TempDir())}
	for k, v := range env {
		p.env[k] = v
	}
	p.must("stack", "init", "test")
	return p
}

// run runs the CLI in the project, returning its output and error.
func (p *yamlProject) run(args ...string) (string, error) {
	p.t.Helper()
	return p.tools.Tools.CLI(p.t.Context(), p.dir, p.env, args...)
}

// must runs the CLI, failing the test on error.
func (p *yamlProject) must(args ...string) string {
	p.t.Helper()
	out, err := p.run(args...)
	if err != nil {
		p.t.Fatalf("pulumi %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// fails runs the CLI, which must fail, and returns its output.
func (p *yamlProject) fails(args ...string) string {
	p.t.Helper()
	out, err := p.run(args...)
	if err == nil {
		p.t.Fatalf("pulumi %s succeeded, want a failure:\n%s", strings.Join(args, " "), out)
	}
	return out
}

// refusingKubeconfig writes a kubeconfig whose server is a loopback port
// nothing listens on (a cluster that refuses every connection).
func refusingKubeconfig(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return writeKubeconfig(t, "refusing", "http://"+addr)
}

// writeKubeconfig writes a kubeconfig with one context, name, on server.
func writeKubeconfig(t *testing.T, name, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name+".yaml")
	if err := os.WriteFile(path, []byte(kubeconfigText(name, server)), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func kubeconfigText(name, server string) string {
	return "apiVersion: v1\nkind: Config\nclusters:\n- name: " + name + "\n  cluster: {server: \"" + server + "\"}\n" +
		"users:\n- name: " + name + "\n  user: {token: t}\ncontexts:\n- name: " + name + "\n  context: {cluster: " + name + ", user: " + name + "}\n" +
		"current-context: " + name + "\n"
}
