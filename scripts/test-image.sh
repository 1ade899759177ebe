#!/usr/bin/env bash
# Tests the image scripts/build-image.sh built: --version of both commands and
# the image's labels, then a replica in a container joining a dev cluster (run
# from the same image) and serving: /readyz, a write forwarded through it, a
# linearizable read, its learner entry, and --remove-on-exit on `podman stop`.
# Then the Kubernetes setup: a voter with TLS as kubeadm runs etcd, and a
# replica with deploy/kubernetes's TLS flags, its certificates from
# scripts/kube-pki-secret.sh mounted at /etc/kubernetes/pki/etcd, a read-only
# root and its data dir on a volume; a clean stop keeps it a member, a
# restart comes back as the same member, `replica leave` (the scale-down
# step) removes it.
#
#   scripts/test-image.sh [IMAGE]     # default understudy:<git describe>
#
# Needs podman set up as in the README (runc, cgroupfs, default_ulimits = []),
# go (for `go tool etcdctl`) and curl. DEV_PORT (default 2379) is the dev
# cluster's first port: it uses DEV_PORT..DEV_PORT+5 and +100, +101; the
# replica under test +102 (client), +103 (peer), +104 (metrics); the TLS
# voter and replica +110..+115.
# Not part of CI: CI installs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=${1:-understudy:$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
DEV_PORT=${DEV_PORT:-2379}
PODMAN=(podman --runtime runc --cgroup-manager=cgroupfs)
ETCDCTL=(go tool etcdctl --command-timeout=10s)
dev=understudy-test-dev-$$
rep=understudy-test-replica-$$
voter=understudy-test-voter-$$
vol=understudy-test-data-$$
tmp=$(mktemp -d)
voters=http://127.0.0.1:$DEV_PORT,http://127.0.0.1:$((DEV_PORT + 2)),http://127.0.0.1:$((DEV_PORT + 4))
client=http://127.0.0.1:$((DEV_PORT + 102))
peer=http://127.0.0.1:$((DEV_PORT + 103))
metrics=http://127.0.0.1:$((DEV_PORT + 104))

