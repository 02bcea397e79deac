#!/usr/bin/env bash
# Builds the Pulumi CLI, the Kubernetes provider plugin and the YAML language
# host from the Go module proxy into .tools/ (git-ignored), and installs the
# plugin into the project-local PULUMI_HOME (.tools/pulumi-home).
#
# Versions are pinned in one place each: the go.mod of tools/pulumi-cli,
# tools/pulumi-kubernetes and tools/pulumi-yaml. The Kubernetes plugin is
# stamped with the version that the pulumi-kubernetes SDK in the root go.mod
# asks for, so the engine finds it without downloading anything.
#
# A no-op when everything is built for the pinned versions. Prints the paths
# that the rest of the project uses (see scripts/env.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
. scripts/env.sh

export GOFLAGS=-buildvcs=false
mkdir -p "$WB_TOOLS/bin" "$PULUMI_HOME"

modver() { (cd "$1" && go list -m -f '{{.Version}}' "$2"); }
cli_version=$(modver tools/pulumi-cli github.com/pulumi/pulumi/pkg/v3)
k8s_version=$(modver . github.com/pulumi/pulumi-kubernetes/sdk/v4)
k8s_version=${k8s_version#v}  # the plugin reports 4.32.0; its install folder says v4.32.0
yaml_version=$(modver tools/pulumi-yaml github.com/pulumi/pulumi-yaml)

# built PATH VERSION: true when PATH was built for VERSION; mark records it.
built() { [ -x "$WB_TOOLS/$1" ] && [ "$(cat "$WB_TOOLS/$1.version" 2>/dev/null)" = "$2" ]; }
mark() { echo "$2" > "$WB_TOOLS/$1.version"; }
say() { echo "tools: $*" >&2; }

if command -v pulumi >/dev/null 2>&1 && [ "$(command -v pulumi)" != "$WB_TOOLS/bin/pulumi" ]; then
  say "a pulumi is on PATH at $(command -v pulumi); the project uses its own $WB_TOOLS/bin/pulumi $cli_version"
fi

if built bin/pulumi "$cli_version"; then
  say "pulumi $cli_version: built"
else
  say "building pulumi $cli_version (about 7 minutes cold)"
  (cd tools/pulumi-cli && go build -o "$WB_TOOLS/bin/pulumi" \
    -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$cli_version" \
    github.com/pulumi/pulumi/pkg/v3/cmd/pulumi)
  mark bin/pulumi "$cli_version"
fi

# The Kubernetes plugin is kept off PATH (the engine would warn that it uses a
# plugin from $PATH); the engine finds it installed in PULUMI_HOME.
mkdir -p "$WB_TOOLS/plugins"
if built plugins/pulumi-resource-kubernetes "v$k8s_version"; then
  say "pulumi-resource-kubernetes v$k8s_version: built"
else
  say "building pulumi-resource-kubernetes v$k8s_version (about 10 minutes cold)"
  src=$(cd tools/pulumi-kubernetes && go list -m -f '{{.Dir}}' github.com/pulumi/pulumi-kubernetes/provider/v4)
  (cd tools/pulumi-kubernetes &&
    go run ./gen -version "$k8s_version" -src "$src/cmd/pulumi-resource-kubernetes" -out cmd/pulumi-resource-kubernetes &&
    go build -o "$WB_TOOLS/plugins/pulumi-resource-kubernetes" \
      -ldflags "-s -w -X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version=$k8s_version" \
      ./cmd/pulumi-resource-kubernetes)
  mark plugins/pulumi-resource-kubernetes "v$k8s_version"
  rm -rf "$PULUMI_HOME/plugins/resource-kubernetes-v$k8s_version"*
fi

if [ -d "$PULUMI_HOME/plugins/resource-kubernetes-v$k8s_version" ]; then
  say "kubernetes plugin v$k8s_version: installed in $PULUMI_HOME"
else
  "$WB_TOOLS/bin/pulumi" plugin install resource kubernetes "v$k8s_version" \
    -f "$WB_TOOLS/plugins/pulumi-resource-kubernetes" >&2
fi

if built bin/pulumi-language-yaml "$yaml_version"; then
  say "pulumi-language-yaml $yaml_version: built"
else
  say "building pulumi-language-yaml $yaml_version"
  (cd tools/pulumi-yaml && go build -o "$WB_TOOLS/bin/pulumi-language-yaml" -ldflags "-s -w" \
    github.com/pulumi/pulumi-yaml/cmd/pulumi-language-yaml)
  mark bin/pulumi-language-yaml "$yaml_version"
fi
