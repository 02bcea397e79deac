package nodetest

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	mcnet "github.com/Tnze/go-mc/net"
	"github.com/pulumi/pulumi/sdk/v3/go/auto/optup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/worldbackup/worldbackup/internal/kubenode"
	"github.com/worldbackup/worldbackup/internal/stacktest"
	"github.com/worldbackup/worldbackup/program/deploy"
	"github.com/worldbackup/worldbackup/provider"
)

// slowSaves is an RCON server, on the node's IP, that takes its time to
// save: it answers save-all flush with "Saving the game" at once and
// "Saved the game" after delay, as a large world's server does. It counts
// the saves in progress: each is a backup under way (the archiver reads the
// world only after the save), so peak is the most backups that ran at once.
type slowSaves struct {
	l      *mcnet.RCONListener
	delay  time.Duration
	mu     sync.Mutex
	now    int
	peak   int
	saves  int
	starts []time.Time // when each save began
}

func startSlowSaves(t *testing.T, addr, password string, delay time.Duration) *slowSaves {
	t.Helper()
	l, err := mcnet.ListenRCON(addr)
	if err != nil {
		t.Fatal(err)
	}
	s := &slowSaves{l: l, delay: delay}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go s.handle(conn, password)
		}
	}()
	return s
}

func (s *slowSaves) handle(conn mcnet.RCONServerConn, password string) {
	defer conn.Close()
	if err := conn.AcceptLogin(password); err != nil {
		return
	}
	for {
		cmd, err := conn.AcceptCmd()
		if err != nil {
			return
		}
		reply := "Unknown or incomplete command, see below for error"
		switch cmd {
		case "save-off":
			reply = "Automatic saving is now disabled"
		case "save-on":
			reply = "Automatic saving is now enabled"
		case "save-all flush":
			if err := conn.RespCmd("Saving the game (this may take a moment!)"); err != nil {
				return
			}
			s.mu.Lock()
			s.starts = append(s.starts, time.Now())
			s.now++
			s.saves++
			s.peak = max(s.peak, s.now)
			s.mu.Unlock()
			time.Sleep(s.delay)
			s.mu.Lock()
			s.now--
			s.mu.Unlock()
			reply = "Saved the game"
		}
		if err := conn.RespCmd(reply); err != nil {
			return
		}
	}
}

func (s *slowSaves) port() int { return s.l.Addr().(*net.TCPAddr).Port }

