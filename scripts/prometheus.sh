#!/usr/bin/env bash
# Builds promtool and prometheus, which the monitoring tests run (promtool
# check rules / test rules over deploy/monitoring's alert rules; a real
# Prometheus that scrapes the exporter and evaluates the rules), from the Go
# module proxy into the tool cache (scripts/lib/toolcache.sh) and links them
# as $WB_TOOLS/bin/promtool and $WB_TOOLS/bin/prometheus (.tools/bin by
# default). scripts/tools.sh runs it, so `make tools` and `make test` build
# them too; a second checkout on the machine builds nothing.
#
# The version is pinned in tools/prometheus/go.mod. Both are built with the
# remove_all_sd tag: the tests scrape static targets only, and the service
# discovery plugins (AWS, Azure, GCE, ... ) are most of a cold build. The web
# UI's assets are not embedded (no builtinassets tag): the tests use the HTTP
# API only.
#
#   scripts/prometheus.sh           build what is missing
#   scripts/prometheus.sh promtool  promtool only
#   scripts/prometheus.sh prefetch  download their modules unless both are built
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
. scripts/env.sh
. scripts/lib/toolcache.sh
export GOFLAGS=-buildvcs=false

version=$(modver tools/prometheus/go.mod github.com/prometheus/prometheus)
[ -n "$version" ] || { say "cannot read the prometheus version from tools/prometheus/go.mod"; exit 1; }
# v0.316.0 is Prometheus 3.16.0 (the Go module's versions are v0.<major><minor>.<patch>).
if [ "${1:-}" = prefetch ]; then tool_prefetch tools/prometheus promtool "$version" prometheus "$version"; exit 0; fi
semver=${version#v0.}
semver=$((${semver%%.*} / 100)).$((${semver%%.*} % 100)).${semver#*.}

build_one() {
  (cd tools/prometheus && go build "${tool_buildflags[@]}" -tags remove_all_sd -o "$out/$1" \
    -ldflags "-s -w -X github.com/prometheus/common/version.Version=$semver -X github.com/prometheus/common/version.Revision=$version" \
    "github.com/prometheus/prometheus/cmd/$1")
}
build_promtool() { build_one promtool; }
build_prometheus() { build_one prometheus; }

mkdir -p "$WB_TOOLS/bin"
dir=$(tool_build promtool "$version" build_promtool)
ln -sfn "$dir/promtool" "$WB_TOOLS/bin/promtool"
[ "${1:-}" = promtool ] && exit 0
dir=$(tool_build prometheus "$version" build_prometheus)
ln -sfn "$dir/prometheus" "$WB_TOOLS/bin/prometheus"
