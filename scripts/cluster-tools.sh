#!/usr/bin/env bash
# Builds the parts of the single-node Kubernetes cluster that the tier-5
# tests start (internal/kubenode) from the Go module proxy into the tool cache
# (scripts/lib/toolcache.sh: one folder per tool, version and Go version,
# shared by every checkout on the machine) and links them into
# $WB_TOOLS/cluster (.tools/cluster by default):
#
#   bin/  kube-apiserver kube-controller-manager kube-scheduler kubelet etcd
#         containerd containerd-shim-runc-v2 ctr runc
#   cni/  bridge host-local loopback
#
# Versions are pinned in one place each, the go.mod of tools/kubernetes,
# tools/etcd, tools/containerd, tools/runc and tools/cni. runc needs cgo and
# libseccomp-dev (apt-get install -y libseccomp-dev); everything else is
# built with CGO_ENABLED=0.
#
#   scripts/cluster-tools.sh         build what is missing (make cluster-tools)
#   scripts/cluster-tools.sh check   say what is missing, build nothing; exit 1 if anything is
#   scripts/cluster-tools.sh prefetch  download the modules of the tools not built yet, build nothing
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
. scripts/env.sh
. scripts/lib/toolcache.sh
export GOFLAGS=-buildvcs=false

mode=${1:-build}
case $mode in build|check|prefetch) ;; *) echo "usage: $0 [check|prefetch]" >&2; exit 2 ;; esac

k8s_version=$(modver tools/kubernetes/go.mod k8s.io/kubernetes)
etcd_version=$(modver tools/etcd/go.mod go.etcd.io/etcd/server/v3)
containerd_version=$(modver tools/containerd/go.mod github.com/containerd/containerd/v2)
runc_version=$(modver tools/runc/go.mod github.com/opencontainers/runc)
cni_version=$(modver tools/cni/go.mod github.com/containernetworking/plugins)
for v in k8s_version etcd_version containerd_version runc_version cni_version; do
  [ -n "${!v}" ] || { say "cannot read $v from the go.mod files under tools/"; exit 1; }
done

build_kubernetes() {
  # The stamp the release build (hack/lib/version.sh) sets: the kubelet
  # reports it as the node's version and the API server's /version says it.
  local major minor pkg flags=""
  major=${k8s_version#v}; major=${major%%.*}
  minor=${k8s_version#v"$major".}; minor=${minor%%.*}
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  (cd tools/kubernetes && CGO_ENABLED=0 go build -o "$out/" "${tool_buildflags[@]}" -ldflags "-s -w$flags" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet)
}
build_etcd() {
  (cd tools/etcd && CGO_ENABLED=0 go build -o "$out/etcd" "${tool_buildflags[@]}" -ldflags "-s -w" .)
}
build_containerd() {
  local flags="-s -w -X github.com/containerd/containerd/v2/version.Version=$containerd_version"
  (cd tools/containerd &&
    CGO_ENABLED=0 go build -o "$out/" "${tool_buildflags[@]}" -tags "no_btrfs no_devmapper no_zfs" -ldflags "$flags" \
      github.com/containerd/containerd/v2/cmd/containerd github.com/containerd/containerd/v2/cmd/ctr &&
    CGO_ENABLED=0 go build -o "$out/" "${tool_buildflags[@]}" -tags "no_grpc" -ldflags "$flags" \
      github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2)
}
build_runc() {
  (cd tools/runc && CGO_ENABLED=1 go build -o "$out/runc" "${tool_buildflags[@]}" -tags "seccomp netgo osusergo" \
    -ldflags "-s -w -X main.version=${runc_version#v} -extldflags -static" github.com/opencontainers/runc)
}
build_cni() {
  (cd tools/cni && CGO_ENABLED=0 go build -o "$out/" "${tool_buildflags[@]}" \
    -ldflags "-s -w -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$cni_version" \
    github.com/containernetworking/plugins/plugins/main/bridge \
    github.com/containernetworking/plugins/plugins/ipam/host-local \
    github.com/containernetworking/plugins/plugins/main/loopback)
}

# name version build-function binaries...
tools=(
  "kubernetes $k8s_version build_kubernetes kube-apiserver kube-controller-manager kube-scheduler kubelet"
  "etcd $etcd_version build_etcd etcd"
  "containerd $containerd_version build_containerd containerd containerd-shim-runc-v2 ctr"
  "runc $runc_version build_runc runc"
  "cni-plugins $cni_version build_cni bridge host-local loopback"
)

if [ "$mode" = prefetch ]; then
  for t in "${tools[@]}"; do
    read -r name version _ <<<"$t"
    tool_prefetch "tools/${name%-plugins}" "$name" "$version" # cni-plugins: tools/cni
  done
  exit 0
fi

if [ "$mode" = check ]; then
  missing=0
  for t in "${tools[@]}"; do
    read -r name version _ bins <<<"$t"
    dir=$(tool_dir "$name" "$version")
    if ! [ -d "$dir" ]; then say "$name $version: missing"; missing=1; continue; fi
    sub=bin; [ "$name" = cni-plugins ] && sub=cni
    unlinked=
    for b in $bins; do
      [ "$(readlink "$WB_TOOLS/cluster/$sub/$b")" = "$dir/$b" ] || unlinked+=" $b"
    done
    if [ -n "$unlinked" ]; then
      say "$name $version: built ($dir) but not linked into $WB_TOOLS/cluster/$sub:$unlinked"; missing=1
    else
      say "$name $version: built ($dir)"
    fi
  done
  if ! [ -e /usr/include/seccomp.h ] && ! [ -d "$(tool_dir runc "$runc_version")" ]; then
    say "runc needs libseccomp-dev to build: apt-get install -y libseccomp-dev"
  fi
  [ "$missing" = 0 ] || say "run scripts/cluster-tools.sh (make cluster-tools) to build what is missing"
  exit "$missing"
fi

if ! [ -d "$(tool_dir runc "$runc_version")" ] && ! [ -e /usr/include/seccomp.h ]; then
  say "runc needs libseccomp-dev to build: apt-get install -y libseccomp-dev"
  exit 1
fi

link=$WB_TOOLS/cluster
mkdir -p "$link/bin" "$link/cni"
for t in "${tools[@]}"; do
  read -r name version fn bins <<<"$t"
  dir=$(tool_build "$name" "$version" "$fn")
  sub=bin; [ "$name" = cni-plugins ] && sub=cni
  for b in $bins; do
    [ -x "$dir/$b" ] || { say "$name $version: $dir has no $b"; exit 1; }
    ln -sfn "$dir/$b" "$link/$sub/$b"
  done
done
say "cluster tools linked into $link"
