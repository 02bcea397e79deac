package kubenode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// Tools are the cluster binaries that `make cluster-tools` links into
// $WB_TOOLS/cluster.
type Tools struct {
	Bin string // kube-apiserver, ..., etcd, containerd, ctr, runc
	CNI string // bridge, host-local, loopback
}

func (t Tools) path(name string) string { return filepath.Join(t.Bin, name) }

// binaries the node runs, for the check that they are all built.
var binaries = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "etcd",
	"containerd", "containerd-shim-runc-v2", "ctr", "runc"}

func (t Tools) missing() []string {
	var m []string
	for _, b := range binaries {
		if _, err := os.Stat(t.path(b)); err != nil {
			m = append(m, b)
		}
	}
	for _, b := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(t.CNI, b)); err != nil {
			m = append(m, "cni/"+b)
		}
	}
	return m
}

// node is the running node: the state that teardown undoes and what the
// tests are handed.
type node struct {
	tools    Tools
	repoRoot string // the checkout, where images are built from
	dir      string
	st       *state
	logf     func(string, ...any)
	exited   map[string]chan error // by process name: closed with its exit
	kubecfg  string
	client   kubernetes.Interface
	ctrSock  string
	began    time.Time
	timings  string // when each component was ready, for the log
}

// start brings the node up in order, saving the state before each change so
// that teardown (or the next run) undoes exactly what was done.
func start(ctx context.Context, tools Tools, repoRoot string, logf func(string, ...any)) (*node, error) {
	dir, err := os.MkdirTemp("", "kubenode-")
	if err != nil {
		return nil, fmt.Errorf("creating the node folder: %w", err)
	}
	n := &node{tools: tools, repoRoot: repoRoot, dir: dir, logf: logf, exited: map[string]chan error{}, began: time.Now(),
		st: &state{Dir: dir, Sysctls: map[string]string{}, OwnerPID: os.Getpid(), path: statePath}}
	for _, k := range sysctls {
		v, err := readSysctl(k)
		if err != nil {
			return n, err
		}
		n.st.Sysctls[k] = v
	}
	for _, p := range hostPaths {
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			n.st.Created = append(n.st.Created, p)
		}
	}
	for _, b := range []string{"containerd-shim-runc-v2", "runc", "containerd"} {
		if r, err := filepath.EvalSymlinks(tools.path(b)); err == nil {
			n.st.Bins = append(n.st.Bins, r)
		}
	}
	if err := n.st.save(); err != nil {
		return n, err
	}
	for _, d := range []string{"logs", "etcd", "containerd", "kubelet", "pod-logs", "cni/net.d", "cni/networks", "pki"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return n, err
		}
	}

	if err := buildPauseImage(repoRoot, filepath.Join(dir, "pause.tar")); err != nil {
		return n, err
	}
	if err := n.bridge(); err != nil {
		return n, err
	}
	if err := n.cgroups(); err != nil {
		return n, err
	}
	ips := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(GatewayIP), net.ParseIP(serviceIP)}
	p, err := newPKI(filepath.Join(dir, "pki"), ips)
	if err != nil {
		return n, err
	}
	ports, err := freePorts(6)
	if err != nil {
		return n, err
	}
	etcdClient, etcdPeer, apiPort, cmPort, schedPort, kubeletPort := ports[0], ports[1], ports[2], ports[3], ports[4], ports[5]

	// etcd and containerd do not depend on anything: start both, then wait.
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdClient)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(etcdPeer)
	if err := n.run("etcd", "--data-dir", filepath.Join(dir, "etcd"), "--unsafe-no-fsync",
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "default="+peerURL, "--log-level", "warn"); err != nil {
		return n, err
	}
	n.ctrSock = filepath.Join(dir, "containerd", "containerd.sock")
	ctrCfg := filepath.Join(dir, "containerd", "config.toml")
	cniConf := filepath.Join(dir, "cni", "net.d")
	if err := os.WriteFile(ctrCfg, []byte(containerdConfig(filepath.Join(dir, "containerd"), n.ctrSock,
		tools.path("runc"), tools.path("containerd-shim-runc-v2"), tools.CNI, cniConf)), 0o644); err != nil {
		return n, err
	}
	if err := os.WriteFile(filepath.Join(cniConf, "10-wbk.conflist"), []byte(cniConfig(filepath.Join(dir, "cni", "networks"))), 0o644); err != nil {
		return n, err
	}
	if err := n.run("containerd", "--config", ctrCfg); err != nil {
		return n, err
	}
	if err := n.waitFor(ctx, "etcd", 60*time.Second, func() error { return httpOK(etcdURL + "/health") }); err != nil {
		return n, err
	}

	if err := n.run("kube-apiserver",
		"--etcd-servers", etcdURL,
		"--secure-port", strconv.Itoa(apiPort), "--bind-address", "127.0.0.1", "--advertise-address", GatewayIP,
		"--tls-cert-file", p.ServerCert, "--tls-private-key-file", p.ServerKey,
		"--client-ca-file", p.CACert,
		"--service-account-key-file", p.SAKey, "--service-account-signing-key-file", p.SAKey,
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range", serviceCIDR,
		"--authorization-mode", "RBAC",
		"--kubelet-client-certificate", p.AdminCert, "--kubelet-client-key", p.AdminKey,
		"--kubelet-preferred-address-types", "InternalIP,Hostname",
		"--cert-dir", filepath.Join(dir, "pki", "apiserver"),
		"--profiling=false"); err != nil {
		return n, err
	}
	n.kubecfg = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(n.kubecfg, p.kubeconfig("https://127.0.0.1:"+strconv.Itoa(apiPort)), 0o600); err != nil {
		return n, err
	}
	rc, err := clientcmd.BuildConfigFromFlags("", n.kubecfg)
	if err != nil {
		return n, fmt.Errorf("reading the node's kubeconfig: %w", err)
	}
	rc.QPS, rc.Burst = 50, 100
	n.client, err = kubernetes.NewForConfig(rc)
	if err != nil {
		return n, err
	}
	if err := n.waitFor(ctx, "kube-apiserver", 90*time.Second, func() error {
		_, err := n.client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	}); err != nil {
		return n, err
	}

	common := []string{"--kubeconfig", n.kubecfg, "--authentication-kubeconfig", n.kubecfg,
		"--authorization-kubeconfig", n.kubecfg, "--leader-elect=false", "--bind-address", "127.0.0.1", "--profiling=false"}
	if err := n.run("kube-controller-manager", append(common,
		"--secure-port", strconv.Itoa(cmPort), "--cert-dir", filepath.Join(dir, "pki", "controller-manager"),
		"--controllers", "*",
		"--service-account-private-key-file", p.SAKey, "--root-ca-file", p.CACert,
		"--pvclaimbinder-sync-period", "1s")...); err != nil {
		return n, err
	}
	if err := n.run("kube-scheduler", append(common,
		"--secure-port", strconv.Itoa(schedPort), "--cert-dir", filepath.Join(dir, "pki", "scheduler"))...); err != nil {
		return n, err
	}

	if err := n.waitFor(ctx, "containerd", 60*time.Second, func() error {
		out, err := n.ctr(ctx, "version")
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	}); err != nil {
		return n, err
	}
	if err := n.importImage(ctx, filepath.Join(dir, "pause.tar")); err != nil {
		return n, err
	}

	kubeletCfg := filepath.Join(dir, "kubelet", "config.yaml")
	if err := os.WriteFile(kubeletCfg, []byte(kubeletConfig(kubeletPort, p.CACert, n.ctrSock, filepath.Join(dir, "pod-logs"))), 0o644); err != nil {
		return n, err
	}
	if err := n.run("kubelet", "--config", kubeletCfg, "--kubeconfig", n.kubecfg,
		"--root-dir", filepath.Join(dir, "kubelet"), "--node-ip", GatewayIP, "--hostname-override", nodeName); err != nil {
		return n, err
	}
	if err := n.waitFor(ctx, "kubelet", 120*time.Second, n.nodeReady); err != nil {
		return n, err
	}
	return n, nil
}