// slowServers prepares n servers (s00, s01, ...) in a new namespace, each
// with its world claim and its RCON Secret, all served by one slowSaves
// whose saves take delay: their names, the namespace and the game server.
func slowServers(t *testing.T, node *kubenode.Node, n int, delay time.Duration) ([]string, *kubenode.Namespace, *slowSaves) {
	t.Helper()
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("s%02d", i))
	}
	ns := namespace(t, node, kubenode.NamespaceOptions{Servers: names})
	password := "rcon-" + randomHex(t, 16)
	game := startSlowSaves(t, net.JoinHostPort(node.GatewayIP, "0"), password, delay)
	for _, name := range names {
		_, err := node.Client.CoreV1().Secrets(ns.Name).Create(t.Context(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-rcon"},
			Data:       map[string][]byte{provider.DefaultRconSecretKey: []byte(password)},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	return names, ns, game
}

// address is the game server's RCON address, as the backups' pods reach it.
func (s *slowSaves) address(node *kubenode.Node) string {
	return net.JoinHostPort(node.GatewayIP, fmt.Sprint(s.port()))
}

// check checks that the game server saved once per backup, want of them at
// most at once and as many as that, and logs when each save began.
func (s *slowSaves) check(t *testing.T, start time.Time, backups, want int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var at []string
	for _, st := range s.starts {
		at = append(at, fmt.Sprintf("%.1f", st.Sub(start).Seconds()))
	}
	t.Logf("the saves started at (s after the up's start): %s", strings.Join(at, " "))
	if s.peak != want {
		t.Errorf("%d backups ran at once, want %d (the cap)", s.peak, want)
	}
	if s.saves != backups {
		t.Errorf("the game server saved %d times, want %d (one per backup)", s.saves, backups)
	}
}

// TestConcurrencyCapOnNode: 30 servers whose backups each take 20 s (their
// game server takes that long to save), in a cluster with concurrency 10,
// run through `pulumi up --parallel 2`: no more than 10 backups run at
// once, and 10 do (the cap, not the CLI's two step workers, bounds them);
// every backup completes and reports its run. The wall time is logged (a
// measurement, not asserted): about three rounds of 20 s.
func TestConcurrencyCapOnNode(t *testing.T) {
	node := kubenode.Require(t)
	tools := stacktest.Require(t)
	const servers, limit, delay = 30, 10, 20 * time.Second
	names, ns, game := slowServers(t, node, servers, delay)

	type rcon struct {
		Address string `json:"address"`
	}
	type server struct {
		Name string `json:"name"`
		Rcon rcon   `json:"rcon"`
	}
	var list []server
	for _, name := range names {
		list = append(list, server{name, rcon{game.address(node)}})
	}
	serversJSON, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	cfg := stackConfig(node, ns, "r1")
	delete(cfg, "worldbackup:servers[0].name")
	cfg["worldbackup:servers"] = string(serversJSON)
	cfg["worldbackup:clusters[0].concurrency"] = fmt.Sprint(limit)
	stack := tools.InlineStack(t, "node", deploy.Program, cfg)

	var out strings.Builder
	start := time.Now()
	tl := watchTimeline(t, node, ns.Name, start)
	res, err := stack.Up(t.Context(), optup.Parallel(2), optup.ProgressStreams(&out), optup.ErrorProgressStreams(&out))
	wall := time.Since(start)
	if err != nil {
		t.Fatalf("pulumi up: %v\n%s", err, out.String())
	}
	t.Logf("%d backups of %s each under a cap of %d, `pulumi up --parallel 2`: %s wall", servers, delay, limit, wall.Round(100*time.Millisecond))
	t.Logf("timeline: %s", tl.summary())
	game.check(t, start, servers, limit)
	// The next backups' pods start while the first ones save, and wait at
	// the door.
	if n := tl.runningEarly(); n <= limit {
		t.Errorf("%d archivers were running before the first one ended, want more than the cap, %d (the next backups start early)", n, limit)
	}
	outs := backups(t, res.Outputs)
	if len(outs) != servers {
		t.Fatalf("%d backups in the stack outputs, want %d", len(outs), servers)
	}
	for _, o := range outs {
		if o.status != "done" || len(o.sha256) != 64 {
			t.Errorf("%s: status %q, sha256 %q: want done and the run's checksum", o.server, o.status, o.sha256)
		}
		checkSkipAwait(t, node, ns.Name, o.server, o.jobName)
	}
}

// checkSkipAwait checks that the Job of server's gated backup exists, was
// created with pulumi.com/skipAwait (the component, not the engine's step
// worker, waited for it) and has its archiver wait for a slot.
func checkSkipAwait(t *testing.T, node *kubenode.Node, ns, server, jobName string) {
	t.Helper()
	job, err := node.Client.BatchV1().Jobs(ns).Get(t.Context(), jobName, metav1.GetOptions{})
	if err != nil {
		t.Errorf("%s: %v", server, err)
		return
	}
	if job.Annotations["pulumi.com/skipAwait"] != "true" {
		t.Errorf("%s: Job %s has no pulumi.com/skipAwait: the engine's step worker waited for it", server, jobName)
	}
	if args := strings.Join(job.Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(args, "--concurrency ") {
		t.Errorf("%s: the archiver of Job %s does not wait for a slot: %s", server, jobName, args)
	}
}

// TestPluginConcurrencyCapOnNode: the same cap through the plugin, as a
// TypeScript, Python or YAML program gets it: a YAML program (the real YAML
// language host and plugin) declares 4 WorldBackups of 8 s each with
// concurrency 2 on one cluster; `pulumi up --parallel 8` runs 2 at once,
// never more, and each reports its run.
func TestPluginConcurrencyCapOnNode(t *testing.T) {
	node := kubenode.Require(t)
	tools := stacktest.Require(t)
	const servers, limit, delay = 4, 2, 8 * time.Second
	names, ns, game := slowServers(t, node, servers, delay)

	pluginDir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(pluginDir, "pulumi-resource-worldbackup"), "./provider/cmd/pulumi-resource-worldbackup")
	build.Dir = tools.Root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the plugin: %v\n%s", err, out)
	}
	resources := map[string]any{
		"cluster": map[string]any{"type": "pulumi:providers:kubernetes", "properties": map[string]any{"kubeconfig": node.Kubeconfig}},
	}
	outputs := map[string]any{}
	for _, name := range names {
		resources[name] = map[string]any{
			"type": provider.WorldBackupType,
			"properties": map[string]any{
				"server": name, "runId": "r1-" + name, "image": node.ArchiverImage, "backupClaimName": ns.BackupClaim,
				"namespace": ns.Name, "rcon": map[string]any{"address": game.address(node)}, "concurrency": limit,
			},
			"options": map[string]any{"provider": "${cluster}"},
		}
		outputs[name] = map[string]any{"status": "${" + name + ".status}", "sha256": "${" + name + ".sha256}", "jobName": "${" + name + ".jobName}"}
	}
	project, err := yaml.Marshal(map[string]any{
		"name": "plugin-cap", "runtime": "yaml",
		"plugins":   map[string]any{"providers": []any{map[string]any{"name": "worldbackup", "path": pluginDir}}},
		"resources": resources, "outputs": outputs,
	})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Pulumi.yaml"), project, 0o644); err != nil {
		t.Fatal(err)
	}
	env := tools.Env(t.TempDir())
	tools.CLI(t, dir, env, "stack", "init", "node")
	start := time.Now()
	tl := watchTimeline(t, node, ns.Name, start)
	out, err := tools.Tools.CLI(t.Context(), dir, env, "up", "--yes", "--parallel", "8")
	wall := time.Since(start)
	if err != nil {
		t.Fatalf("pulumi up: %v\n%s\npods:\n%s", err, out, node.PodLogs(t, ns.Name, ""))
	}
	t.Logf("%d backups of %s each under a cap of %d through the plugin, `pulumi up --parallel 8`: %s wall", servers, delay, limit, wall.Round(100*time.Millisecond))
	t.Logf("timeline: %s", tl.summary())
	game.check(t, start, servers, limit)
	var got map[string]struct{ Status, Sha256, JobName string }
	if err := json.Unmarshal([]byte(tools.CLI(t, dir, env, "stack", "output", "--json")), &got); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		o := got[name]
		if o.Status != "done" || len(o.Sha256) != 64 {
			t.Errorf("%s: status %q, sha256 %q: want done and the run's checksum", name, o.Status, o.Sha256)
		}
		checkSkipAwait(t, node, ns.Name, name, o.JobName)
	}
}
