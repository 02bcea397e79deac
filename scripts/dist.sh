#!/usr/bin/env bash
# The release files of the worldbackup Pulumi package (make dist), into OUT
# (default dist/), all stamped with one version (scripts/version.sh: the git
# tag, or 0.1.0-dev+g<sha> before the first one):
#
#   pulumi-resource-worldbackup-v<version>-<os>-<arch>.tar.gz
#       the plugin for linux, darwin, windows × amd64, arm64: the binary
#       (.exe on windows) at the archive's root with LICENSE and README.md,
#       the layout `pulumi plugin install` and the schema's pluginDownloadURL
#       (a GitHub release's assets) expect.
#   worldbackup-pulumi-worldbackup-<version>.tgz
#       the TypeScript SDK (npm pack of the compiled package @worldbackup/pulumi-worldbackup).
#   pulumi_worldbackup-<pep440 version>.tar.gz, pulumi_worldbackup-<pep440 version>-py3-none-any.whl
#       the Python SDK (sdist and wheel, scripts/lib/pydist.py).
#   pulumi-worldbackup_<version>_checksums.txt
#       `sha256sum -c` lines for every file above.
#
# The SDKs are generated from the schema of the stamped plugin (so their
# version and pulumi-plugin.json name the same release) with the generator
# `scripts/sdks.sh tools` builds. The Go SDK is the module itself: Go
# programs `go get github.com/worldbackup/worldbackup/provider@v<version>`
# (the schema's language.go.importBasePath), nothing to pack.
#
# Reproducible: CGO_ENABLED=0, -trimpath, no build ID, no VCS stamp; every
# archive entry has the commit's time ($SOURCE_DATE_EPOCH overrides it), owner
# 0/0 and a fixed mode; gzip without name or time; npm pack's own fixed times.
# The same commit built with the same Go toolchain gives the same bytes.
#
# Environment:
#   VERSION            the version instead of scripts/version.sh's
#   DIST_TARGETS       os/arch pairs (default: the six above)
#   DIST_SDKS          the SDKs to pack (default "nodejs python"; "" for none)
#   SOURCE_DATE_EPOCH  the archives' time (default: the commit's)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
. scripts/env.sh
GO=${GO:-go}
say() { echo "dist: $*" >&2; }

out=${1:-dist}
mkdir -p "$out"
out=$(cd "$out" && pwd)
version=$(scripts/version.sh)
targets=${DIST_TARGETS-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64}
sdks=${DIST_SDKS-nodejs python}
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
plugin=pulumi-resource-worldbackup
checksums=pulumi-worldbackup_${version}_checksums.txt
ldflags="-s -w -buildid= -X main.version=$version"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
say "version $version, into $out"
# Only this version's files are rewritten; other releases in OUT stay.
rm -f "$out/$plugin-v$version-"*.tar.gz "$out/$checksums"
files=()

# tar_gz DIR ARCHIVE FILE...: the files of DIR (at the archive's root) as a
# reproducible .tar.gz.
tar_gz() {
  local dir=$1 archive=$2; shift 2
  touch -h -d "@$epoch" "${@/#/$dir/}"
  tar -C "$dir" --sort=name --format=gnu --mtime="@$epoch" --owner=0 --group=0 --numeric-owner \
    -cf - "$@" | gzip -n -9 >"$archive"
}

# What the SDKs need, checked before the plugin builds (minutes each).
gen=$WB_TOOLS/bin/pulumi-sdkgen
modules=$WB_TOOLS/sdk-node/node_modules
for sdk in $sdks; do
  [ -x "$gen" ] || { say "no SDK generator at $gen: run scripts/sdks.sh tools"; exit 1; }
  case $sdk in
    nodejs)
      [ -d "$modules" ] || { say "no TypeScript compiler in $modules: run scripts/sdks.sh tools"; exit 1; }
      for c in node npm; do
        command -v "$c" >/dev/null || { say "the TypeScript SDK needs $c (apt-get install -y nodejs npm), or DIST_SDKS=python"; exit 1; }
      done
      ;;
    python)
      command -v python3 >/dev/null || { say "the Python SDK needs python3 (apt-get install -y python3), or DIST_SDKS=nodejs"; exit 1; }
      ;;
    *) say "unknown SDK $sdk in DIST_SDKS: want nodejs or python"; exit 2 ;;
  esac
done

hostbin=
for target in $targets; do
  os=${target%/*} arch=${target#*/}
  exe=$plugin
  [ "$os" = windows ] && exe=$plugin.exe
  dir=$work/$os-$arch
  mkdir -p "$dir"
  say "building $plugin for $os/$arch"
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch GOFLAGS=-buildvcs=false \
    "$GO" build -trimpath -ldflags "$ldflags" -o "$dir/$exe" ./provider/cmd/pulumi-resource-worldbackup
  install -m 0644 LICENSE "$dir/LICENSE"
  install -m 0644 provider/cmd/pulumi-resource-worldbackup/README.md "$dir/README.md"
  chmod 0755 "$dir/$exe"
  archive=$plugin-v$version-$os-$arch.tar.gz
  tar_gz "$dir" "$out/$archive" "$exe" LICENSE README.md
  files+=("$archive")
  if [ "$target" = "$($GO env GOOS)/$($GO env GOARCH)" ]; then hostbin=$dir/$exe; fi
done

if [ -n "$sdks" ]; then
  # The schema of the stamped plugin: its version is the SDKs'.
  if [ -z "$hostbin" ]; then
    hostbin=$work/host/$plugin
    GOFLAGS=-buildvcs=false "$GO" build -trimpath -ldflags "$ldflags" -o "$hostbin" ./provider/cmd/pulumi-resource-worldbackup
  fi
  got=$("$hostbin" -version)
  [ "$got" = "$version" ] || { say "the plugin says version $got, want $version"; exit 1; }
  "$hostbin" -schema >"$work/schema.json"
fi

for sdk in $sdks; do
  dir=$work/sdk-$sdk
  "$gen" -schema "$work/schema.json" -language "$sdk" -out "$dir"
  case $sdk in
    nodejs)
      # Compiled as Pulumi's own packages are (tsc into bin/, package.json
      # beside it), then packed from bin/ so the package holds JavaScript and
      # declarations, not TypeScript sources.
      ln -s "$modules" "$dir/node_modules"
      (cd "$dir" && node node_modules/typescript/bin/tsc -p tsconfig.json)
      install -m 0644 "$dir/package.json" "$dir/README.md" "$dir/bin/"
      install -m 0644 LICENSE "$dir/bin/LICENSE"
      tgz=$(cd "$dir/bin" && npm pack --ignore-scripts --silent --pack-destination "$out")
      files+=("$tgz")
      ;;
    python)
      install -m 0644 LICENSE "$dir/LICENSE"
      while read -r f; do files+=("$(basename "$f")"); done < <(python3 scripts/lib/pydist.py "$dir" "$out" "$epoch")
      ;;
    *) say "unknown SDK $sdk in DIST_SDKS: want nodejs or python"; exit 2 ;;
  esac
done

(cd "$out" && sha256sum -- "${files[@]}" >"$checksums")
say "wrote, in $out:"
(cd "$out" && ls -l -- "${files[@]}" "$checksums" >&2)
