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
# The plugin's and the YAML host's modules are aligned with the CLI's: every
# module that a tool compiles and the CLI compiles too is required at the
# CLI's version where that is newer (`align`), so those packages (gRPC,
# protobuf, OpenTelemetry, go-git, the x/ modules, ...; about a quarter of
# the plugin) compile once, for the CLI, and the later builds find them in
# the build cache. Each keeps the Pulumi SDK and pkg it was written against:
# pkg/v3's API changes between releases, and neither builds against the
# CLI's. Run `scripts/tools.sh align` after changing a version here.
# A cache entry of these three is keyed by the version and its module's
# go.sum, so an aligned build list is a new entry.
#
#   scripts/tools.sh                      build what is missing (make tools)
#   scripts/tools.sh moddir DIR MODULE    print MODULE's folder for the tools module DIR, downloaded first
#   scripts/tools.sh prefetch             download the modules of the tools not built yet, build nothing
#   scripts/tools.sh align [check]        align the plugin's and the YAML host's go.mod with the CLI's
#                                         (check: say what is not aligned, change nothing; exit 1 if anything)
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

# sumkey DIR: the first 12 hex digits of the SHA-256 of DIR's go.sum.
sumkey() { sha256sum "$1/go.sum" | cut -c1-12; }
cli_key=$cli_version-$(sumkey tools/pulumi-cli)
k8s_key=$k8s_version-$(sumkey tools/pulumi-kubernetes)
yaml_key=$yaml_version-$(sumkey tools/pulumi-yaml)

if [ "${1:-}" = prefetch ]; then
  # In the order they are built, the CLI last: it is built first, beside this.
  tool_prefetch tools/pulumi-kubernetes pulumi-resource-kubernetes "$k8s_key"
  tool_prefetch tools/pulumi-yaml pulumi-language-yaml "$yaml_key"
  scripts/versitygw.sh prefetch
  scripts/prometheus.sh prefetch
  tool_prefetch tools/pulumi-cli pulumi "$cli_key"
  exit 0
fi

# used DIR PACKAGE: "module version" of every module whose packages the
# build of PACKAGE in the tools module DIR compiles (the plugin's main
# embeds files gen writes: -e lists its imports without them).
used() { (cd "$1" && go list -e -deps -f '{{with .Module}}{{.Path}} {{.Version}}{{end}}' "$2" | sort -u); }

# misaligned DIR PACKAGE: the modules that PACKAGE compiles at an older
# version than the CLI does ($cli_used), as "module cli-version
# own-version". The Pulumi SDK and pkg are the tool's own.
misaligned() {
  join <(printf '%s\n' "$cli_used") <(used "$1" "$2") |
    while read -r mod cli own; do
      [ "$cli" != "$own" ] || continue
      case $mod in github.com/pulumi/pulumi/*) continue ;; esac
      if [ "$(printf '%s\n%s\n' "$cli" "$own" | sort -V | tail -1)" = "$cli" ]; then echo "$mod $cli $own"; fi
    done
}

if [ "${1:-}" = align ]; then
  status=0
  cli_used=$(used tools/pulumi-cli github.com/pulumi/pulumi/pkg/v3/cmd/pulumi) # align changes only the other two
  for t in "tools/pulumi-kubernetes ./cmd/pulumi-resource-kubernetes" "tools/pulumi-yaml github.com/pulumi/pulumi-yaml/cmd/pulumi-language-yaml"; do
    read -r dir pkg <<<"$t"
    # A raised requirement can pull in modules at older versions: again
    # until nothing is left (or the same is left twice, which is a module
    # the CLI's version cannot be given to).
    last=
    for _ in 1 2 3 4 5; do
      left=$(misaligned "$dir" "$pkg")
      [ -n "$left" ] && [ "$left" != "$last" ] || break
      if [ "${2:-}" = check ]; then break; fi
      args=()
      while read -r mod cli _; do args+=("-require=$mod@$cli"); done <<<"$left"
      (cd "$dir" && go mod edit "${args[@]}" && go mod tidy)
      last=$left
    done
    if [ -n "$left" ]; then
      say "$dir compiles these modules at older versions than the CLI (module, CLI's, its own):"
      printf '%s\n' "$left" >&2
      status=1
    else
      say "$dir: aligned with tools/pulumi-cli"
    fi
  done
  exit "$status"
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

cli=$(tool_build pulumi "$cli_key" build_cli)
k8s=$(tool_build pulumi-resource-kubernetes "$k8s_key" build_k8s)
yaml=$(tool_build pulumi-language-yaml "$yaml_key" build_yaml)

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
