# Sourced by scripts/tools.sh and scripts/cluster-tools.sh: the cache of tools
# built from the Go module proxy, shared by every checkout on the machine.
#
# An entry is a folder $WB_TOOL_CACHE/<name>-<version>-<go version>/ holding
# the tool's files. It is built under a temp name beside it and renamed into
# place only when the build succeeded, so a killed or failed build is never
# taken for a built tool; a leftover temp folder is removed by the next build.
# One build at a time per cache (flock), so two clones building at once wait
# for each other instead of building twice.
#
#   WB_CACHE       default ${XDG_CACHE_HOME:-$HOME/.cache}/worldbackup
#   WB_TOOL_CACHE  default $WB_CACHE/tools

WB_CACHE=${WB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/worldbackup}
WB_TOOL_CACHE=${WB_TOOL_CACHE:-$WB_CACHE/tools}
export WB_CACHE WB_TOOL_CACHE

say() { echo "tools: $*" >&2; }

# tool_buildflags: how the tools that only the tests and the demo run are
# compiled (the Pulumi CLI, its Kubernetes plugin and YAML host, sdkgen,
# versitygw, promtool, prometheus, and the single node of the tier-5 tests:
# cluster-tools.sh): without the compiler's optimizations and inlining (-N
# -l, as for a debugger), which cuts their cold compile by about a quarter
# (the node's Kubernetes alone: 637 s to about 480 s on 2 cores); they run
# the same code, more slowly where they are busy, which a test node serving
# a few Jobs never is for long. One set for all of them, so the standard
# library and the modules they share compile once. The bench's peers
# (bench-tools.sh) and the archiver, whose speed is measured, are compiled
# with optimizations. -dwarf=false: no debug information is generated, which
# the -s -w links dropped anyway (stack traces come from the pclntab): about
# 6% less CPU.
tool_buildflags=(-trimpath "-gcflags=all=-N -l -dwarf=false")

# build_gogc is the GOGC of the compiler and linker in tool_build (and in
# make test's own builds): the compiler's heap may grow to five times its
# live data before it collects, which takes about an eighth off its CPU time
# for about twice its memory (1.2 GB at most per compile of this module's
# dependencies; two run at once). It changes no output and no cache key.
# The programs a build makes never run with it.
build_gogc=400

# go_version: the Go toolchain's version (go1.26.8), part of every cache key.
go_version() { go env GOVERSION; }

# modver GOMOD MODULE: MODULE's version as GOMOD requires it, read from the
# file itself (no module download, no network).
modver() {
  awk -v m="$2" '{for (i = 1; i < NF; i++) if ($i == m) {print $(i+1); exit}}' "$1"
}

# moddir TOOLDIR MODULE: the folder of MODULE (as TOOLDIR's go.mod pins it)
# in the module cache, downloaded first. `go list -m -f {{.Dir}}` alone
# prints "" for a module that is not in the cache yet, which is what broke a
# fresh machine once; `go mod download -json` fetches it and says where.
moddir() {
  local json dir
  json=$(cd "$1" && go mod download -json "$2") || { say "downloading $2 for $1 failed"; echo "$json" >&2; return 1; }
  dir=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
  [ -n "$dir" ] && [ -f "$dir/go.mod" ] || { say "$2 is not in the module cache after download"; echo "$json" >&2; return 1; }
  echo "$dir"
}

# tool_dir NAME VERSION: the entry's folder (whether or not it is built).
tool_dir() { echo "$WB_TOOL_CACHE/$1-$2-$(go_version)"; }

# tool_prefetch DIR NAME VERSION [NAME VERSION]...: downloads the modules
# of the tools module DIR (go mod download) unless every named entry is
# built. make test runs it in the background while the first tool compiles,
# so a later build does not wait for its downloads (10-30 s each on a new
# machine). Quiet; a failure is left to the build, which says what failed.
tool_prefetch() {
  local dir=$1; shift
  while [ $# -ge 2 ]; do
    if ! [ -d "$(tool_dir "$1" "$2")" ]; then
      (cd "$dir" && go mod download) >/dev/null 2>&1 || true
      return 0
    fi
    shift 2
  done
}

# tool_build NAME VERSION CMD...: builds the entry unless it exists. CMD runs
# with $out set to an empty temp folder that it fills; on success the folder
# is renamed to $(tool_dir NAME VERSION). Prints the entry's folder.
tool_build() {
  local name=$1 version=$2; shift 2
  local dir; dir=$(tool_dir "$name" "$version")
  mkdir -p "$WB_TOOL_CACHE"
  if [ -d "$dir" ]; then
    say "$name $version: cached in $dir"
    echo "$dir"; return 0
  fi
  (
    flock 9
    if [ -d "$dir" ]; then exit 0; fi  # built by another checkout while we waited
    rm -rf "$dir".tmp.*
    out=$(mktemp -d "$dir.tmp.XXXXXX")
    export out GOGC=$build_gogc
    say "building $name $version into $dir"
    start=$SECONDS
    if ! "$@"; then
      rm -rf "$out"
      say "building $name $version failed"
      exit 1
    fi
    mv -T "$out" "$dir"
    say "built $name $version in $((SECONDS - start)) s"
  ) 9>"$WB_TOOL_CACHE/.lock" >&2 || return 1
  echo "$dir"
}
