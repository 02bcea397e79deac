#!/usr/bin/env bash
# The TypeScript and Python SDKs of the worldbackup package, generated from
# provider/cmd/pulumi-resource-worldbackup/schema.json with Pulumi's own code
# generators (pkg/v3 codegen/nodejs and codegen/python).
#
#   scripts/sdks.sh          make sdks: build what is missing, then write sdk/nodejs and sdk/python
#   scripts/sdks.sh tools    build what is missing and link it (scripts/test.sh runs this)
#
# What it builds, into the tool cache outside the checkout (scripts/lib/toolcache.sh),
# linked from $WB_TOOLS (.tools):
#   - pulumi-sdkgen (tools/pulumi-cli/sdkgen): a small main over the code
#     generators, in the tools module of the Pulumi CLI, so it is built from
#     the very pkg/v3 version the CLI is; keyed by that version and the hash
#     of its source. Linked as
#     .tools/bin/pulumi-sdkgen.
#   - the npm packages the SDK tests (sdk/sdk_test.go) compile the TypeScript
#     SDK and type-check the Python programs with (typescript, @pulumi/pulumi,
#     pyright), exactly as tools/sdk-node/package-lock.json pins them (npm ci);
#     keyed by the TypeScript, @pulumi/pulumi and pyright versions and the lock
#     file's hash. Linked as .tools/sdk-node/node_modules.
#   - no build for the pulumi Python package: PyPI is not reachable here, so the
#     Python programs are type-checked against its source in the Go module
#     github.com/pulumi/pulumi/sdk/v3 (python/lib), at the version
#     tools/pulumi-cli/go.mod pins (the CLI's). Linked as
#     .tools/sdk-python/lib (its folder holds the package pulumi).
#
# The generated SDKs are not checked in (sdk/nodejs and sdk/python are in
# .gitignore): they follow from schema.json, which is, and the SDK tests
# generate their own from it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
. scripts/env.sh
. scripts/lib/toolcache.sh
export GOFLAGS=-buildvcs=false

cli_version=$(modver tools/pulumi-cli/go.mod github.com/pulumi/pulumi/pkg/v3)
[ -n "$cli_version" ] || { say "cannot read the pkg/v3 version from tools/pulumi-cli/go.mod"; exit 1; }

build_sdkgen() {
  (cd tools/pulumi-cli && go build "${tool_buildflags[@]}" -o "$out/pulumi-sdkgen" -ldflags "-s -w" ./sdkgen)
}

# node_key: the cache key of the npm packages: TypeScript, @pulumi/pulumi,
# pyright and the lock file's hash (the versions of everything else).
node_key() {
  local lock=tools/sdk-node/package-lock.json ts pulumi pyright hash
  ts=$(node -p 'require("./tools/sdk-node/package-lock.json").packages["node_modules/typescript"].version')
  pulumi=$(node -p 'require("./tools/sdk-node/package-lock.json").packages["node_modules/@pulumi/pulumi"].version')
  pyright=$(node -p 'require("./tools/sdk-node/package-lock.json").packages["node_modules/pyright"].version')
  hash=$(sha256sum "$lock" | cut -c1-12)
  echo "ts$ts-pulumi$pulumi-pyright$pyright-$hash"
}
build_node() {
  cp tools/sdk-node/package.json tools/sdk-node/package-lock.json "$out/"
  # --ignore-scripts: only the type declarations are needed, nothing is run.
  # --engine-strict=false: @pulumi/pulumi asks for node >= 22; compiling
  # against its types works on older ones.
  (cd "$out" && npm ci --ignore-scripts --no-audit --no-fund --engine-strict=false --loglevel=error >&2)
}

tools() {
  local gen node pysdk
  # Keyed by the pkg/v3 version and by sdkgen's own source: unlike the
  # upstream tools, its code lives here and may change at the same version.
  gen=$(tool_build pulumi-sdkgen "$cli_version-$(cat tools/pulumi-cli/sdkgen/*.go | sha256sum | cut -c1-12)" build_sdkgen)
  mkdir -p "$WB_TOOLS/bin" "$WB_TOOLS/sdk-node" "$WB_TOOLS/sdk-python"
  ln -sfn "$gen/pulumi-sdkgen" "$WB_TOOLS/bin/pulumi-sdkgen"
  pysdk=$(moddir tools/pulumi-cli github.com/pulumi/pulumi/sdk/v3)
  ln -sfn "$pysdk/python/lib" "$WB_TOOLS/sdk-python/lib"
  if command -v npm >/dev/null && command -v node >/dev/null; then
    node=$(tool_build sdk-node "$(node_key)" build_node)
    ln -sfn "$node/node_modules" "$WB_TOOLS/sdk-node/node_modules"
  else
    say "no node/npm on PATH: the TypeScript SDK test cannot run (apt-get install -y nodejs npm)"
  fi
}

case "${1:-}" in
  tools) tools ;;
  "")
    tools
    schema=provider/cmd/pulumi-resource-worldbackup/schema.json
    for lang in nodejs python; do
      rm -rf "sdk/$lang"
      "$WB_TOOLS/bin/pulumi-sdkgen" -schema "$schema" -language "$lang" -out "sdk/$lang"
      # pyproject.toml's readme is README.md beside it; the generator writes
      # it into the package folder only.
      if [ "$lang" = python ]; then cp sdk/python/pulumi_worldbackup/README.md sdk/python/README.md; fi
      say "generated sdk/$lang from $schema"
    done
    ;;
  *) echo "usage: scripts/sdks.sh [tools]" >&2; exit 2 ;;
esac
