#!/usr/bin/env bash
# Builds understudy's OCI image (replica and primary, static, FROM scratch) for
# linux/amd64 and linux/arm64 into one podman manifest list, without pulling
# anything from a registry.
#
#   scripts/build-image.sh                 # understudy:<git describe>, both arches
#   IMAGE=understudy VERSION=v0.3.0 ARCHES="amd64" scripts/build-image.sh
#
# Produces the manifest list $IMAGE:$VERSION and one image per arch,
# $IMAGE:$VERSION-<arch> (the one for this machine is what `podman run
# $IMAGE:$VERSION` picks). Needs go and podman (see /etc/containers setup in
# the README); BUILDER=buildah uses buildah instead.
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=${IMAGE:-understudy}
VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
REVISION=${REVISION:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
ARCHES=${ARCHES:-amd64 arm64}
BUILDER=${BUILDER:-podman}
CA_BUNDLE=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
SOURCE=${SOURCE:-https://github.com/understudy-kv/understudy}

if [ ! -s "$CA_BUNDLE" ]; then
  echo "build-image: no CA bundle at $CA_BUNDLE (apt-get install ca-certificates, or set CA_BUNDLE)" >&2
  exit 1
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

# The root filesystem besides the binaries: users, CA bundle, /tmp, data dir.
mkdir -p "$stage/rootfs/etc/ssl/certs" "$stage/rootfs/tmp" "$stage/data"
cp deploy/image/passwd deploy/image/group "$stage/rootfs/etc/"
cp "$CA_BUNDLE" "$stage/rootfs/etc/ssl/certs/ca-certificates.crt"
chmod 0644 "$stage/rootfs/etc/passwd" "$stage/rootfs/etc/group" "$stage/rootfs/etc/ssl/certs/ca-certificates.crt"
chmod 1777 "$stage/rootfs/tmp"
chmod 0700 "$stage/data"

pkg=github.com/understudy-kv/understudy/version
ldflags="-s -w -X $pkg.Version=$VERSION -X $pkg.Revision=$REVISION"
for arch in $ARCHES; do
  echo "build-image: go build linux/$arch" >&2
  mkdir -p "$stage/linux-$arch"
  CGO_ENABLED=0 GOOS=linux GOARCH="$arch" go build -trimpath -buildvcs=false -ldflags "$ldflags" \
    -o "$stage/linux-$arch/" ./cmd/replica ./cmd/primary
done

# A fresh manifest list each time, so an old arch's image is not kept in it.
"$BUILDER" manifest rm "$IMAGE:$VERSION" >/dev/null 2>&1 || true
"$BUILDER" manifest create "$IMAGE:$VERSION" >/dev/null
for arch in $ARCHES; do
  echo "build-image: $BUILDER build linux/$arch" >&2
  "$BUILDER" build --platform "linux/$arch" -f Containerfile \
    --build-arg VERSION="$VERSION" --build-arg REVISION="$REVISION" --build-arg SOURCE="$SOURCE" \
    --tag "$IMAGE:$VERSION-$arch" --manifest "$IMAGE:$VERSION" "$stage"
done
for arch in $ARCHES; do
  # (podman 4.3's `images` trips over manifest lists; inspect does not.)
  size=$("$BUILDER" image inspect --format '{{.Size}}' "$IMAGE:$VERSION-$arch")
  echo "$IMAGE:$VERSION-$arch $((size / 1000000)) MB ($size bytes)"
done
echo "build-image: manifest list $IMAGE:$VERSION ($ARCHES), version $VERSION, revision $REVISION" >&2
