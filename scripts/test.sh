#!/usr/bin/env bash
# The test command (README: `make test`): every tier, as CI runs it.
#  1. the Pulumi tools, versitygw, promtool and prometheus, built from the Go module proxy
#     when absent (scripts/tools.sh; the modules of those not built yet download in the
#     background meanwhile);
#     as root (or CI=true) also the cluster tools (scripts/cluster-tools.sh) and the
#     archiver image (scripts/image.sh) that tier 5 runs on a real node;
#  2. PostgreSQL: DATABASE_URL when set, else the local server on 127.0.0.1:5432 when it
#     lets the postgres user in without a password (scripts/lib/pg.sh), else each test
#     binary starts a private one with initdb/pg_ctl (internal/pgtest);
#  3. `go test` over the whole module (unit, component, catalog, stack) with every go vet
#     check (-vet=all), the node tests and the release build first, all compiled as the
#     release is (CGO_ENABLED=0, -trimpath);
#  4. a short fuzz run of the restore extractor.
# Prints "N passed, N failed, N skipped" last. With CI=true a missing dependency fails.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
. scripts/env.sh
. scripts/lib/toolcache.sh # build_gogc
export GOFLAGS=-buildvcs=false

log_dir=${TEST_LOG_DIR:-$root/.tools/test-logs}
mkdir -p "$log_dir"
export TEST_LOG_DIR=$log_dir # tests keep artifacts there (the status page's screenshot)
log=$log_dir/go-test.log

scripts/doctor.sh test || { echo "0 passed, 1 failed"; exit 1; }
# The downloads of the tools not built yet, and of this module, in the
# background while the first tool compiles: each build would otherwise start
# by waiting for its own (a few minutes in all on a new machine).
{
  scripts/tools.sh prefetch
  if [ "$(id -u)" = 0 ] || [ "${CI:-}" = true ]; then scripts/cluster-tools.sh prefetch; fi
  go mod download
} >/dev/null 2>&1 &
prefetch=$!
trap 'kill "$prefetch" 2>/dev/null' EXIT
scripts/tools.sh || { echo "test: building the Pulumi tools failed (see above)"; exit 1; }
scripts/sdks.sh tools || { echo "test: building the SDK generator or installing the SDK tests' npm packages failed (see above)"; exit 1; }
# Everything after the tool builds compiles this module in one configuration,
# the release one (static, -trimpath: scripts/image.sh, scripts/dist.sh): go test
# and the binaries the tests and scripts build (the archiver, the
# plugin, the node's images) then share one compile of each package instead
# of two or three. The module has no cgo.
export CGO_ENABLED=0 GOFLAGS="-buildvcs=false -trimpath"
# Tier 5 (a real node, internal/kubenode) needs root, the cluster tools and the
# archiver image; as root (always in CI) build what is missing and the image of
# this checkout. Elsewhere those tests skip, saying so.
if [ "$(id -u)" = 0 ] || [ "${CI:-}" = true ]; then
  scripts/cluster-tools.sh || { echo "test: building the cluster tools failed (see above)"; exit 1; }
  GOGC=${GOGC:-$build_gogc} scripts/image.sh >/dev/null || { echo "test: building the archiver image failed (see above)"; exit 1; }
fi

if [ -z "${DATABASE_URL:-}" ]; then
  . scripts/lib/pg.sh
  if local_pg; then
    export DATABASE_URL="postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
    echo "test: using the PostgreSQL server on 127.0.0.1:5432"
  else
    echo "test: no DATABASE_URL, and $local_pg_why: tests start a private server (initdb/pg_ctl)"
  fi
fi

# The long poles first: go test starts the packages' runs in the order given
# (two at a time on two cores), and the node tests (program/nodetest, ~11 min,
# several of them waiting on the cron minute with the CPUs idle) and the
# release build (sdk's TestDist, ~5 min) would otherwise start last and run
# alone. Every other package follows in go list's order.
first=(./program/nodetest ./sdk)
mapfile -t rest < <(go list ./... | grep -v -x -e "$(go list -m)/program/nodetest" -e "$(go list -m)/sdk")
echo "test: go test ${first[*]} and the other ${#rest[@]} packages (full log: $log)"
# -vet=all: every check of `go vet ./...` (not only go test's few), on each
# package as part of its test, so a vet finding fails that package and the
# vet work overlaps the other packages' instead of running before all of them.
# -s -w: the test binaries are linked without a symbol table and DWARF, which
# only a debugger reads (stack traces come from the pclntab); linking sixty
# of them is a good part of go test's time on a cold cache.
# The compiler and linker run with build_gogc (scripts/lib/toolcache.sh);
# the test binaries, and what they start, with Go's default, through
# -exec: the memory bounds the tests check are of the default.
gogc=()
if [ -z "${GOGC:-}" ]; then gogc=(env GOGC="$build_gogc"); fi
"${gogc[@]}" go test -count=1 -v -timeout 40m -vet=all -ldflags="-s -w" ${gogc[0]:+-exec "env -u GOGC"} \
  "${first[@]}" "${rest[@]}" > "$log" 2>&1
status=$?
grep -E '^(ok|FAIL|---|panic:|\s+--- FAIL)|^\s+\S+_test\.go:[0-9]+:|^\S+\.go:[0-9]+:[0-9]+: ' "$log" | grep -v -- '--- PASS' | grep -v -- '--- SKIP' || true

fuzz_log=$log_dir/fuzz.log
if go list ./archiver/extract >/dev/null 2>&1 && grep -q 'func FuzzRestore' archiver/extract/*_test.go 2>/dev/null; then
  echo "test: fuzzing the restore extractor for ${FUZZTIME:-30s}"
  if go test ./archiver/extract -run '^$' -fuzz '^FuzzRestore$' -fuzztime "${FUZZTIME:-30s}" > "$fuzz_log" 2>&1; then
    echo "--- PASS: FuzzRestore (fuzzing)" >> "$log"
  else
    cat "$fuzz_log"; echo "--- FAIL: FuzzRestore (fuzzing)" >> "$log"; status=1
  fi
fi

passed=$(grep -cE '^\s*--- PASS' "$log")
failed=$(grep -cE '^\s*--- FAIL' "$log")
skipped=$(grep -cE '^\s*--- SKIP' "$log")
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi  # a build failure or panic has no --- FAIL line
echo "$passed passed, $failed failed, $skipped skipped"
exit $status
