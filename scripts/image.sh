#!/usr/bin/env bash
# Builds the archiver's OCI image without a Docker daemon, or pushes it.
#
#   scripts/image.sh                 (make image)
#       builds the static archiver (dist/archiver) and the image:
#       dist/image/oci          an OCI image layout (skopeo, crane, containerd, podman)
#       dist/image/archiver.tar `docker load -i dist/image/archiver.tar`
#       and prints the image digest.
#   scripts/image.sh push REGISTRY   (make image-push REGISTRY=ghcr.io/acme)
#       builds as above, then pushes REGISTRY/worldbackup-archiver:<version>
#       with the credentials of the Docker config ($DOCKER_CONFIG/config.json or
#       ~/.docker/config.json, credential helpers included: `docker login` or
#       `crane auth login` write it) and prints REGISTRY/worldbackup-archiver@<digest>,
#       the value for the stack's `worldbackup:image`.
#
# Reproducible: the binary is built with CGO_ENABLED=0, -trimpath and no build
# ID; the image's creation time and every file's time is the commit time
# (git log -1 --format=%ct; $SOURCE_DATE_EPOCH overrides it), so the same
# commit built with the same Go toolchain and CA bundle gives the same digest.
# Version: git describe --tags --always --dirty (dev outside git);
# revision: git rev-parse HEAD (unknown outside git).
#
# Environment: GO (default go), GOARCH (default: the build machine's),
# SOURCE (the org.opencontainers.image.source label), SOURCE_DATE_EPOCH.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
GO=${GO:-go}
out=dist/image
repo=worldbackup-archiver
say() { echo "image: $*" >&2; }

mode=build
registry=
case "${1:-build}" in
  build) ;;
  push) mode=push; registry=${2:-} ;;
  *) echo "usage: scripts/image.sh [build | push REGISTRY]" >&2; exit 2 ;;
esac
if [ "$mode" = push ] && [ -z "$registry" ]; then
  say "REGISTRY is empty: run \`make image-push REGISTRY=ghcr.io/<you>\` (or any registry/namespace);" \
      "the image goes to \$REGISTRY/$repo:<version>, with credentials from \`docker login\` / ~/.docker/config.json"
  exit 2
fi

if revision=$(git rev-parse --verify --quiet HEAD 2>/dev/null); then
  version=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
  created=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}
  buildvcs=auto
else
  revision=unknown
  version=dev
  created=${SOURCE_DATE_EPOCH:-0}
  buildvcs=false # no commit to stamp
fi
# An image tag allows [A-Za-z0-9_.-], at most 128 characters.
version=$(printf '%s' "$version" | tr -c 'A-Za-z0-9_.-' '-' | cut -c1-128)

mkdir -p dist
say "building the archiver $version (static, linux/$(${GO} env GOARCH))"
GOOS=linux CGO_ENABLED=0 "$GO" build -buildvcs="$buildvcs" -trimpath \
  -ldflags "-s -w -X main.version=$version -buildid=" \
  -o dist/archiver ./archiver/cmd/archiver
# mkimage runs here, so it is built for this machine whatever GOARCH says.
env -u GOOS -u GOARCH "$GO" build -o dist/mkimage ./archiver/cmd/mkimage

args=(-binary dist/archiver -version "$version" -revision "$revision" -created "$created" -out "$out")
if [ -n "${SOURCE:-}" ]; then
  args+=(-source "$SOURCE")
fi
digest=$(dist/mkimage "${args[@]}")
say "$repo:$version $digest (created $created, revision $revision)"

if [ "$mode" = build ]; then
  say "load it with: docker load -i $out/archiver.tar"
  echo "$digest"
  exit 0
fi

case "$version" in
  *-dirty) say "warning: the working tree has uncommitted changes; pushing $version anyway" ;;
esac
ref="${registry%/}/$repo:$version"
pushed=$(dist/mkimage -push "$ref" -out "$out")
say "pushed $ref; point the stack at it: pulumi config set worldbackup:image $pushed"
echo "$pushed"
