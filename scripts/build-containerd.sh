#!/usr/bin/env bash
# Builds containerd, ctr and containerd-shim-runc-v2 from
# github.com/containerd/containerd/v2 (through the Go module proxy) for a
# Kubernetes node on this machine, in a throwaway module outside this
# repository, and caches the binaries.
#
#   scripts/build-containerd.sh                            # containerd v2.4.2
#   CONTAINERD_VERSION=v2.4.2 CONTAINERD_CACHE=/tmp/ctrd scripts/build-containerd.sh
#
# The module lives in $CONTAINERD_CACHE (default
# ${XDG_CACHE_HOME:-$HOME/.cache}/understudy/containerd-<version>); the
# binaries in its bin/. Prints their paths, one a line. A second run with all
# three present builds nothing. Static, without cgo, as containerd's own
# static release (its Makefile: osusergo netgo static_build; no cgo leaves
# out the btrfs snapshotter, which needs libbtrfs). runc comes from Debian
# (apt-get install runc). Builds run under `nice -n 19`.
set -euo pipefail
# shellcheck source=lib/tools-go.sh
source "$(dirname "$0")/lib/tools-go.sh"
export GOWORK=off

CONTAINERD_VERSION=${CONTAINERD_VERSION:-v2.4.2}
case $CONTAINERD_VERSION in
  v2.*.*) ;;
  *) echo "build-containerd: CONTAINERD_VERSION=$CONTAINERD_VERSION is not a v2 release tag like v2.4.2" >&2; exit 1 ;;
esac
CONTAINERD_CACHE=${CONTAINERD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/understudy/containerd-$CONTAINERD_VERSION}
bin=$CONTAINERD_CACHE/bin
cmds="containerd ctr containerd-shim-runc-v2"
pkg=github.com/containerd/containerd/v2

missing=0
for cmd in $cmds; do [ -x "$bin/$cmd" ] || missing=1; done
if [ $missing = 1 ]; then
  mkdir -p "$CONTAINERD_CACHE" "$bin"
  cd "$CONTAINERD_CACHE"
  gomod=$(go mod download -json "$pkg@$CONTAINERD_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')
  if [ ! -s "$gomod" ]; then
    echo "build-containerd: could not download $pkg@$CONTAINERD_VERSION through $(go env GOPROXY)" >&2
    exit 1
  fi
  {
    echo "module understudy.local/containerd-build"
    echo
    grep -m1 '^go ' "$gomod"
    echo
    echo "require $pkg $CONTAINERD_VERSION"
  } >go.mod
  write_tools_go "$pkg" $cmds
  nice -n 19 go mod tidy -e >&2
  ldflags="-X $pkg/version.Version=$CONTAINERD_VERSION -X $pkg/version.Package=$pkg"
  for cmd in $cmds; do
    if [ ! -x "$bin/$cmd" ]; then
      tags="urfave_cli_no_docs osusergo netgo static_build"
      [ "$cmd" = containerd-shim-runc-v2 ] && tags+=" no_grpc"
      CGO_ENABLED=0 nice -n 19 go build -trimpath -tags "$tags" -ldflags "$ldflags" -o "$bin/$cmd.tmp" "$pkg/cmd/$cmd" >&2
      mv "$bin/$cmd.tmp" "$bin/$cmd"
    fi
  done
fi
for cmd in $cmds; do echo "$bin/$cmd"; done
