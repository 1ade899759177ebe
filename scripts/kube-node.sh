#!/usr/bin/env bash
# A single-node Kubernetes on this machine, for issue 39 (not in CI): three
# etcd voters (primary) as static pods, as kubeadm runs etcd, on the host
# network at the pods' bridge's address, kube-apiserver storing in them,
# kube-controller-manager, kube-scheduler, kube-proxy, a kubelet and
# containerd 2.x, every one built from its Go module; runc and the CNI
# plugins from Debian; CoreDNS, metrics-server and local-path-provisioner as
# pods (scripts/build-node-addons.sh, test/kubenode/addons); images built
# here and imported (no registry can be reached): the pause image from
# test/kubenode/pause and understudy's from this checkout.
#
#   scripts/kube-node.sh up      # build what is missing, start everything, wait until the add-ons are available
#   scripts/kube-node.sh down    # stop everything (by PID files) and remove the bridge, kube-proxy's rules, mounts
#   scripts/kube-node.sh voter 2 stop|start|rejoin   # one voter; rejoin: back as a member after a standby replaced it
#
# Then TestOnNode (test/kube) applies deploy/kubernetes to it (CONTRIBUTING).
# up writes $NODE_DIR/node.env: the kubeconfig, voters, image and
# certificates the test reads. A second up starts only what is not running
# and rebuilds the understudy image when the checkout changed.
#
# Needs root and, once: apt-get install -y runc containernetworking-plugins buildah podman busybox-static
#
# Facts of these machines it is built on (checked 2026-11-28):
#   - cgroup v1 (hybrid): the kubelet needs failCgroupV1: false and
#     cgroupDriver: cgroupfs, containerd SystemdCgroup = false;
#   - CAP_SYS_RESOURCE is not granted: no process may lower its
#     oom_score_adj, and runc fails a pod sandbox (oom_score_adj -998) with
#     "can't get final child's PID from pipe: EOF" unless containerd's CRI
#     has restrict_oom_score_adj = true;
#   - overlayfs, bridges, veth pairs, network namespaces, nft and iptables
#     work.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

NODE_DIR=${NODE_DIR:-/var/lib/understudy-node}
RUN_DIR=${RUN_DIR:-/run/understudy-node}
BRIDGE=${NODE_BRIDGE:-und0}
POD_SUBNET=${NODE_POD_SUBNET:-10.123.0.0/24}
POD_GATEWAY=${NODE_POD_GATEWAY:-10.123.0.1}
NODE_NAME=${NODE_NAME:-node1}
NODE_IP=$POD_GATEWAY
SERVICE_SUBNET=${NODE_SERVICE_SUBNET:-10.124.0.0/24}
SERVICE_IP_KUBERNETES=${SERVICE_SUBNET%.*}.1
SERVICE_IP_DNS=${SERVICE_SUBNET%.*}.10
CLUSTER_DOMAIN=cluster.local
sock=$RUN_DIR/containerd/containerd.sock
etc=$NODE_DIR/etc
pki=$NODE_DIR/pki
kbin=
VOTER_TAG=v3.7.3
# shellcheck source=lib/node-pki.sh
source scripts/lib/node-pki.sh
# shellcheck source=lib/node-control-plane.sh
source scripts/lib/node-control-plane.sh

die() { echo "kube-node: $*" >&2; exit 1; }

# stop_pid stops the process whose PID is in file $1, if it still runs.
stop_pid() {
  local f=$1 pid
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  fi
  rm -f "$f"
}

