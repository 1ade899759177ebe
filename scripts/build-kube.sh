#!/usr/bin/env bash
# Builds kube-apiserver and kubectl from k8s.io/kubernetes (through the Go
# module proxy) for the kube-apiserver e2e test (test/kube), in a throwaway
# module outside this repository, and caches the binaries.
#
#   scripts/build-kube.sh                        # Kubernetes v1.37.2
#   KUBE_VERSION=v1.37.2 KUBE_CACHE=/tmp/kube scripts/build-kube.sh
#   KUBE_CMDS="kube-apiserver kubectl kubelet kube-controller-manager kube-scheduler" scripts/build-kube.sh
#
# The module lives in $KUBE_CACHE (default
# ${XDG_CACHE_HOME:-$HOME/.cache}/understudy/kube-<version>); the binaries in
# $KUBE_CACHE/bin. KUBE_CMDS names the commands (default: kube-apiserver and
# kubectl, what test/kube runs; a node needs the other three too). Prints
# their paths, one a line, in KUBE_CMDS' order. A second run with every
# binary present builds nothing. k8s.io/kubernetes maps its
# staging modules (k8s.io/api, k8s.io/apiserver, ...) to ./staging with
# `replace`, which only works inside its own repository; here each is mapped to
# its published v0.<minor>.<patch> tag instead, the list taken from that
# version's own go.mod. Builds run under `nice -n 19`: the machine is shared.
set -euo pipefail
# shellcheck source=lib/tools-go.sh
source "$(dirname "$0")/lib/tools-go.sh"
export GOWORK=off

KUBE_VERSION=${KUBE_VERSION:-v1.37.2}
KUBE_CACHE=${KUBE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/understudy/kube-$KUBE_VERSION}
KUBE_CMDS=${KUBE_CMDS:-kube-apiserver kubectl}
bin=$KUBE_CACHE/bin

for cmd in $KUBE_CMDS; do
  case $cmd in
    kube-apiserver | kubectl | kubelet | kube-controller-manager | kube-scheduler | kube-proxy) ;;
    *) echo "build-kube: KUBE_CMDS names $cmd; want some of kube-apiserver kubectl kubelet kube-controller-manager kube-scheduler kube-proxy" >&2; exit 1 ;;
  esac
done
print_paths() {
  for cmd in $KUBE_CMDS; do echo "$bin/$cmd"; done
}
missing=0
for cmd in $KUBE_CMDS; do [ -x "$bin/$cmd" ] || missing=1; done
if [ $missing = 0 ]; then
  print_paths
  exit 0
fi

case $KUBE_VERSION in
  v1.*.*) ;;
  *) echo "build-kube: KUBE_VERSION=$KUBE_VERSION is not a release tag like v1.37.2" >&2; exit 1 ;;
esac
# Staging modules are tagged v0.<minor>.<patch> for Kubernetes v1.<minor>.<patch>.
staging_version=v0.${KUBE_VERSION#v1.}

mkdir -p "$KUBE_CACHE" "$bin"
cd "$KUBE_CACHE"

gomod=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')
if [ ! -s "$gomod" ]; then
  echo "build-kube: could not download k8s.io/kubernetes@$KUBE_VERSION through $(go env GOPROXY)" >&2
  exit 1
fi
staging=$(sed -n '/^replace (/,/^)/s/^[[:space:]]*\(k8s\.io\/[^[:space:]]*\) => \.\/staging\/.*/\1/p' "$gomod")
if [ -z "$staging" ]; then
  echo "build-kube: no staging replace block in $gomod" >&2
  exit 1
fi
go_line=$(grep -m1 '^go ' "$gomod")

{
  echo "module understudy.local/kube-build"
  echo
  echo "$go_line"
  echo
  echo "require k8s.io/kubernetes $KUBE_VERSION"
  echo
  echo "replace ("
  for m in $staging; do
    echo "	$m => $m $staging_version"
  done
  echo ")"
} >go.mod
write_tools_go k8s.io/kubernetes $KUBE_CMDS

# The version stamps Kubernetes' own build sets (hack/lib/version.sh), so
# that the binaries report $KUBE_VERSION rather than v0.0.0-master.
minor=${KUBE_VERSION#v1.}
minor=${minor%%.*}
ldflags=""
for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
  ldflags+=" -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done

# Resolve the whole graph (downloads every dependency once); go.sum follows.
nice -n 19 go mod tidy -e >&2
for cmd in $KUBE_CMDS; do
  if [ ! -x "$bin/$cmd" ]; then
    nice -n 19 go build -trimpath -ldflags "$ldflags" -o "$bin/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd" >&2
    mv "$bin/$cmd.tmp" "$bin/$cmd"
  fi
done
print_paths
