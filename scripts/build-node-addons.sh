#!/usr/bin/env bash
# Builds the cluster add-ons the Kubernetes node of scripts/kube-node.sh runs
# as pods, from their Go modules (through the Go module proxy), each in a
# throwaway module outside this repository, and caches the binaries:
#   coredns          github.com/coredns/coredns        (cluster DNS: the voters resolve the replicas' peer URLs)
#   metrics-server   sigs.k8s.io/metrics-server        (the resource metrics the cascaded overlay's HPA reads)
#   local-path-provisioner  github.com/rancher/local-path-provisioner  (the StatefulSet's volumes, as kind provisions them)
#
#   scripts/build-node-addons.sh                 # CoreDNS v1.15.0, metrics-server v0.8.0, local-path-provisioner v0.0.30
#   COREDNS_VERSION=v1.15.0 METRICS_SERVER_VERSION=v0.8.0 ADDONS_CACHE=/tmp/addons scripts/build-node-addons.sh
#
# Prints the binaries' paths, one a line, in that order. A
# second run with both present builds nothing. Static, without cgo. Builds run
# under `nice -n 19`.
set -euo pipefail
export GOWORK=off CGO_ENABLED=0

COREDNS_VERSION=${COREDNS_VERSION:-v1.15.0}
METRICS_SERVER_VERSION=${METRICS_SERVER_VERSION:-v0.8.0}
LOCAL_PATH_VERSION=${LOCAL_PATH_VERSION:-v0.0.30}
ADDONS_CACHE=${ADDONS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/understudy/node-addons}

# build NAME MODULE VERSION PACKAGE: go get PACKAGE@VERSION (of MODULE) in a throwaway
# module and build PACKAGE into $ADDONS_CACHE/bin/NAME-VERSION.
build() {
  local name=$1 module=$2 version=$3 pkg=$4
  local dir=$ADDONS_CACHE/$name-$version out=$ADDONS_CACHE/bin/$name-$version
  case $version in
    v*.*.*) ;;
    *) echo "build-node-addons: $name version $version is not a release tag like v1.2.3" >&2; exit 1 ;;
  esac
  if [ ! -x "$out" ]; then
    mkdir -p "$dir" "$ADDONS_CACHE/bin"
    (
      cd "$dir"
      [ -f go.mod ] || go mod init "understudy.local/$name-build" >/dev/null 2>&1
      if ! nice -n 19 go get "$pkg@$version" >&2; then
        echo "build-node-addons: could not get $pkg@$version ($module) through $(go env GOPROXY)" >&2
        exit 1
      fi
      nice -n 19 go build -trimpath -ldflags "-s -w" -o "$out.tmp" "$pkg" >&2
      mv "$out.tmp" "$out"
    )
  fi
  echo "$out"
}

build coredns github.com/coredns/coredns "$COREDNS_VERSION" github.com/coredns/coredns
build metrics-server sigs.k8s.io/metrics-server "$METRICS_SERVER_VERSION" sigs.k8s.io/metrics-server/cmd/metrics-server
build local-path-provisioner github.com/rancher/local-path-provisioner "$LOCAL_PATH_VERSION" github.com/rancher/local-path-provisioner