# down stops the kubelet, every pod's containers (their shims outlive
# containerd), containerd, and removes the pods' network namespaces, the
# bridge and the node's mounts.
down() {
  stop_pid "$RUN_DIR/kubelet.pid"
  stop_control_plane
  ctr=$(scripts/build-containerd.sh | grep '/ctr$')
  if "$ctr" -a "$sock" version >/dev/null 2>&1; then
    for task in $("$ctr" -a "$sock" -n k8s.io tasks ls -q); do
      "$ctr" -a "$sock" -n k8s.io tasks kill -s SIGKILL "$task" || true
    done
    for _ in $(seq 50); do [ -z "$("$ctr" -a "$sock" -n k8s.io tasks ls -q | head -1)" ] && break; sleep 0.2; done
  fi
  stop_pid "$RUN_DIR/containerd.pid"
  # The pods' network namespaces, which containerd leaves when it stops:
  # every cni-* namespace that no process is in any longer (another
  # runtime's too, which holds nothing once its processes are gone).
  for ns in $(ip netns list | awk '/^cni-/ {print $1}'); do
    [ -n "$(ip netns pids "$ns")" ] || ip netns del "$ns" || true
  done
  if ip link show "$BRIDGE" >/dev/null 2>&1; then ip link del "$BRIDGE"; fi
  # kube-proxy's rules (its chains are all named KUBE-*).
  for table in nat filter mangle; do
    iptables-save -t "$table" 2>/dev/null | grep -q KUBE- || continue
    iptables-save -t "$table" | grep -v -- '-j KUBE-\|^:KUBE-\|-A KUBE-' | iptables-restore -T "$table" 2>/dev/null || true
  done
  awk -v a="$NODE_DIR" -v b="$RUN_DIR" 'index($2, a) == 1 || index($2, b) == 1 {print $2}' /proc/mounts | sort -r | while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m"
  done
  echo "kube-node: stopped" >&2
}

