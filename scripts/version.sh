#!/usr/bin/env bash
# Prints the version the plugin and the SDKs are stamped with (semver, no
# leading v), from the git tag: `make build` and `make dist` use it.
#
#   on a tag vX.Y.Z                 X.Y.Z
#   N commits after the tag vX.Y.Z  X.Y.(Z+1)-devN+g<short sha>   (after X.Y.Z, before X.Y.(Z+1))
#   N commits after vX.Y.Z-rc.1     X.Y.Z-rc.1.devN+g<short sha>
#   no tag yet, N commits           0.1.0-devN+g<short sha>
#   not a git checkout              0.1.0-dev
#   uncommitted changes             .dirty appended to the +build part (+dirty on a tag)
#
# "devN", one identifier, is what Pulumi's Python generator turns into PEP
# 440's .devN (X.Y.Z.devN+g<sha>: before X.Y.Z there too); "dev.N" would
# become a local version, which sorts after X.Y.Z.
#
# VERSION overrides it (a leading v is dropped), e.g. VERSION=1.2.3 make dist.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -n "${VERSION:-}" ]; then
  echo "${VERSION#v}"
  exit 0
fi
if ! sha=$(git rev-parse --short=7 HEAD 2>/dev/null); then
  echo "0.1.0-dev"
  exit 0
fi
dirty=
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  dirty=.dirty
fi
# The newest tag that looks like a version, and how far HEAD is past it.
if desc=$(git describe --tags --match 'v[0-9]*' --long --abbrev=7 2>/dev/null); then
  # v1.2.3-4-gabcdef0 (the tag may hold dashes itself: v1.2.3-rc.1-4-gabcdef0)
  tag=${desc%-*-g*}
  rest=${desc#"$tag"-}
  n=${rest%%-*}
  base=${tag#v}
  if [ "$n" = 0 ]; then
    if [ -z "$dirty" ]; then
      echo "$base"
    else
      echo "$base+dirty"
    fi
  elif [[ $base == *-* ]]; then
    echo "$base.dev$n+g$sha$dirty"
  else
    IFS=. read -r major minor patch <<<"$base"
    echo "$major.$minor.$((patch + 1))-dev$n+g$sha$dirty"
  fi
else
  echo "0.1.0-dev$(git rev-list --count HEAD)+g$sha$dirty"
fi
