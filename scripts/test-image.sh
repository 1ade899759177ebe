#!/usr/bin/env bash
# Tests the image scripts/build-image.sh built: --version of both commands and
# the image's labels, then a replica in a container joining a dev cluster (run
# from the same image) and serving: /readyz, a write forwarded through it, a
# linearizable read, its learner entry, and --remove-on-exit on `podman stop`.
#
#   scripts/test-image.sh [IMAGE]     # default understudy:<git describe>
#
# Needs podman set up as in the README (runc, cgroupfs, default_ulimits = []),
# go (for `go tool etcdctl`) and curl. DEV_PORT (default 2379) is the dev
# cluster's first port: it uses DEV_PORT..DEV_PORT+5 and +100, +101; the
# replica under test +102 (client), +103 (peer), +104 (metrics).
# Not part of CI: CI installs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=${1:-understudy:$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
DEV_PORT=${DEV_PORT:-2379}
PODMAN=(podman --runtime runc --cgroup-manager=cgroupfs)
ETCDCTL=(go tool etcdctl --command-timeout=10s)
dev=understudy-test-dev-$$
rep=understudy-test-replica-$$
voters=http://127.0.0.1:$DEV_PORT,http://127.0.0.1:$((DEV_PORT + 2)),http://127.0.0.1:$((DEV_PORT + 4))
client=http://127.0.0.1:$((DEV_PORT + 102))
peer=http://127.0.0.1:$((DEV_PORT + 103))
metrics=http://127.0.0.1:$((DEV_PORT + 104))

fail() { echo "test-image: FAIL: $*" >&2; exit 1; }
step() { echo "test-image: $*" >&2; }
cleanup() {
  "${PODMAN[@]}" rm -f -t 5 "$rep" "$dev" >/dev/null 2>&1 || true
}
trap cleanup EXIT

# wait_for DESCRIPTION SECONDS COMMAND...: until COMMAND succeeds, or fail.
wait_for() {
  local what=$1 secs=$2; shift 2
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if [ $SECONDS -ge $deadline ]; then fail "$what: not within ${secs}s"; fi
    sleep 0.5
  done
}

"${PODMAN[@]}" image exists "$IMAGE" || fail "no image $IMAGE (build it with scripts/build-image.sh)"
want_version=$(podman image inspect --format '{{index .Labels "org.opencontainers.image.version"}}' "$IMAGE")
want_rev=$(podman image inspect --format '{{index .Labels "org.opencontainers.image.revision"}}' "$IMAGE")
[ -n "$want_version" ] && [ -n "$want_rev" ] || fail "image $IMAGE has no version or revision label"
user=$(podman image inspect --format '{{.Config.User}}' "$IMAGE")
[ "$user" = "65532:65532" ] || fail "image runs as '$user', want 65532:65532"

step "--version of replica and primary ($want_version, $want_rev)"
for cmd in replica primary; do
  out=$("${PODMAN[@]}" run --rm --entrypoint "/usr/local/bin/$cmd" "$IMAGE" --version)
  grep -qx "understudy Version: $want_version" <<<"$out" || fail "$cmd --version: $out"
  grep -qx "Git SHA: $want_rev" <<<"$out" || fail "$cmd --version: $out"
done

for p in 0 1 2 3 4 5 100 101 102 103 104; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$((DEV_PORT + p))") 2>/dev/null; then
    fail "port $((DEV_PORT + p)) is in use; set DEV_PORT to a free range"
  fi
done

step "dev cluster from the image on $voters"
"${PODMAN[@]}" run -d --name "$dev" --network host --entrypoint /usr/local/bin/primary "$IMAGE" \
  --dev --dev-port "$DEV_PORT" >/dev/null
dev_up() { "${PODMAN[@]}" logs "$dev" 2>&1 | grep -q 'deployment is up'; }
wait_for "dev cluster up" 120 dev_up

step "replica in a container joining it (client $client, peer $peer)"
"${PODMAN[@]}" run -d --name "$rep" --network host "$IMAGE" \
  --name img-r1 --data-dir /var/lib/understudy/img-r1 --join "$voters" \
  --listen-peer-urls "$peer" --listen-client-urls "$client" --listen-metrics-urls "$metrics" \
  --remove-on-exit >/dev/null
wait_for "replica /readyz" 120 curl -fsS "$client/readyz"
curl -fsS "$metrics/readyz" >/dev/null || fail "/readyz on the metrics URL"
curl -fsS "$metrics/livez" >/dev/null || fail "/livez on the metrics URL"

step "serving: a write through the replica, a linearizable read from it"
val="from-the-container-$$"
"${ETCDCTL[@]}" --endpoints="$client" put image-test "$val" >/dev/null || fail "put through the replica"
got=$("${ETCDCTL[@]}" --endpoints="$client" get image-test --print-value-only)
[ "$got" = "$val" ] || fail "get through the replica: '$got', want '$val'"
got=$("${ETCDCTL[@]}" --endpoints="${voters%%,*}" get image-test --print-value-only)
[ "$got" = "$val" ] || fail "get from a voter: '$got', want '$val'"
"${ETCDCTL[@]}" --endpoints="$voters" member list | grep -q ", img-r1, $peer, $client, true$" ||
  fail "img-r1 is not a learner in: $("${ETCDCTL[@]}" --endpoints="$voters" member list)"
curl -fsS "$metrics/metrics" | grep -q '^understudy_replica_forwarded_total{' || fail "no forwarded writes in /metrics"

step "podman stop: --remove-on-exit takes the learner out of the member list"
"${PODMAN[@]}" stop -t 30 "$rep" >/dev/null
code=$(podman inspect --format '{{.State.ExitCode}}' "$rep")
[ "$code" = 0 ] || fail "replica exited $code on SIGTERM; logs: $("${PODMAN[@]}" logs --tail 20 "$rep" 2>&1)"
if "${ETCDCTL[@]}" --endpoints="$voters" member list | grep -q ", img-r1, "; then
  fail "img-r1 still in the member list after a clean stop with --remove-on-exit"
fi
step "PASS ($IMAGE)"
