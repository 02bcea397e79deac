#!/usr/bin/env bash
# Builds versitygw, the S3 gateway over a POSIX folder that the archiver's S3
# store tests start (internal/s3test), from the Go module proxy into the tool
# cache (scripts/lib/toolcache.sh) and links it as $WB_TOOLS/bin/versitygw
# (.tools/bin by default). scripts/tools.sh runs it, so `make tools` and
# `make test` build it too; a second checkout on the machine builds nothing.
#
# The version is pinned in tools/versitygw/go.mod. `scripts/versitygw.sh
# prefetch` downloads its modules unless it is built, and builds nothing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
. scripts/env.sh
. scripts/lib/toolcache.sh
export GOFLAGS=-buildvcs=false

version=$(modver tools/versitygw/go.mod github.com/versity/versitygw)
[ -n "$version" ] || { say "cannot read the versitygw version from tools/versitygw/go.mod"; exit 1; }
if [ "${1:-}" = prefetch ]; then tool_prefetch tools/versitygw versitygw "$version"; exit 0; fi

build_versitygw() {
  (cd tools/versitygw && go build "${tool_buildflags[@]}" -o "$out/versitygw" -ldflags "-s -w" \
    github.com/versity/versitygw/cmd/versitygw)
}

dir=$(tool_build versitygw "$version" build_versitygw)
mkdir -p "$WB_TOOLS/bin"
ln -sfn "$dir/versitygw" "$WB_TOOLS/bin/versitygw"