fail() {
  echo "test-image: FAIL: $*" >&2
  "${PODMAN[@]}" logs --tail 10 "$rep" 2>&1 | sed 's/^/  replica log: /' >&2 || true
  exit 1
}
step() { echo "test-image: $*" >&2; }
cleanup() {
  local c
  for c in "$rep" "$dev" "$voter"; do
    "${PODMAN[@]}" rm --ignore -f -t 5 "$c" >/dev/null 2>&1 || true
  done
  "${PODMAN[@]}" volume rm -f "$vol" >/dev/null 2>&1 || true
  rm -rf "$tmp"
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

for p in 0 1 2 3 4 5 100 101 102 103 104 110 111 112 113 114 115; do
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
"${PODMAN[@]}" rm -f "$rep" "$dev" >/dev/null

step "kubeadm's layout: a CA and a voter's certificates as kubeadm makes them"
pki=$tmp/voter-pki rpki=$tmp/replica-pki
mkdir -p "$pki" "$rpki"
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$pki/ca.key" -out "$pki/ca.crt" -days 1 -subj /CN=etcd-ca 2>/dev/null
for kind in server peer; do
  openssl req -new -newkey rsa:2048 -nodes -keyout "$pki/$kind.key" -out "$tmp/$kind.csr" -subj "/CN=voter-$kind" 2>/dev/null
  printf 'extendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$tmp/$kind.ext"
  openssl x509 -req -in "$tmp/$kind.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -set_serial "0x$(openssl rand -hex 8)" \
    -days 1 -extfile "$tmp/$kind.ext" -out "$pki/$kind.crt" 2>/dev/null
done
step "the replicas' Secret from scripts/kube-pki-secret.sh, as Kubernetes would mount it"
scripts/kube-pki-secret.sh --ca-dir "$pki" --ordinals 1 reader >"$tmp/secret.yaml"
for f in ca.crt server.crt server.key peer.crt peer.key; do
  grep "^  $f: " "$tmp/secret.yaml" | cut -d' ' -f4 | base64 -d >"$rpki/$f"
done
chmod 0444 "$pki"/* "$rpki"/* # readable by the image's uid 65532, as fsGroup makes them

vc=https://127.0.0.1:$((DEV_PORT + 110)) vp=https://127.0.0.1:$((DEV_PORT + 111))
rc=https://127.0.0.1:$((DEV_PORT + 113)) rp=https://127.0.0.1:$((DEV_PORT + 114)) rm=http://127.0.0.1:$((DEV_PORT + 115))
K=/etc/kubernetes/pki/etcd
tls_flags() { # $1: peer- or ""; kubeadm's etcd flags
  echo "--${1}trusted-ca-file=$K/ca.crt --${1}cert-file=$K/$2.crt --${1}key-file=$K/$2.key --${1}client-cert-auth"
}
# shellcheck disable=SC2046
"${PODMAN[@]}" run -d --name "$voter" --network host -v "$pki:$K:ro" --entrypoint /usr/local/bin/primary "$IMAGE" \
  --name v1 --data-dir /tmp/v1.etcd --listen-client-urls "$vc" --advertise-client-urls "$vc" \
  --listen-peer-urls "$vp" --initial-advertise-peer-urls "$vp" --initial-cluster "v1=$vp" \
  --listen-metrics-urls "http://127.0.0.1:$((DEV_PORT + 112))" \
  $(tls_flags "" server) $(tls_flags peer- peer) >/dev/null
wait_for "TLS voter /readyz" 60 curl -fsS "http://127.0.0.1:$((DEV_PORT + 112))/readyz"

# The StatefulSet's flags (deploy/kubernetes/base/statefulset.yaml), on
# 127.0.0.1 in place of the pod's DNS name.
"${PODMAN[@]}" volume create "$vol" >/dev/null
start_k8s_replica() {
  # shellcheck disable=SC2046
  "${PODMAN[@]}" run -d --name "$rep" --network host --read-only -v "$vol:/var/lib/understudy" -v "$rpki:$K:ro" \
    -e UNDERSTUDY_JOIN="$vc" -e UNDERSTUDY_ROLE=reader "$IMAGE" \
    --name understudy-replica-reader-0 --data-dir /var/lib/understudy/data \
    --listen-client-urls "$rc" --advertise-client-urls "$rc" --listen-peer-urls "$rp" --initial-advertise-peer-urls "$rp" \
    --listen-metrics-urls "$rm" $(tls_flags "" server) $(tls_flags peer- peer) >/dev/null
}
start_k8s_replica
wait_for "TLS replica /readyz" 120 curl -fsS "$rm/readyz"
TLSCTL=("${ETCDCTL[@]}" --cacert "$rpki/ca.crt" --cert "$rpki/server.crt" --key "$rpki/server.key")
"${TLSCTL[@]}" --endpoints="$rc" put tls-test "$val" >/dev/null || fail "put through the TLS replica"
got=$("${TLSCTL[@]}" --endpoints="$rc" get tls-test --print-value-only)
[ "$got" = "$val" ] || fail "get through the TLS replica: '$got', want '$val'"
id=$("${TLSCTL[@]}" --endpoints="$vc" member list | grep ", understudy-replica-reader-0, $rp, $rc, true$" | cut -d, -f1)
[ -n "$id" ] || fail "the TLS replica is not a learner in: $("${TLSCTL[@]}" --endpoints="$vc" member list)"

step "pod deleted and rescheduled: a clean stop keeps the member, a restart is the same member"
"${PODMAN[@]}" stop -t 30 "$rep" >/dev/null
"${PODMAN[@]}" rm "$rep" >/dev/null
"${TLSCTL[@]}" --endpoints="$vc" member list | grep -q "^$id, " || fail "member $id left on a stop without --remove-on-exit"
start_k8s_replica
wait_for "restarted TLS replica /readyz" 120 curl -fsS "$rm/readyz"
n=$("${TLSCTL[@]}" --endpoints="$vc" member list | grep -c ", understudy-replica-reader-0, ")
[ "$n" = 1 ] && "${TLSCTL[@]}" --endpoints="$vc" member list | grep -q "^$id, " ||
  fail "the restarted replica is not the same single member $id: $("${TLSCTL[@]}" --endpoints="$vc" member list)"

step "scale-down: stop, then replica leave from the image"
"${PODMAN[@]}" stop -t 30 "$rep" >/dev/null
"${PODMAN[@]}" run --rm --network host -v "$rpki:$K:ro" "$IMAGE" leave --endpoints "$vc" \
  --cacert "$K/ca.crt" --cert "$K/server.crt" --key "$K/server.key" understudy-replica-reader-0 >/dev/null ||
  fail "replica leave"
if "${TLSCTL[@]}" --endpoints="$vc" member list | grep -q ", understudy-replica-reader-0, "; then
  fail "understudy-replica-reader-0 still a member after replica leave"
fi
step "PASS ($IMAGE)"
