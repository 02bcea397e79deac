// Package kubenode gives tests a real single-node Kubernetes cluster: etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, containerd with
// runc and the bridge CNI plugin, and a kubelet, all built from the Go module
// proxy by `make cluster-tools` (scripts/cluster-tools.sh). It is the
// harness of tier 5: the archiver image that `make image` builds runs in
// real pods, and `pulumi up` talks to a real API server.
//
// One node serves every test of a test binary: Main runs the tests and tears
// the node down; Require starts it on first use (root only) and hands back a
// *Node; Node.Namespace gives a test a namespace with what a backup Job needs
// (Pod Security label, service account, config Secret pointing at a
// PostgreSQL database the pods reach, hostPath-backed claims with a generated
// world).
//
// Everything lives in a temporary folder, except what the kubelet, containerd
// and the CNI plugins write at fixed places (/var/log/containers,
// /run/containerd/s, /var/lib/cni, ...), the bridge wbk0 (10.88.0.1/16, the
// node's IP and the pods' gateway), the kubelet's cgroups (under
// /worldbackup-kubenode) and four sysctls. Teardown undoes all of it: at the
// end of Main, on SIGINT/SIGTERM, and, when the test binary dies any other
// way (a panic, a -timeout, SIGKILL), in a reaper process that outlives it.
// A machine-wide lock (/run/worldbackup-kubenode/lock) lets one node run at a
// time; the state file beside it lets the next run clean up what a crashed
// one left.
//
// What this kind of VM needs (cgroup v1, no CAP_SYS_RESOURCE, no iptables)
// is set in the component configs: see configs.go.
package kubenode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/worldbackup/worldbackup/internal/pgtest"
	"github.com/worldbackup/worldbackup/internal/pulumitools"
	"github.com/worldbackup/worldbackup/internal/testenv"
)

// reaperEnv marks the re-executed test binary that cleans up after its
// parent: its value is unused, the pipe is fd 3.
const reaperEnv = "WORLDBACKUP_KUBENODE_REAPER"

// errMissing means something the node needs is not built.
var errMissing = errors.New("missing")

// Node is the running node as the tests see it.
type Node struct {
	// Kubeconfig is the path of an admin (system:masters) kubeconfig.
	Kubeconfig string
	// Client is a client-go clientset with the same credentials.
	Client kubernetes.Interface
	// ArchiverImage is the image `make image` built, imported into
	// containerd, as a pod refers to it (by tag).
	ArchiverImage string
	// ArchiverTarball is the path of that image's docker tarball, to push
	// it to a registry of a test's own.
	ArchiverTarball string
	// PauseImage is the sandbox image, also usable as a do-nothing
	// container (a stand-in game server).
	PauseImage string
	// GatewayIP is the node's IP and the pods' gateway: host services that
	// pods must reach listen here.
	GatewayIP string

	n *node
	// gameServer is the game server image, built and imported on first
	// use (GameServerImage).
	gameServer struct {
		once sync.Once
		err  error
	}
}

// shared is the per-binary node. It is package state by necessity: one node
// serves every test in the binary and Main must find it to tear it down.
var shared struct {
	mu         sync.Mutex
	mainCalled bool
	started    bool
	node       *Node
	err        error
	lock       *os.File
	reaper     *os.File // write end of the reaper's pipe, open until exit
}

// Main runs the tests (with pgtest's private PostgreSQL, see pgtest.Main),
// tears the node down if one was started, and exits. Call it from TestMain:
//
//	func TestMain(m *testing.M) { kubenode.Main(m) }
func Main(m *testing.M) {
	if os.Getenv(reaperEnv) != "" {
		os.Exit(reap())
	}
	shared.mu.Lock()
	shared.mainCalled = true
	shared.mu.Unlock()

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		fmt.Fprintf(os.Stderr, "kubenode: %v: tearing the node down\n", sig)
		shutdown()
		os.Exit(1)
	}()

	code := pgtest.Run(m)
	if err := shutdown(); err != nil && code == 0 {
		code = 1
	}
	os.Exit(code)
}

// shutdown tears the node down once.
func shutdown() error {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	nd := shared.node
	shared.node = nil
	if nd == nil {
		return nil
	}
	start := time.Now()
	err := nd.n.teardown()
	logf("kubenode: node torn down in %s", time.Since(start).Round(time.Millisecond))
	if shared.lock != nil {
		shared.lock.Close()
	}
	return err
}

func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

