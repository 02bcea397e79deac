#!/usr/bin/env bash
# Builds the peers that `make bench` measures the archiver against, restic
# and kopia, from the Go module proxy into the tool cache
# (scripts/lib/toolcache.sh: ~/.cache/worldbackup/tools/<name>-<version>-<go
# version>) and links them as $WB_TOOLS/bin/restic and $WB_TOOLS/bin/kopia
# (.tools/bin by default). Only scripts/bench.sh runs it (on demand): `make
# test` and `make tools` never build the peers. A second checkout on the
# machine builds nothing.
#
#   restic: `go install github.com/restic/restic/cmd/restic@VERSION`
#   kopia:  the proxy refuses `go install` for it, so `go mod download -json
#           github.com/kopia/kopia@VERSION`, then `go build` in its module
#           folder (as kopia's Makefile does, the version stamped in).
#
# The versions are pinned here, once: BENCH_RESTIC_VERSION, BENCH_KOPIA_VERSION.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
. scripts/env.sh
. scripts/lib/toolcache.sh
export GOFLAGS=-buildvcs=false

restic_version=v0.19.1
kopia_version=v0.22.3

build_restic() {
  GOBIN=$out go install -trimpath -ldflags "-s -w" "github.com/restic/restic/cmd/restic@$restic_version"
}
build_kopia() {
  local json dir
  json=$(cd "$out" && go mod download -json "github.com/kopia/kopia@$kopia_version") ||
    { say "downloading kopia $kopia_version failed"; echo "$json" >&2; return 1; }
  dir=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
  [ -n "$dir" ] && [ -f "$dir/go.mod" ] || { say "kopia $kopia_version is not in the module cache after download"; echo "$json" >&2; return 1; }
  (cd "$dir" && go build -trimpath -o "$out/kopia" \
    -ldflags "-s -w -X github.com/kopia/kopia/repo.BuildVersion=${kopia_version#v} -X github.com/kopia/kopia/repo.BuildInfo=$kopia_version" .)
}

restic=$(tool_build restic "$restic_version" build_restic)
kopia=$(tool_build kopia "$kopia_version" build_kopia)
mkdir -p "$WB_TOOLS/bin"
ln -sfn "$restic/restic" "$WB_TOOLS/bin/restic"
ln -sfn "$kopia/kopia" "$WB_TOOLS/bin/kopia"
