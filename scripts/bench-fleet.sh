#!/usr/bin/env bash
# make bench with BENCH_FLEET=1: what a fleet costs in render mode (issue 27),
# program/fleetbench: the same stack config as one stack and through the
# fleet's shards (program/fleet), for each size and variant: preview, first
# up, up with nothing changed, up with a new runId; wall, CPU, peak RSS of
# the process tree, state size. Needs the tools (scripts/tools.sh).
#
#   BENCH_FLEET_SERVERS="10 100 1000"   fleet sizes
#   BENCH_FLEET_VARIANTS="backup full"  backup: backups only; full: each server
#                                       with a schedule, retention and a prune
#   BENCH_FLEET_SINGLE_MAX=100          one-stack baseline up to this size (quadratic)
#   BENCH_FLEET_SIZE=50                 servers per shard
#   BENCH_FLEET_PARALLEL=2              shards at once
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
. scripts/env.sh
scripts/tools.sh >&2
exec go run ./program/fleetbench \
  -servers "${BENCH_FLEET_SERVERS:-10 100 1000}" \
  -variants "${BENCH_FLEET_VARIANTS:-backup full}" \
  -single-max "${BENCH_FLEET_SINGLE_MAX:-100}" \
  -size "${BENCH_FLEET_SIZE:-50}" \
  -parallel "${BENCH_FLEET_PARALLEL:-2}"
