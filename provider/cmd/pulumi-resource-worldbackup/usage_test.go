package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"sigs.k8s.io/yaml"
)

// backupProps are the required inputs of a WorldBackup in YAML.
const backupProps = `      server: survival
      runId: r1
      image: registry.example/worldbackup/archiver:test
      backupClaimName: world-backups
`

// TestRenderModeByItself runs a YAML program whose Kubernetes provider
// renders (an explicit provider's renderYamlToDirectory, or the default
// provider's kubernetes:renderYamlToDirectory config), with a backup that
// sets neither preflight nor replaceUnready and an ambient kubeconfig that
// refuses: neither preview nor up says a word about a preflight or a
// kubeconfig, and the rendered Job has no pulumi.com/replaceUnready.
func TestRenderModeByItself(t *testing.T) {
	tests := []struct {
		name, body string
		config     [][2]string
	}{
		{name: "explicit provider", body: `resources:
  cluster:
    type: pulumi:providers:kubernetes
    properties:
      renderYamlToDirectory: rendered
  backup:
    type: worldbackup:WorldBackup
    properties:
` + backupProps + `    options:
      providers:
        - ${cluster}
outputs:
  jobName: ${backup.jobName}
`},
		{name: "default provider", config: [][2]string{{"kubernetes:renderYamlToDirectory", "rendered"}}, body: `resources:
  backup:
    type: worldbackup:WorldBackup
    properties:
` + backupProps + `outputs:
  jobName: ${backup.jobName}
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newYAMLProject(t, tt.body, map[string]string{"KUBECONFIG": refusingKubeconfig(t)})
			for _, kv := range tt.config {
				p.must("config", "set", kv[0], kv[1])
			}
			for _, cmd := range [][]string{{"preview"}, {"up", "--yes"}} {
				out := withoutHostNotice(p.must(cmd...))
				for _, word := range []string{"preflight", "kubeconfig", "warning:"} {
					if strings.Contains(strings.ToLower(out), word) {
						t.Fatalf("pulumi %s says %q:\n%s", cmd[0], word, out)
					}
				}
			}
			jobName := strings.TrimSpace(p.must("stack", "output", "jobName"))
			job := readManifest(t, filepath.Join(p.dir, "rendered", "1-manifest", "batch_v1-job-minecraft-"+jobName+".yaml"))
			if _, ok := job.Metadata.Annotations["pulumi.com/replaceUnready"]; ok {
				t.Fatalf("the rendered Job is annotated pulumi.com/replaceUnready: %v", job.Metadata.Annotations)
			}
			if job.Metadata.Annotations["worldbackup.dev/run-id"] != "r1" {
				t.Fatalf("rendered Job annotations %v: not the backup's Job", job.Metadata.Annotations)
			}
		})
	}
}

// manifest is the part of a rendered object the tests read.
type manifest struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name        string            `json:"name"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec map[string]any `json:"spec"`
}

func readManifest(t *testing.T, path string) manifest {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

// fakeCluster is a loopback API server that answers discovery (so the
// Kubernetes provider configures against it) and 404 to everything else,
// recording the paths asked: a cluster where nothing the Job needs exists.
func fakeCluster(t *testing.T) (url string, asked func() []string) {
	t.Helper()
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/version":
			fmt.Fprint(w, `{"major":"1","minor":"34","gitVersion":"v1.34.4"}`)
		case "/api":
			fmt.Fprint(w, `{"kind":"APIVersions","versions":["v1"]}`)
		case "/apis":
			fmt.Fprint(w, `{"kind":"APIGroupList","apiVersion":"v1","groups":[]}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(paths)
	}
}

// TestPreflightUsesTheProvidersCluster runs a YAML program whose ambient
// kubeconfig refuses, with a Kubernetes provider whose kubeconfig (a path,
// with a context that is not its current one; or the contents, a secret)
// names a cluster where the namespace is missing: preview fails with the
// preflight's list of what that cluster lacks, asked of that cluster, not a
// warning that the ambient one cannot be reached.
func TestPreflightUsesTheProvidersCluster(t *testing.T) {
	for _, secret := range []bool{false, true} {
		t.Run(map[bool]string{false: "kubeconfig path and context", true: "secret kubeconfig contents"}[secret], func(t *testing.T) {
			url, asked := fakeCluster(t)
			refusing := refusingKubeconfig(t)
			good := kubeconfigText("good", url)
			p := newYAMLProject(t, `config:
  kubeconfig:
    type: string
  context:
    type: string
resources:
  cluster:
    type: pulumi:providers:kubernetes
    properties:
      kubeconfig: ${kubeconfig}
      context: ${context}
  backup:
    type: worldbackup:WorldBackup
    properties:
`+backupProps+`    options:
      providers:
        - ${cluster}
`, map[string]string{"KUBECONFIG": refusing})
			if secret {
				p.must("config", "set", "--secret", "kubeconfig", good)
				p.must("config", "set", "context", "good")
			} else {
				// Two contexts: the current one refuses, good is the cluster.
				b, err := os.ReadFile(refusing)
				if err != nil {
					t.Fatal(err)
				}
				two := strings.Replace(string(b), "contexts:\n", "contexts:\n- name: good\n  context: {cluster: good, user: refusing}\n", 1)
				two = strings.Replace(two, "clusters:\n", "clusters:\n- name: good\n  cluster: {server: \""+url+"\"}\n", 1)
				path := filepath.Join(t.TempDir(), "provider.yaml")
				if err := os.WriteFile(path, []byte(two), 0o600); err != nil {
					t.Fatal(err)
				}
				p.must("config", "set", "kubeconfig", path)
				p.must("config", "set", "context", "good")
			}
			out := p.fails("preview")
			for _, want := range []string{"the cluster lacks what Job", "kubectl create namespace minecraft"} {
				if !strings.Contains(out, want) {
					t.Fatalf("preview does not say %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, "ambient kubeconfig") || strings.Contains(out, "connection refused") {
				t.Fatalf("preview asked the ambient cluster:\n%s", out)
			}
			if !slices.Contains(asked(), "/api/v1/namespaces/minecraft") {
				t.Fatalf("the provider's cluster was asked %v, not for the namespace", asked())
			}
		})
	}
}

// renderedBackup is a YAML program's render provider and a backup rendered
// by it.
const renderedBackup = `resources:
  render:
    type: pulumi:providers:kubernetes
    properties:
      renderYamlToDirectory: rendered
  backup:
    type: worldbackup:WorldBackup
    properties:
` + backupProps + `    options:
      providers:
        - ${render}
`

// restoreOf is a restore of the backup's archive, its sha256 as given, with
// the Kubernetes provider provider.
func restoreOf(sha256, provider string) string {
	return `  restore:
    type: worldbackup:WorldRestore
    properties:
      server: survival
      runId: restore-1
      image: registry.example/worldbackup/archiver:test
      backupClaimName: world-backups
      archiveRef: ${backup.archiveRef}
      sha256: ` + sha256 + `
    options:
      providers:
        - ${` + provider + `}
`
}

const recordedSHA256 = "5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e"

// TestRestoreFromBackupOutputs declares, through the plugin, a restore from
// a rendered backup's outputs:
//   - with the backup's sha256 (empty: no cluster ran it), preview fails
//     naming sha256 and why, in one message;
//   - with its archiveRef and a recorded checksum, up renders the restore's
//     Job, which depends on the backup;
//   - with a recorded checksum and a cluster that lacks the namespace,
//     `up --skip-preview` (the inputs resolve at up, after the backup) fails
//     with the preflight's message once, with no "marshaling properties"
//     layers, and leaves no restore in the stack.
func TestRestoreFromBackupOutputs(t *testing.T) {
	t.Run("the backup's sha256", func(t *testing.T) {
		p := newYAMLProject(t, renderedBackup+restoreOf("${backup.sha256}", "render"), nil)
		out := p.fails("preview")
		for _, want := range []string{"sha256 is empty, and it is another resource's output", "renders"} {
			if !strings.Contains(out, want) {
				t.Fatalf("preview does not say %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, "sha256 is required") || strings.Contains(out, "marshaling properties") {
			t.Fatalf("preview says more than why:\n%s", out)
		}
	})
	t.Run("a recorded checksum, rendered", func(t *testing.T) {
		p := newYAMLProject(t, renderedBackup+restoreOf(recordedSHA256, "render"), nil)
		p.must("up", "--yes")
		var state struct {
			Deployment struct {
				Resources []struct {
					URN          string   `json:"urn"`
					Type         string   `json:"type"`
					Dependencies []string `json:"dependencies"`
				} `json:"resources"`
			} `json:"deployment"`
		}
		if err := json.Unmarshal([]byte(p.must("stack", "export")), &state); err != nil {
			t.Fatal(err)
		}
		var backup, restoreJob []string
		for _, r := range state.Deployment.Resources {
			switch {
			case r.Type == "worldbackup:index:WorldBackup" || strings.HasSuffix(r.URN, "::backup-job"):
				backup = append(backup, r.URN)
			case strings.HasSuffix(r.URN, "::restore-job"):
				restoreJob = r.Dependencies
			}
		}
		if len(backup) != 2 || restoreJob == nil {
			t.Fatalf("state has backup %v and restore Job dependencies %v", backup, restoreJob)
		}
		if !slices.ContainsFunc(restoreJob, func(u string) bool { return slices.Contains(backup, u) }) {
			t.Fatalf("the restore's Job depends on %v, none of the backup's %v", restoreJob, backup)
		}
	})
	t.Run("a cluster that lacks the namespace, at up", func(t *testing.T) {
		url, _ := fakeCluster(t)
		body := strings.Replace(renderedBackup, "resources:\n", "resources:\n  cluster:\n    type: pulumi:providers:kubernetes\n"+
			"    properties:\n      kubeconfig: "+strconvQuote(kubeconfigText("good", url))+"\n", 1)
		p := newYAMLProject(t, body+restoreOf(recordedSHA256, "cluster"), map[string]string{"KUBECONFIG": refusingKubeconfig(t)})
		out := p.fails("up", "--yes", "--skip-preview")
		if n := strings.Count(out, "kubectl create namespace minecraft"); n != 1 {
			t.Fatalf("up names the missing namespace %d times, want once:\n%s", n, out)
		}
		if !strings.Contains(out, "found at up") || strings.Contains(out, "marshaling properties") {
			t.Fatalf("up does not fail with the preflight's message alone:\n%s", out)
		}
		if state := p.must("stack", "export"); strings.Contains(state, "WorldRestore") {
			t.Fatalf("the failed restore is in the stack:\n%s", state)
		}
	})
}

// strconvQuote quotes s as a YAML (JSON) string.
func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestYAMLValuesAsMeant runs a YAML program that writes values as YAML
// users do: runId: 20261201 (a number), a label value 1, and rcon from a
// stack config string '{}': up renders the Job they obviously mean. (A
// string for a whole number or for a list, which the plugin also takes from
// other languages, the YAML host's own type check refuses before the plugin
// sees it: TestConstructTakesWhatIsMeant covers those.)
func TestYAMLValuesAsMeant(t *testing.T) {
	p := newYAMLProject(t, `config:
  rcon:
    type: string
resources:
  render:
    type: pulumi:providers:kubernetes
    properties:
      renderYamlToDirectory: rendered
  backup:
    type: worldbackup:WorldBackup
    properties:
      server: survival
      runId: 20261201
      image: registry.example/worldbackup/archiver:test
      backupClaimName: world-backups
      labels:
        tier: 1
      rcon: ${rcon}
    options:
      providers:
        - ${render}
outputs:
  jobName: ${backup.jobName}
  runId: ${backup.runId}
`, nil)
	p.must("config", "set", "rcon", "{}")
	p.must("up", "--yes")
	if got := strings.TrimSpace(p.must("stack", "output", "runId")); got != "20261201" {
		t.Fatalf("runId output %q, want 20261201", got)
	}
	jobName := strings.TrimSpace(p.must("stack", "output", "jobName"))
	job := readManifest(t, filepath.Join(p.dir, "rendered", "1-manifest", "batch_v1-job-minecraft-"+jobName+".yaml"))
	b, err := json.Marshal(job.Spec)
	if err != nil {
		t.Fatal(err)
	}
	spec := string(b)
	for _, want := range []string{`"tier":"1"`, `"--run-id","20261201"`, "survival-rcon"} {
		if !strings.Contains(spec, want) {
			t.Errorf("the rendered Job's spec lacks %s:\n%s", want, spec)
		}
	}
}

// TestYAMLProblemsAllAtOnce runs a YAML program with several mistakes at
// once (deadline: 30, a number without its unit; server from another
// resource's output, where a plain value is needed; a missing image; an
// invalid memoryLimit): preview fails with one message naming each input
// and its fix, in the component's words, not Go's.
func TestYAMLProblemsAllAtOnce(t *testing.T) {
	p := newYAMLProject(t, `resources:
  render:
    type: pulumi:providers:kubernetes
    properties:
      renderYamlToDirectory: rendered
  names:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata:
        name: survival
        namespace: minecraft
    options:
      provider: ${render}
  backup:
    type: worldbackup:WorldBackup
    properties:
      server: ${names.metadata.name}
      runId: 20261201
      image: registry.example/worldbackup/archiver:test
      backupClaimName: world-backups
      deadline: 30
      memoryLimit: lots
    options:
      providers:
        - ${render}
`, nil)
	out := p.fails("preview")
	for _, want := range []string{
		"worldbackup: 3 invalid inputs",
		`deadline is the number 30, but a duration needs its unit: give e.g. "30m"`,
		"server is another resource's output",
		`memoryLimit "lots" is not a Kubernetes quantity`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("preview does not say %q", want)
		}
	}
	for _, goWords := range []string{"pulumi.String", "pulumi.Input", "Go duration", "runId"} {
		if strings.Contains(out, goWords) {
			t.Errorf("preview says %q", goWords)
		}
	}
	if t.Failed() {
		t.Log(out)
	}
}

// withoutHostNotice drops the CLI's notice that it runs the YAML language
// host found on $PATH (the tool cache's, which the tests put there): it is
// the test setup's, not the component's.
func withoutHostNotice(out string) string {
	var keep []string
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, "using pulumi-language-yaml from $PATH") {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "\n")
}
