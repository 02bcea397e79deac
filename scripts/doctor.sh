#!/usr/bin/env bash
# make doctor: says what this machine has and lacks for the project, each
# missing piece with the one command that installs it.
#
#   scripts/doctor.sh [demo|test]   (default: test; `make demo` and `make test` run it first)
#
# For demo: Go, PostgreSQL (DATABASE_URL, a server on 127.0.0.1:5432 or the
# server package for a private one), flock. For test, also: tar and zstd (the
# archives are checked with GNU tar), util-linux's unshare and setpriv, root
# (the restore, image and real-node tiers), libseccomp-dev, gcc and iproute2
# (the real-node tier builds runc with cgo and makes a bridge), node, npm and python3
# (the SDK tests, sdk/). A missing piece that a tier needs
# fails when CI=true (CI never skips) and warns elsewhere (those tests skip).
# Exit 1 when a piece is missing that the run cannot do without.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
. scripts/env.sh
. scripts/lib/pg.sh
mode=${1:-test}
ci=false; [ "${CI:-}" = true ] && ci=true
missing=0

ok() { printf '  ok       %-22s %s\n' "$1" "$2"; }
# lack NAME WHAT FIX HARD: HARD=1 is needed by every run, HARD=0 only by some tiers.
lack() {
  if [ "$4" = 1 ] || $ci; then
    printf '  MISSING  %-22s %s; install: %s\n' "$1" "$2" "$3"; missing=1
  else
    printf '  missing  %-22s %s (those tests skip); install: %s\n' "$1" "$2" "$3"
  fi
}
need_cmd() { # NAME PACKAGE HARD
  if command -v "$1" >/dev/null 2>&1; then ok "$1" "$(command -v "$1")"; else lack "$1" "not on PATH" "apt-get install -y $2" "$3"; fi
}

echo "doctor: what $mode needs on this machine"

want=$(awk '$1 == "go" {print $2; exit}' go.mod)
if have=$(go env GOVERSION 2>/dev/null); then
  have=${have#go}
  if [ "$(printf '%s\n%s\n' "$want" "$have" | sort -V | head -n 1)" = "$want" ]; then
    ok go "go$have (go.mod asks for $want or newer)"
  else
    lack go "go$have is older than go.mod's $want" "a newer Go from https://go.dev/dl (or GOTOOLCHAIN=go$want)" 1
  fi
else
  lack go "not on PATH" "a Go $want or newer from https://go.dev/dl" 1
fi

pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
if [ -n "${DATABASE_URL:-}" ]; then
  ok postgresql "DATABASE_URL is set"
elif local_pg; then
  ok postgresql "a server on 127.0.0.1:5432 lets the postgres user in"
elif [ -n "$pgbin" ] || command -v initdb >/dev/null; then
  ok postgresql "$local_pg_why; a private one is started with ${pgbin:-initdb}/initdb"
else
  lack postgresql "no DATABASE_URL, no initdb, and $local_pg_why" "apt-get install -y postgresql" 1
fi
need_cmd flock util-linux 1

if [ "$mode" = test ]; then
  need_cmd tar tar 0
  need_cmd zstd zstd 0
  need_cmd unshare util-linux 0
  need_cmd setpriv util-linux 0
  need_cmd ip iproute2 0
  need_cmd gcc gcc 0
  need_cmd node nodejs 0    # the SDK tests (sdk/): tsc and pyright run on node
  need_cmd npm npm 0
  need_cmd python3 python3 0 # the Python SDK test
  need_cmd chromium chromium 0 # the status page test (archiver/exporter): a real headless browser
  if [ "$(id -u)" = 0 ]; then ok root "running as root"; else lack root "not root: the restore, image and real-node tiers need it" "run as root (sudo -E make test)" 0; fi
  if [ -e /usr/include/seccomp.h ] || pkg-config --exists libseccomp 2>/dev/null; then
    ok libseccomp-dev "seccomp.h found (runc for the real-node tier)"
  else
    lack libseccomp-dev "no seccomp.h: runc for the real-node tier cannot be built" "apt-get install -y libseccomp-dev" 0
  fi
fi

echo "  tools    cache $WB_CACHE/tools (built on first use; a second checkout reuses them)"
if [ "$missing" = 1 ]; then
  echo "doctor: something needed is missing (see MISSING above)"
  exit 1
fi