// Require returns the node, starting it on the first call. It needs root,
// `ip` (iproute2), the cluster tools (`make cluster-tools`) and the archiver
// image (`make image`): without them the test fails under CI=true and is
// skipped elsewhere, saying what to run.
func Require(t testing.TB) *Node {
	t.Helper()
	testenv.RequireRoot(t, "the test node runs a kubelet, containerd and a network bridge")
	testenv.RequireCommands(t, "iproute2", "ip")
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.mainCalled {
		t.Fatal("kubenode: the node needs kubenode.Main: add `func TestMain(m *testing.M) { kubenode.Main(m) }` to this package's tests")
	}
	if !shared.started {
		shared.started = true
		shared.node, shared.err = startNode(context.Background())
	}
	if errors.Is(shared.err, errMissing) {
		testenv.Require(t, false, shared.err.Error(), "")
	}
	if shared.err != nil {
		t.Fatalf("kubenode: %v", shared.err)
	}
	return shared.node
}

// toolsDir is $WB_TOOLS/cluster, .tools/cluster in the checkout by default
// (scripts/env.sh).
func toolsDir(root string) Tools {
	dir := filepath.Join(root, ".tools")
	if v := os.Getenv("WB_TOOLS"); v != "" {
		dir = v
	}
	return Tools{Bin: filepath.Join(dir, "cluster", "bin"), CNI: filepath.Join(dir, "cluster", "cni")}
}

// startNode checks the prerequisites, takes the machine-wide lock, cleans up
// after a crashed run, starts the reaper and the node. Called with
// shared.mu held.
func startNode(ctx context.Context) (*Node, error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	root, err := pulumitools.RepoRoot(wd)
	if err != nil {
		return nil, err
	}
	tools := toolsDir(root)
	if m := tools.missing(); len(m) > 0 {
		return nil, fmt.Errorf("%w: the cluster tools are not built (no %v in %s): run `make cluster-tools`", errMissing, m, filepath.Dir(tools.Bin))
	}
	archiverTar := filepath.Join(root, "dist", "image", "archiver.tar")
	if _, err := os.Stat(archiverTar); err != nil {
		return nil, fmt.Errorf("%w: no archiver image at %s: run `make image`", errMissing, archiverTar)
	}
	archiverImage, err := tarballTag(archiverTar)
	if err != nil {
		return nil, err
	}

	waited := time.Now()
	if shared.lock, err = lock(); err != nil {
		return nil, err
	}
	if d := time.Since(waited); d > time.Second {
		logf("kubenode: waited %s for another test binary's node", d.Round(time.Second))
	}
	if err := cleanStale(statePath, logf); err != nil {
		return nil, fmt.Errorf("cleaning up after an earlier node failed; fix it by hand (see %s): %w", statePath, err)
	}
	if shared.reaper, err = startReaper(); err != nil {
		return nil, err
	}

	began := time.Now()
	n, err := start(ctx, tools, root, logf)
	if err != nil {
		if n != nil {
			err = fmt.Errorf("%w (component logs were in %s/logs)", err, n.dir)
			if terr := n.teardown(); terr != nil {
				err = errors.Join(err, terr)
			}
		}
		return nil, err
	}
	nd := &Node{Kubeconfig: n.kubecfg, Client: n.client, PauseImage: PauseImage, GatewayIP: GatewayIP,
		ArchiverImage: archiverImage, ArchiverTarball: archiverTar, n: n}
	if err := n.importImage(ctx, archiverTar); err != nil {
		n.teardown()
		return nil, err
	}
	logf("kubenode: node %s Ready in %s (components %s, logs in %s/logs)", nodeName,
		time.Since(began).Round(time.Millisecond), n.timings, n.dir)
	return nd, nil
}

// startReaper re-executes the test binary as the reaper: it waits for the
// pipe to close (this process exited, however it died), then takes the lock
// and tears down whatever the state file still lists.
func startReaper() (*os.File, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding the test binary for the reaper: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	logFile, err := os.OpenFile(reaperLog, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		w.Close()
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), reaperEnv+"=1")
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = logFile, logFile // never the test's stdout: `go test` would wait for it
	cmd.ExtraFiles = []*os.File{r}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("starting the reaper: %w", err)
	}
	go cmd.Wait() //nolint:errcheck // the reaper outlives us by design
	return w, nil
}

// reap is the reaper's body.
func reap() int {
	pipe := os.NewFile(3, "reaper-pipe")
	_, _ = io.Copy(io.Discard, pipe) // returns when the parent is gone
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	f, err := lock()
	if err != nil {
		logf("kubenode reaper: %v", err)
		return 1
	}
	defer f.Close()
	if err := cleanStale(statePath, func(format string, args ...any) {
		logf(time.Now().Format(time.RFC3339)+" "+format, args...)
	}); err != nil {
		return 1
	}
	return 0
}
