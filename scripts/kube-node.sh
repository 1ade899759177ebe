#!/usr/bin/env bash
# A Kubernetes node on this machine, for issue 39 (not in CI): containerd 2.x
# and a kubelet built from their Go modules, runc and the CNI plugins from
# Debian, a bridge network for pods, and a pause image built from
# test/kubenode/pause (no registry can be reached here).
#
#   scripts/kube-node.sh up      # build what is missing, start containerd and the kubelet, check a pod runs
#   scripts/kube-node.sh down    # stop them (by their PID files) and remove the bridge
#
# Stage reached so far: the runtime layer. The kubelet runs standalone (no
# API server yet) with a static pod of the pause image, which `up` waits for
# to run with an address on the bridge. The control plane (voters on the
# bridge's address, kube-apiserver, controller-manager, scheduler), kube-proxy
# and cluster DNS come next.
#
# Needs root and, once: apt-get install -y runc containernetworking-plugins buildah
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
sock=$RUN_DIR/containerd/containerd.sock
etc=$NODE_DIR/etc

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
# containerd), containerd, and removes the bridge and the node's mounts.
down() {
  stop_pid "$RUN_DIR/kubelet.pid"
  local ctr
  ctr=$(scripts/build-containerd.sh | grep '/ctr$')
  if "$ctr" -a "$sock" version >/dev/null 2>&1; then
    for task in $("$ctr" -a "$sock" -n k8s.io tasks ls -q); do
      "$ctr" -a "$sock" -n k8s.io tasks kill -s SIGKILL "$task" || true
    done
    for _ in $(seq 50); do [ -z "$("$ctr" -a "$sock" -n k8s.io tasks ls -q | head -1)" ] && break; sleep 0.2; done
  fi
  stop_pid "$RUN_DIR/containerd.pid"
  if ip link show "$BRIDGE" >/dev/null 2>&1; then ip link del "$BRIDGE"; fi
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
address: 127.0.0.1
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

# pause_image builds test/kubenode/pause into an image from scratch and
# imports it into containerd's k8s.io namespace.
pause_image() {
  local dir
  dir=$(mktemp -d)
  CGO_ENABLED=0 go build -trimpath -o "$dir/pause" ./test/kubenode/pause
  printf 'FROM scratch\nCOPY pause /pause\nENTRYPOINT ["/pause"]\n' >"$dir/Containerfile"
  buildah --storage-driver vfs bud -q -t localhost/understudy-pause:1 "$dir" >/dev/null
  buildah --storage-driver vfs push -q localhost/understudy-pause:1 "oci-archive:$dir/pause.tar:localhost/understudy-pause:1"
  "$ctr" -a "$sock" -n k8s.io images import "$dir/pause.tar" >/dev/null
  rm -rf "$dir"
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

up() {
  [ "$(id -u)" = 0 ] || die "run as root: the kubelet and containerd manage cgroups and network namespaces"
  for cmd in runc buildah curl python3; do
    command -v "$cmd" >/dev/null || die "no $cmd: apt-get install -y runc containernetworking-plugins buildah curl"
  done
  [ -x /usr/lib/cni/bridge ] || die "no CNI plugins in /usr/lib/cni: apt-get install -y containernetworking-plugins"
  local bins kbins
  bins=$(scripts/build-containerd.sh)
  kbins=$(KUBE_CMDS="kubelet kube-apiserver kubectl kube-controller-manager kube-scheduler" scripts/build-kube.sh)
  local containerd ctr kubelet
  containerd=$(echo "$bins" | grep '/containerd$')
  ctr=$(echo "$bins" | grep '/ctr$')
  kubelet=$(echo "$kbins" | grep '/kubelet$')
  write_configs
  if [ ! -f "$RUN_DIR/containerd.pid" ] || ! kill -0 "$(cat "$RUN_DIR/containerd.pid")" 2>/dev/null; then
    PATH=$(dirname "$containerd"):$PATH nohup "$containerd" --config "$etc/containerd.toml" >"$NODE_DIR/containerd.log" 2>&1 &
    echo $! >"$RUN_DIR/containerd.pid"
  fi
  wait_for "containerd answering on $sock" 30 "$ctr" -a "$sock" version
  pause_image
  if [ ! -f "$RUN_DIR/kubelet.pid" ] || ! kill -0 "$(cat "$RUN_DIR/kubelet.pid")" 2>/dev/null; then
    nohup "$kubelet" --config "$etc/kubelet.yaml" --root-dir "$NODE_DIR/kubelet" --hostname-override "$NODE_NAME" >"$NODE_DIR/kubelet.log" 2>&1 &
    echo $! >"$RUN_DIR/kubelet.pid"
  fi
  wait_for "the static pod node-check running on $POD_SUBNET (logs: $NODE_DIR/kubelet.log, $NODE_DIR/containerd.log)" 120 pod_running
  echo "kube-node: $(pod_running); containerd $("$ctr" -a "$sock" version | awk '/Server/{s=1} s&&/Version/{print $2; exit}'), $("$kubelet" --version)" >&2
  echo "kube-node: state in $NODE_DIR, logs $NODE_DIR/{containerd,kubelet}.log; stop with: scripts/kube-node.sh down" >&2
}

case ${1:-} in
  up) up ;;
  down) down ;;
  *) die "usage: scripts/kube-node.sh up|down" ;;
esac
