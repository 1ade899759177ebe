#!/usr/bin/env bash
# Builds understudy's OCI image (replica and primary, static, FROM scratch) for
# linux/amd64 and linux/arm64 into one podman manifest list, without pulling
# anything from a registry.
#
#   scripts/build-image.sh                 # understudy:<git describe>, both arches
#   IMAGE=understudy VERSION=v0.3.0 ARCHES="amd64" scripts/build-image.sh
#   BINARIES=dist/v0.4.0 VERSION=v0.4.0 scripts/build-image.sh   # scripts/release.sh's binaries
#
# Produces the manifest list $IMAGE:$VERSION and one image per arch,
# $IMAGE:$VERSION-<arch> (the one for this machine is what `podman run
# $IMAGE:$VERSION` picks). VERSION is the tag only: what --version prints,
# and the image's version and revision labels, are what Go stamped into the
# binaries from this checkout (package version), read back with go version -m.
# With BINARIES, the binaries are $BINARIES/replica-linux-<arch> and
# primary-linux-<arch> (scripts/release.sh's) rather than built here. Needs go
# and podman (see /etc/containers setup in deploy/README.md); BUILDER=buildah
# uses buildah instead.
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=${IMAGE:-understudy}
VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
BINARIES=${BINARIES:-}
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

for arch in $ARCHES; do
  mkdir -p "$stage/linux-$arch"
  if [ -n "$BINARIES" ]; then
    for cmd in replica primary; do
      cp "$BINARIES/$cmd-linux-$arch" "$stage/linux-$arch/$cmd" ||
        { echo "build-image: no $BINARIES/$cmd-linux-$arch (scripts/release.sh makes it)" >&2; exit 1; }
    done
    continue
  fi
  echo "build-image: go build linux/$arch" >&2
  # -buildvcs=true: Go stamps the tag and commit (package version), even
  # where GOFLAGS says -buildvcs=false.
  CGO_ENABLED=0 GOOS=linux GOARCH="$arch" go build -trimpath -buildvcs=true -ldflags "-s -w" \
    -o "$stage/linux-$arch/" ./cmd/replica ./cmd/primary
done

# The labels say what the binaries say (--version): Go's stamp, read back.
stamp() { go version -m "$stage/linux-${ARCHES%% *}/replica"; }
REVISION=$(stamp | awk -F'[\t=]' '$2 == "build" && $3 == "vcs.revision" {print $4}')
REVISION=${REVISION:-unknown}
if [ "$REVISION" != unknown ] && stamp | grep -q $'^\tbuild\tvcs.modified=true$'; then REVISION+=+dirty; fi
STAMPED=$(stamp | awk -F'\t' '$2 == "mod" {print $4}')

# A fresh manifest list each time, so an old arch's image is not kept in it.
"$BUILDER" manifest rm "$IMAGE:$VERSION" >/dev/null 2>&1 || true
"$BUILDER" manifest create "$IMAGE:$VERSION" >/dev/null
for arch in $ARCHES; do
  echo "build-image: $BUILDER build linux/$arch" >&2
  "$BUILDER" build --platform "linux/$arch" -f Containerfile \
    --build-arg VERSION="$STAMPED" --build-arg REVISION="$REVISION" --build-arg SOURCE="$SOURCE" \
    --tag "$IMAGE:$VERSION-$arch" --manifest "$IMAGE:$VERSION" "$stage"
done
for arch in $ARCHES; do
  # (podman 4.3's `images` trips over manifest lists; inspect does not.)
  size=$("$BUILDER" image inspect --format '{{.Size}}' "$IMAGE:$VERSION-$arch")
  echo "$IMAGE:$VERSION-$arch $((size / 1000000)) MB ($size bytes)"
done
echo "build-image: manifest list $IMAGE:$VERSION ($ARCHES), version $STAMPED, revision $REVISION" >&2
