#!/usr/bin/env bash
# Builds a release of understudy from this checkout's HEAD, which must be a
# commit tagged vMAJOR.MINOR.PATCH (v0.x or v1.x: Go reads no v2+ tag for
# this module path) in a clean tree:
#
#   scripts/release.sh                  # dist/<tag>/ and the image understudy:<tag>
#   scripts/release.sh --no-image       # the binaries and SHA256SUMS only (no podman)
#   scripts/release.sh --allow-untagged --allow-dirty   # a trial build of any tree
#
# Makes dist/<version>/ (gitignored): replica-linux-amd64, primary-linux-amd64,
# replica-linux-arm64, primary-linux-arm64 (static: CGO_ENABLED=0, -trimpath)
# and SHA256SUMS (`cd dist/<version> && sha256sum -c SHA256SUMS`); then, with
# scripts/build-image.sh from those binaries, the manifest list
# $IMAGE:<version> (IMAGE defaults to understudy) and $IMAGE:<version>-amd64,
# -arm64. The version is what Go stamps into the binaries from git (package
# version): the tag, or for a trial build a pseudo-version, "+dirty" for a
# modified tree ("-dirty" in the image tag, which takes no "+"). It checks
# that every binary carries that version and HEAD's commit, is linked
# statically for its architecture, and that the amd64 ones print them with
# --version; then prints what it made. Building arm64 and the image takes
# minutes of CPU: run it under the e2e lock on a shared machine (CONTRIBUTING).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
allow_dirty=false allow_untagged=false image=true
for arg in "$@"; do
  case $arg in
    --allow-dirty) allow_dirty=true ;;
    --allow-untagged) allow_untagged=true ;;
    --no-image) image=false ;;
    -h | --help) usage; exit 0 ;;
    *) echo "release: unknown argument $arg (want --allow-dirty, --allow-untagged, --no-image)" >&2; exit 2 ;;
  esac
done
die() { echo "release: $*" >&2; exit 1; }
say() { echo "release: $*" >&2; }

# The tree and the tag, before anything is built.
changes=$(git status --porcelain)
if [ -n "$changes" ] && ! $allow_dirty; then
  die "the tree has changes (Go would stamp the binaries +dirty):
$changes
commit or stash them, or pass --allow-dirty for a trial build"
fi
commit=$(git rev-parse HEAD)
tag=$(git tag --points-at HEAD --list 'v*' | sort -V | tail -n 1)
if [ -z "$tag" ] && ! $allow_untagged; then
  die "HEAD ($commit) has no v* tag: tag it (git tag -a v0.4.0 -m v0.4.0), or pass --allow-untagged for a trial build"
fi
if [ -n "$tag" ] && ! [[ $tag =~ ^v[01]\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
  die "tag $tag is not vMAJOR.MINOR.PATCH[-PRERELEASE] with MAJOR 0 or 1: Go would not stamp it"
fi
if $image && ! command -v podman >/dev/null; then
  die "no podman for the image (deploy/README.md says how to install it), or pass --no-image"
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
arches="amd64 arm64"
for arch in $arches; do
  for cmd in replica primary; do
    say "go build $cmd linux/$arch"
    # -buildvcs=true: stamped even where GOFLAGS says -buildvcs=false.
    CGO_ENABLED=0 GOOS=linux GOARCH=$arch nice -n 19 go build -trimpath -buildvcs=true -ldflags "-s -w" \
      -o "$stage/$cmd-linux-$arch" "./cmd/$cmd"
  done
done

# What Go stamped, which --version prints.
field() { go version -m "$1" | awk -F'\t' -v k="$2" '$2 == "build" && index($3, k "=") == 1 {print substr($3, length(k) + 2)}'; }
version=$(go version -m "$stage/replica-linux-amd64" | awk -F'\t' '$2 == "mod" {print $4}')
if [ -n "$tag" ] && [ "$version" != "$tag" ] && [ "$version" != "$tag+dirty" ]; then
  die "Go stamped version $version, not the tag $tag"
fi
rev=$commit
[ -n "$changes" ] && rev+=+dirty
for bin in "$stage"/*; do
  arch=${bin##*-}
  got=$(go version -m "$bin" | awk -F'\t' '$2 == "mod" {print $4}')
  [ "$got" = "$version" ] || die "$(basename "$bin") carries version $got, want $version"
  [ "$(field "$bin" vcs.revision)" = "$commit" ] || die "$(basename "$bin") carries commit $(field "$bin" vcs.revision), want $commit"
  [ "$(field "$bin" CGO_ENABLED)" = 0 ] && [ "$(field "$bin" GOARCH)" = "$arch" ] ||
    die "$(basename "$bin") is not a CGO_ENABLED=0 linux/$arch build"
  if command -v file >/dev/null; then
    want=x86-64
    [ "$arch" = arm64 ] && want=aarch64
    file -b "$bin" | grep -q "$want.*statically linked" || die "$(basename "$bin"): $(file -b "$bin"), want static $want"
  fi
done
if [ "$(uname -m)" = x86_64 ]; then
  for cmd in replica primary; do
    out=$("$stage/$cmd-linux-amd64" --version)
    grep -qx "understudy Version: $version" <<<"$out" && grep -qx "Git SHA: $rev" <<<"$out" ||
      die "$cmd --version does not say $version and $rev:
$out"
  done
fi

dist=dist/$version
if [ -e "$dist" ]; then
  say "replacing $dist"
  rm -rf "$dist"
fi
mkdir -p "$dist"
mv "$stage"/* "$dist/"
(cd "$dist" && sha256sum replica-* primary-* >SHA256SUMS && sha256sum --quiet -c SHA256SUMS)

tagged=${version//+/-}
if $image; then
  # Its build output to stderr: stdout is for what was made.
  IMAGE=${IMAGE:-understudy} BINARIES=$dist VERSION=$tagged ARCHES=$arches scripts/build-image.sh >&2
fi

echo "understudy $version (commit $rev), built with $(go env GOVERSION):"
(cd "$dist" && for f in replica-* primary-*; do
  printf '  %s/%-20s %4d MB  %s\n' "$dist" "$f" $(($(stat -c %s "$f") / 1000000)) "$(file -b "$f" 2>/dev/null | sed 's/, \(Go \)\{0,1\}BuildID[^,]*//g' || true)"
done)
echo "  $dist/SHA256SUMS (cd $dist && sha256sum -c SHA256SUMS)"
if $image; then
  echo "  image ${IMAGE:-understudy}:$tagged (manifest list), ${IMAGE:-understudy}:$tagged-amd64, ${IMAGE:-understudy}:$tagged-arm64"
  echo "  check it: scripts/test-image.sh ${IMAGE:-understudy}:$tagged"
fi
