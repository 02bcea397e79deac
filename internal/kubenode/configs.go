package kubenode

import (
	"encoding/base64"
	"fmt"
)

// The network of the node: a bridge whose address is the node's IP and the
// pods' gateway, pods on host-local addresses of its subnet, no NAT and no
// iptables (the test machines have none).
const (
	BridgeName  = "wbk0"
	GatewayIP   = "10.88.0.1"
	podSubnet   = "10.88.0.0/16"
	serviceCIDR = "10.96.0.0/16"
	serviceIP   = "10.96.0.1"
	nodeName    = "kubenode"
	// cgroupRoot is the kubelet's own cgroup parent, so that teardown never
	// touches another kubelet's pods.
	cgroupRoot = "worldbackup-kubenode"
)

// PauseImage is the sandbox image: containerd 2.4's default, which the
// harness builds and imports, so no registry is needed.
const PauseImage = "registry.k8s.io/pause:3.10.2"

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// containerdConfig: config version 4 (2.4's own), everything under dir, the
// runc and shim binaries named by path, cgroupfs, overlayfs, and
// restrict_oom_score_adj (without CAP_SYS_RESOURCE runc cannot set a
// negative oom_score_adj).
func containerdConfig(dir, sock, runc, shim, cniBin, cniConf string) string {
	return fmt.Sprintf(`version = 4
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.nri.v1.nri"]

[plugins.'io.containerd.server.v1.grpc']
  address = %[3]q

[plugins.'io.containerd.internal.v1.opt']
  path = %[4]q

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = %[5]q

[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      runtime_path = %[6]q
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = %[7]q
        Root = %[8]q
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [%[9]q]
    conf_dir = %[10]q
    max_conf_num = 1

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`, dir+"/root", dir+"/state", sock, dir+"/opt", PauseImage, shim, runc, dir+"/runc", cniBin, cniConf)
}

// cniConfig: the bridge (created beforehand with the gateway address) with
// host-local addresses, its IPAM state under dir.
func cniConfig(ipamDir string) string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "wbk",
  "plugins": [{
    "type": "bridge",
    "bridge": %q,
    "isGateway": true,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "ranges": [[{"subnet": %q, "gateway": %q}]],
      "routes": [{"dst": "0.0.0.0/0"}],
      "dataDir": %q
    }
  }]
}
`, BridgeName, podSubnet, GatewayIP, ipamDir)
}

// kubeletConfig: what this kind of VM needs (cgroup v1, swap allowed, no
// iptables), x509 client auth against the node's CA, eviction relaxed so a
// busy test machine does not evict the test pods, image GC off (the images
// are imported, not pulled).
func kubeletConfig(port int, caFile, runtimeSock, podLogs string) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]q
port: %[2]d
readOnlyPort: 0
healthzPort: 0
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
  x509:
    clientCAFile: %[3]q
authorization:
  mode: AlwaysAllow
cgroupDriver: cgroupfs
cgroupRoot: /%[4]s
failCgroupV1: false
failSwapOn: false
makeIPTablesUtilChains: false
protectKernelDefaults: false
evictionHard:
  memory.available: 1Mi
  nodefs.available: 1%%
  nodefs.inodesFree: 1%%
  imagefs.available: 1%%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
containerRuntimeEndpoint: unix://%[5]s
podLogsDir: %[6]q
resolvConf: /etc/resolv.conf
serializeImagePulls: false
registerNode: true
syncFrequency: 5s
nodeStatusUpdateFrequency: 2s
`, GatewayIP, port, caFile, cgroupRoot, runtimeSock, podLogs)
}