// bridge creates the pods' bridge with the gateway address, so the kubelet
// can take it as the node IP before the first pod exists.
func (n *node) bridge() error {
	n.st.Bridge = BridgeName
	if err := n.st.save(); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"link", "add", BridgeName, "type", "bridge"},
		{"addr", "add", GatewayIP + "/16", "dev", BridgeName},
		{"link", "set", BridgeName, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
	}
	return nil
}

// cgroups creates the kubelet's cgroup root in every hierarchy (the kubelet
// wants it to exist).
func (n *node) cgroups() error {
	n.st.Cgroup = cgroupRoot
	if err := n.st.save(); err != nil {
		return err
	}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return os.MkdirAll("/sys/fs/cgroup/"+cgroupRoot, 0o755)
	}
	hier, err := filepath.Glob("/sys/fs/cgroup/*/cgroup.procs")
	if err != nil {
		return err
	}
	for _, h := range hier {
		d := filepath.Join(filepath.Dir(h), cgroupRoot)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("creating cgroup %s: %w", d, err)
		}
		if strings.Contains(d, "/cpuset/") { // a new cpuset has no CPUs until given its parent's
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				b, err := os.ReadFile(filepath.Join(filepath.Dir(h), f))
				if err == nil {
					_ = os.WriteFile(filepath.Join(d, f), b, 0o644)
				}
			}
		}
	}
	return nil
}

