#!/usr/bin/env bash
# Builds the Pulumi CLI, the Kubernetes provider plugin and the YAML language
# host (and, through scripts/versitygw.sh and scripts/prometheus.sh, the test
# tools versitygw, promtool and prometheus) from the Go module proxy into the
# tool cache outside the checkout
# (scripts/lib/toolcache.sh: ${XDG_CACHE_HOME:-~/.cache}/worldbackup/tools,
# one folder per tool, version and Go version), links them into $WB_TOOLS/bin
# (.tools/bin by default) and installs the plugin into PULUMI_HOME
# ($WB_CACHE/pulumi-home by default). A second checkout on the same machine
# builds nothing.
#
# Versions are pinned in one place each: the go.mod of tools/pulumi-cli,
# tools/pulumi-kubernetes and tools/pulumi-yaml. The Kubernetes plugin is
# stamped with the version that the pulumi-kubernetes SDK in the root go.mod
# asks for, so the engine finds it without downloading anything.
#
#   scripts/tools.sh                      build what is missing (make tools)
#   scripts/tools.sh moddir DIR MODULE    print MODULE's folder for the tools module DIR, downloaded first
#   scripts/tools.sh prefetch             download the modules of the tools not built yet, build nothing
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
. scripts/env.sh
. scripts/lib/toolcache.sh
export GOFLAGS=-buildvcs=false

if [ "${1:-}" = moddir ]; then
  moddir "$2" "$3"
  exit
fi

cli_version=$(modver tools/pulumi-cli/go.mod github.com/pulumi/pulumi/pkg/v3)
k8s_version=$(modver go.mod github.com/pulumi/pulumi-kubernetes/sdk/v4)
k8s_version=${k8s_version#v}  # the plugin reports 4.32.0; its install folder says v4.32.0
yaml_version=$(modver tools/pulumi-yaml/go.mod github.com/pulumi/pulumi-yaml)
for v in cli_version k8s_version yaml_version; do
  [ -n "${!v}" ] || { say "cannot read $v from the go.mod files"; exit 1; }
done

if [ "${1:-}" = prefetch ]; then
  # In the order they are built, the CLI last: it is built first, beside this.
  tool_prefetch tools/pulumi-kubernetes pulumi-resource-kubernetes "$k8s_version"
  tool_prefetch tools/pulumi-yaml pulumi-language-yaml "$yaml_version"
  scripts/versitygw.sh prefetch
  scripts/prometheus.sh prefetch
  tool_prefetch tools/pulumi-cli pulumi "$cli_version"
  exit 0
fi

build_cli() {
  (cd tools/pulumi-cli && go build "${tool_buildflags[@]}" -o "$out/pulumi" \
    -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$cli_version" \
    github.com/pulumi/pulumi/pkg/v3/cmd/pulumi)
}
build_k8s() {
  local src
  src=$(moddir tools/pulumi-kubernetes github.com/pulumi/pulumi-kubernetes/provider/v4)
  (cd tools/pulumi-kubernetes &&
    go run ./gen -version "$k8s_version" -src "$src/cmd/pulumi-resource-kubernetes" -out cmd/pulumi-resource-kubernetes &&
    go build "${tool_buildflags[@]}" -o "$out/pulumi-resource-kubernetes" \
      -ldflags "-s -w -X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version=$k8s_version" \
      ./cmd/pulumi-resource-kubernetes)
}
build_yaml() {
  (cd tools/pulumi-yaml && go build "${tool_buildflags[@]}" -o "$out/pulumi-language-yaml" -ldflags "-s -w" \
    github.com/pulumi/pulumi-yaml/cmd/pulumi-language-yaml)
}

cli=$(tool_build pulumi "$cli_version" build_cli)
k8s=$(tool_build pulumi-resource-kubernetes "$k8s_version" build_k8s)
yaml=$(tool_build pulumi-language-yaml "$yaml_version" build_yaml)

# The checkout's view: links into the cache. The Kubernetes plugin is kept off
# PATH (the engine would warn that it uses a plugin from $PATH); the engine
# finds it installed in PULUMI_HOME.
mkdir -p "$WB_TOOLS/bin" "$PULUMI_HOME"
ln -sfn "$cli/pulumi" "$WB_TOOLS/bin/pulumi"
ln -sfn "$yaml/pulumi-language-yaml" "$WB_TOOLS/bin/pulumi-language-yaml"

# The installed plugin remembers which cache entry it came from, so a new Go
# version (a new entry) reinstalls it.
plugin_dir=$PULUMI_HOME/plugins/resource-kubernetes-v$k8s_version
if [ "$(cat "$plugin_dir.source" 2>/dev/null)" = "$k8s" ] && [ -x "$plugin_dir/pulumi-resource-kubernetes" ]; then
  say "kubernetes plugin v$k8s_version: installed in $PULUMI_HOME"
else
  rm -rf "$plugin_dir" "$plugin_dir".*
  "$cli/pulumi" plugin install resource kubernetes "v$k8s_version" -f "$k8s/pulumi-resource-kubernetes" >&2
  echo "$k8s" > "$plugin_dir.source"
fi

# The S3 server of the archiver's S3 store tests (internal/s3test).
scripts/versitygw.sh
# promtool and Prometheus of the monitoring tests (internal/promtest).
scripts/prometheus.sh