write_configs() {
  mkdir -p "$etc/cni" "$etc/manifests" "$RUN_DIR" "$NODE_DIR/kubelet"
  cat >"$etc/containerd.toml" <<EOF
version = 3
root = "$NODE_DIR/containerd"
state = "$RUN_DIR/containerd"

[grpc]
  address = "$sock"

[plugins."io.containerd.cri.v1.runtime"]
  # No CAP_SYS_RESOURCE here: no negative oom_score_adj for sandboxes.
  restrict_oom_score_adj = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "$(command -v runc)"
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "$etc/cni"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "localhost/understudy-pause:1"
EOF
  cat >"$etc/cni/10-understudy-node.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "understudy-node",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$NODE_DIR/cni-ipam",
        "ranges": [[{"subnet": "$POD_SUBNET", "gateway": "$POD_GATEWAY"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
  cat >"$etc/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$sock
staticPodPath: $etc/manifests
fileCheckFrequency: 2s
address: 0.0.0.0
clusterDNS: [$SERVICE_IP_DNS]
clusterDomain: $CLUSTER_DOMAIN
resolvConf: $etc/pod-resolv.conf
evictionHard: {memory.available: 100Mi, nodefs.available: 2%, imagefs.available: 2%}
port: 10250
readOnlyPort: 0
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
enforceNodeAllocatable: []
EOF
  # Pods with dnsPolicy Default (CoreDNS) get no upstream: no traffic leaves the machine.
  printf 'nameserver 127.0.0.1\n' >"$etc/pod-resolv.conf"
  cat >"$etc/manifests/node-check.yaml" <<'EOF'
apiVersion: v1
kind: Pod
metadata:
  name: node-check
  namespace: default
spec:
  containers:
    - name: pause
      image: localhost/understudy-pause:1
      imagePullPolicy: Never
EOF
}

# import_built REF DIR builds DIR/Containerfile as REF with buildah, imports
# it into containerd's k8s.io namespace and removes DIR.
import_built() {
  local ref=$1 dir=$2
  buildah --storage-driver vfs bud -q -t "$ref" "$dir" >/dev/null
  buildah --storage-driver vfs push -q "$ref" "oci-archive:$dir/image.tar:$ref"
  "$ctr" -a "$sock" -n k8s.io images import "$dir/image.tar" >/dev/null
  buildah --storage-driver vfs rmi "$ref" >/dev/null 2>&1 || true
  rm -rf "$dir"
}

# node_image REF BINARY ARG...: an image from scratch with BINARY as its
# entrypoint (and ARGs), imported into containerd's k8s.io namespace unless
# it is there already.
node_image() {
  local ref=$1 binary=$2 dir name args=""
  shift 2
  "$ctr" -a "$sock" -n k8s.io images ls -q | grep -qx "$ref" && return 0
  dir=$(mktemp -d)
  name=$(basename "$binary")
  name=${name%-v*}
  cp "$binary" "$dir/$name"
  for a in "$@"; do args+=", \"$a\""; done
  printf 'FROM scratch\nCOPY %s /%s\nENTRYPOINT ["/%s"%s]\n' "$name" "$name" "$name" "$args" >"$dir/Containerfile"
  import_built "$ref" "$dir"
}

# busybox_image imports an image of Debian's static busybox (the
# local-path provisioner's helper pods run its sh, mkdir and rm).
busybox_image() {
  local ref=localhost/understudy-busybox:1 dir
  "$ctr" -a "$sock" -n k8s.io images ls -q | grep -qx "$ref" && return 0
  [ -x /bin/busybox ] || die "no /bin/busybox: apt-get install -y busybox-static"
  dir=$(mktemp -d)
  mkdir -p "$dir/root/bin"
  cp /bin/busybox "$dir/root/bin/busybox"
  for applet in sh mkdir rm chmod ls cat; do ln -s busybox "$dir/root/bin/$applet"; done
  tar -C "$dir/root" -cf "$dir/root.tar" .
  printf 'FROM scratch\nADD root.tar /\nENTRYPOINT ["/bin/sh"]\n' >"$dir/Containerfile"
  import_built "$ref" "$dir"
}

# voter_image imports the voters' image: primary (etcd v3.7.3) and etcdctl,
# as kubeadm's etcd image has etcd and etcdctl.
voter_image() {
  local ref=localhost/understudy-voter:$VOTER_TAG dir
  "$ctr" -a "$sock" -n k8s.io images ls -q | grep -qx "$ref" && return 0
  dir=$(mktemp -d)
  mkdir -p "$dir/root/usr/local/bin" "$dir/root/var/lib/etcd"
  cp "$NODE_DIR/bin/primary" "$NODE_DIR/bin/etcdctl" "$dir/root/usr/local/bin/"
  tar -C "$dir/root" -cf "$dir/root.tar" .
  printf 'FROM scratch\nADD root.tar /\nENV PATH=/usr/local/bin\nENTRYPOINT ["/usr/local/bin/primary"]\n' >"$dir/Containerfile"
  import_built "$ref" "$dir"
}

# understudy_image builds this checkout's image with scripts/build-image.sh
# (amd64 only) and imports it; its reference goes to $NODE_DIR/understudy-image,
# where TestOnNode (test/kube) reads it.
understudy_image() {
  local version ref dir
  version=node-$(git describe --tags --always --dirty 2>/dev/null || echo dev)
  # A dirty tree's image is named by its changes too, so that an edit builds anew.
  case $version in *-dirty) version+=-$( (git diff HEAD; git ls-files --others --exclude-standard | xargs -r cat) | sha1sum | cut -c1-8) ;; esac
  ref=localhost/understudy:$version-amd64
  if ! "$ctr" -a "$sock" -n k8s.io images ls -q | grep -qx "$ref"; then
    ARCHES=amd64 IMAGE=localhost/understudy VERSION=$version scripts/build-image.sh >&2
    dir=$(mktemp -d)
    podman save --format docker-archive -o "$dir/image.tar" "$ref"
    "$ctr" -a "$sock" -n k8s.io images import "$dir/image.tar" >/dev/null
    rm -rf "$dir"
  fi
  echo "$ref" >"$NODE_DIR/understudy-image"
}

# wait_for runs "$@" every second until it succeeds, for at most $timeout s.
wait_for() {
  local what=$1 timeout=$2
  shift 2
  for _ in $(seq "$timeout"); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 1
  done
  die "$what: not within ${timeout}s"
}

# pod_running is true once the kubelet reports node-check Running with an
# address in the pod subnet.
pod_running() {
  curl -sk "https://127.0.0.1:10250/pods" | python3 -c '
import json, sys, ipaddress
net = ipaddress.ip_network(sys.argv[1])
for p in json.load(sys.stdin).get("items", []):
    s = p.get("status", {})
    if p["metadata"]["name"].startswith("node-check") and s.get("phase") == "Running" and s.get("podIP") and ipaddress.ip_address(s["podIP"]) in net:
        print(p["metadata"]["name"], s["podIP"]); sys.exit(0)
sys.exit(1)' "$POD_SUBNET"
}

# bridge creates the pods' bridge with the node's address before anything
# listens on it (the CNI bridge plugin takes it over as it is).
bridge() {
  ip link show "$BRIDGE" >/dev/null 2>&1 || ip link add "$BRIDGE" type bridge
  ip addr show dev "$BRIDGE" | grep -q "inet $NODE_IP/" || ip addr add "$NODE_IP/${POD_SUBNET#*/}" dev "$BRIDGE"
  ip link set "$BRIDGE" up
}

kubectl_node() { "$kbin/kubectl" --kubeconfig "$etc/admin.kubeconfig" "$@"; }

up() {
  [ "$(id -u)" = 0 ] || die "run as root: the kubelet and containerd manage cgroups and network namespaces"
  for cmd in runc buildah podman curl python3 openssl iptables unshare busybox; do
    command -v "$cmd" >/dev/null || die "no $cmd: apt-get install -y runc containernetworking-plugins buildah podman busybox-static curl openssl iptables"
  done
  [ -x /usr/lib/cni/bridge ] || die "no CNI plugins in /usr/lib/cni: apt-get install -y containernetworking-plugins"
  local bins kbins addons containerd kubelet
  bins=$(scripts/build-containerd.sh)
  kbins=$(KUBE_CMDS="kubelet kube-apiserver kubectl kube-controller-manager kube-scheduler kube-proxy" scripts/build-kube.sh)
  addons=$(scripts/build-node-addons.sh)
  containerd=$(echo "$bins" | grep '/containerd$')
  ctr=$(echo "$bins" | grep '/ctr$')
  kubelet=$(echo "$kbins" | grep '/kubelet$')
  kbin=$(dirname "$kubelet")
  mkdir -p "$NODE_DIR/bin"
  CGO_ENABLED=0 go build -trimpath -o "$NODE_DIR/bin/" ./cmd/primary ./cmd/replica ./test/kubenode/pause
  CGO_ENABLED=0 go build -trimpath -o "$NODE_DIR/bin/etcdctl" go.etcd.io/etcd/etcdctl/v3
  write_configs
  make_pki
  bridge
  if [ ! -f "$RUN_DIR/containerd.pid" ] || ! kill -0 "$(cat "$RUN_DIR/containerd.pid")" 2>/dev/null; then
    PATH=$(dirname "$containerd"):$PATH nohup "$containerd" --config "$etc/containerd.toml" >"$NODE_DIR/containerd.log" 2>&1 &
    echo $! >"$RUN_DIR/containerd.pid"
  fi
  wait_for "containerd answering on $sock" 30 "$ctr" -a "$sock" version
  node_image localhost/understudy-pause:1 "$NODE_DIR/bin/pause"
  node_image localhost/understudy-coredns:v1.15.0 "$(echo "$addons" | grep '/coredns-')"
  node_image localhost/understudy-metrics-server:v0.8.0 "$(echo "$addons" | grep '/metrics-server-')"
  node_image localhost/understudy-local-path-provisioner:v0.0.30 "$(echo "$addons" | grep '/local-path-provisioner-')"
  busybox_image
  voter_image
  understudy_image
  write_voters
  write_kubeconfig "$etc/admin.kubeconfig"
  # The kubelet first: it runs the voters' static pods before any API
  # server exists, as on a kubeadm control-plane node.
  if [ ! -f "$RUN_DIR/kubelet.pid" ] || ! kill -0 "$(cat "$RUN_DIR/kubelet.pid")" 2>/dev/null; then
    nohup "$kubelet" --config "$etc/kubelet.yaml" --kubeconfig "$etc/admin.kubeconfig" --root-dir "$NODE_DIR/kubelet" \
      --hostname-override "$NODE_NAME" --node-ip "$NODE_IP" >"$NODE_DIR/kubelet.log" 2>&1 &
    echo $! >"$RUN_DIR/kubelet.pid"
  fi
  wait_for "the static pod node-check running on $POD_SUBNET (logs: $NODE_DIR/kubelet.log, $NODE_DIR/containerd.log)" 120 pod_running
  start_control_plane
  wait_for "node $NODE_NAME Ready" 120 kubectl_node wait --for condition=Ready "node/$NODE_NAME" --timeout 1s
  kubectl_node apply -f test/kubenode/addons/ >&2
  # What kubeadm keeps of the cluster's configuration, for deploy/README.md's step 1.
  kubectl_node -n kube-system get cm kubeadm-config >/dev/null 2>&1 || kubectl_node create -f test/kubenode/kubeadm-config.yaml >&2
  wait_for "CoreDNS and metrics-server available" 180 kubectl_node -n kube-system wait --for condition=Available deploy/coredns deploy/metrics-server --timeout 1s
  wait_for "the local-path provisioner available" 120 kubectl_node -n local-path-storage wait --for condition=Available deploy/local-path-provisioner --timeout 1s
  # What the node test (test/kube, TestOnNode) reads.
  cat >"$NODE_DIR/node.env" <<EOF
KUBECONFIG=$etc/admin.kubeconfig
KUBECTL=$kbin/kubectl
KUBE_APISERVER=$kbin/kube-apiserver
CTR=$ctr
CONTAINERD_SOCK=$sock
IMAGE=$(cat "$NODE_DIR/understudy-image")
VOTERS=$(voter_endpoints)
ETCD_PKI=$pki/etcd
REPLICA=$NODE_DIR/bin/replica
KUBE_NODE=$repo/scripts/kube-node.sh
STATIC_PODS=$etc/manifests
APISERVER_ETCD_CERT=$pki/apiserver-etcd-client.crt
APISERVER_ETCD_KEY=$pki/apiserver-etcd-client.key
EOF
  echo "kube-node: $(pod_running); containerd $("$ctr" -a "$sock" version | awk '/Server/{s=1} s&&/Version/{print $2; exit}'), $("$kubelet" --version)" >&2
  echo "kube-node: voters $(voter_endpoints) (etcd CA and certificates in $pki/etcd), understudy image $(cat "$NODE_DIR/understudy-image")" >&2
  echo "kube-node: export KUBECONFIG=$etc/admin.kubeconfig; state in $NODE_DIR, logs in $NODE_DIR/log; stop with: scripts/kube-node.sh down" >&2
}

# voter N stop|start|rejoin: one voter, for the standby's checks.
voter() {
  case ${1:-}/${2:-} in
    [123]/stop) stop_voter "$1" ;;
    [123]/start) start_voter "$1" ;;
    [123]/rejoin) rejoin_voter "$1" ;;
    *) die "usage: scripts/kube-node.sh voter 1|2|3 stop|start|rejoin" ;;
  esac
}

case ${1:-} in
  up) up ;;
  down) down ;;
  voter) voter "${@:2}" ;;
  *) die "usage: scripts/kube-node.sh up|down|voter N stop|start|rejoin" ;;
esac