// run starts one component in its own process group, its output in
// logs/NAME.log, and records it in the state.
func (n *node) run(name string, args ...string) error {
	logPath := filepath.Join(n.dir, "logs", name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.Command(n.tools.path(name), args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir = n.dir
	cmd.Env = append(os.Environ(), "PATH="+n.tools.Bin+":"+os.Getenv("PATH"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	n.st.Procs = append(n.st.Procs, proc{Name: name, PID: cmd.Process.Pid, Start: startTime(cmd.Process.Pid)})
	done := make(chan error, 1)
	n.exited[name] = done
	go func() { done <- cmd.Wait(); close(done) }()
	return n.st.save()
}

// waitFor polls ready until it succeeds, the component exits or timeout.
func (n *node) waitFor(ctx context.Context, name string, timeout time.Duration, ready func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		if last = ready(); last == nil {
			if n.timings != "" {
				n.timings += ", "
			}
			n.timings += fmt.Sprintf("%s %.1fs", name, time.Since(n.began).Seconds())
			return nil
		}
		select {
		case err := <-n.exited[name]:
			return fmt.Errorf("%s exited (%v) before it was ready:\n%s", name, err, n.logTail(name, 30))
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %s (%v):\n%s", name, timeout, last, n.logTail(name, 30))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// logTail is the end of a component's log, for error messages.
func (n *node) logTail(name string, lines int) string {
	b, err := os.ReadFile(filepath.Join(n.dir, "logs", name+".log"))
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

func (n *node) nodeReady() error {
	nd, err := n.client.CoreV1().Nodes().Get(context.Background(), nodeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, c := range nd.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				return nil
			}
			return fmt.Errorf("node %s not ready: %s", nodeName, c.Message)
		}
	}
	return fmt.Errorf("node %s has no Ready condition yet", nodeName)
}

// ctr runs containerd's CLI against the node's containerd, in the CRI's
// namespace.
func (n *node) ctr(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, n.tools.path("ctr"), append([]string{"--address", n.ctrSock, "--namespace", "k8s.io"}, args...)...)
	return cmd.CombinedOutput()
}

// importImage imports an image tarball (docker save format) and unpacks it
// for the overlayfs snapshotter.
func (n *node) importImage(ctx context.Context, tar string) error {
	if out, err := n.ctr(ctx, "images", "import", "--snapshotter", "overlayfs", tar); err != nil {
		return fmt.Errorf("importing %s into containerd: %v: %s", tar, err, bytes.TrimSpace(out))
	}
	return nil
}

// teardown stops the node and undoes what it changed.
func (n *node) teardown() error {
	return n.st.teardown(n.logf)
}

func httpOK(url string) error {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// freePorts finds k distinct free TCP ports on the loopback address.
func freePorts(k int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range k {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
