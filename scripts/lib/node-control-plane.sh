# Sourced by scripts/kube-node.sh: the node's control plane.
#
# The voters are static pods, as kubeadm runs etcd: $etc/manifests/etcd-voter-N.yaml
# (N = 1..3), which the kubelet starts before any API server exists. Each
# runs `primary` (etcd v3.7.3, understudy's voter) from the image
# localhost/understudy-voter (with etcdctl beside it, as kubeadm's etcd image
# has), on the host network at the bridge's address: client ports
# 2379/2479/2579 (also on 127.0.0.1), peer 2380/2480/2580, metrics
# 2381/2481/2581, data in $NODE_DIR/voters/voter-N, certificates from
# $pki/etcd at /etc/kubernetes/pki/etcd. Their manifests are written once
# and then edited as deploy/README.md's step 1 edits kubeadm's (they start
# without --max-learners: the primary's default, 8, where etcd's is 1). dnsPolicy
# ClusterFirstWithHostNet: the voters resolve the replicas' DNS peer URLs
# through CoreDNS (step 1 again).
#
# The rest run as processes, each with its PID in $RUN_DIR/NAME.pid and its
# log in $NODE_DIR/log/NAME.log:
#   kube-apiserver            on $NODE_IP:6443, storing in the voters
#   kube-controller-manager   with the HPA controller
#   kube-scheduler
#   kube-proxy                iptables mode, for the ClusterIPs (cluster DNS, the replicas' client Service)

# start_bg NAME CMD... starts CMD unless $RUN_DIR/NAME.pid names a live process.
start_bg() {
  local name=$1
  shift
  if [ -f "$RUN_DIR/$name.pid" ] && kill -0 "$(cat "$RUN_DIR/$name.pid")" 2>/dev/null; then return 0; fi
  mkdir -p "$NODE_DIR/log"
  nohup "$@" >>"$NODE_DIR/log/$name.log" 2>&1 &
  echo $! >"$RUN_DIR/$name.pid"
}

voter_port() { echo $((2279 + 100 * $1 + $2)); } # voter_port N OFFSET: N=1..3; 0 client, 1 peer, 2 metrics

# voter_manifest N [STATE CLUSTER] writes voter-N's static pod with
# --initial-cluster-state STATE (new) and --initial-cluster CLUSTER (the
# three voters) to stdout.
voter_manifest() {
  local n=$1 state=${2:-new} cluster=${3:-} i c p m
  if [ -z "$cluster" ]; then
    for i in 1 2 3; do cluster+="${cluster:+,}voter-$i=https://$NODE_IP:$(voter_port "$i" 1)"; done
  fi
  c=$(voter_port "$n" 0) p=$(voter_port "$n" 1) m=$(voter_port "$n" 2)
  cat <<EOM
apiVersion: v1
kind: Pod
metadata:
  name: etcd-voter-$n
  namespace: kube-system
  labels: {component: etcd, tier: control-plane, voter: voter-$n}
spec:
  hostNetwork: true
  dnsPolicy: ClusterFirstWithHostNet
  priorityClassName: system-node-critical
  containers:
    - name: etcd
      image: localhost/understudy-voter:$VOTER_TAG
      imagePullPolicy: Never
      command:
        - primary
        - --name=voter-$n
        - --data-dir=/var/lib/etcd
        - --listen-client-urls=https://127.0.0.1:$c,https://$NODE_IP:$c
        - --advertise-client-urls=https://$NODE_IP:$c
        - --listen-peer-urls=https://$NODE_IP:$p
        - --initial-advertise-peer-urls=https://$NODE_IP:$p
        - --listen-metrics-urls=http://$NODE_IP:$m
        - --initial-cluster=$cluster
        - --initial-cluster-state=$state
        - --initial-cluster-token=understudy-node
        - --cert-file=/etc/kubernetes/pki/etcd/server.crt
        - --key-file=/etc/kubernetes/pki/etcd/server.key
        - --trusted-ca-file=/etc/kubernetes/pki/etcd/ca.crt
        - --client-cert-auth=true
        - --peer-cert-file=/etc/kubernetes/pki/etcd/server.crt
        - --peer-key-file=/etc/kubernetes/pki/etcd/server.key
        - --peer-trusted-ca-file=/etc/kubernetes/pki/etcd/ca.crt
        - --peer-client-cert-auth=true
      volumeMounts:
        - {name: etcd-data, mountPath: /var/lib/etcd}
        - {name: etcd-certs, mountPath: /etc/kubernetes/pki/etcd, readOnly: true}
  volumes:
    - {name: etcd-data, hostPath: {path: $NODE_DIR/voters/voter-$n, type: DirectoryOrCreate}}
    - {name: etcd-certs, hostPath: {path: $pki/etcd, type: Directory}}
EOM
}

# write_voters writes the three voters' manifests where none is, in the
# kubelet's static pod directory or set aside by `voter N stop`.
write_voters() {
  local n
  mkdir -p "$etc/manifests-stopped"
  for n in 1 2 3; do
    [ -f "$etc/manifests/etcd-voter-$n.yaml" ] || [ -f "$etc/manifests-stopped/etcd-voter-$n.yaml" ] ||
      voter_manifest "$n" >"$etc/manifests/etcd-voter-$n.yaml"
  done
}

# stop_voter and start_voter move voter-N's manifest out of the kubelet's
# static pod directory and back, as kubeadm's runbooks stop a static pod.
stop_voter() {
  if [ -f "$etc/manifests/etcd-voter-$1.yaml" ]; then mv "$etc/manifests/etcd-voter-$1.yaml" "$etc/manifests-stopped/"; fi
  wait_for "voter-$1's container gone" 60 voter_gone "$1"
}
start_voter() {
  if [ -f "$etc/manifests-stopped/etcd-voter-$1.yaml" ]; then mv "$etc/manifests-stopped/etcd-voter-$1.yaml" "$etc/manifests/"; fi
}
voter_gone() { ! curl -s -o /dev/null --max-time 1 "http://$NODE_IP:$(voter_port "$1" 2)/health"; }

node_etcdctl() {
  "$NODE_DIR/bin/etcdctl" --endpoints "$(voter_endpoints)" --cacert "$pki/etcd/ca.crt" --cert "$pki/etcd/server.crt" --key "$pki/etcd/server.key" "$@"
}

# rejoin_voter N brings voter-N back after a standby replaced its member,
# as docs/roles.md's runbook says: its static pod stopped, its data dir (a
# removed member's) moved aside, the member added back as a learner, the pod
# started as an existing member (its --max-learners kept), promoted once
# caught up.
rejoin_voter() {
  local n=$1 out cluster id old learners
  old=$etc/manifests-stopped/etcd-voter-$n.yaml
  stop_voter "$n"
  learners=$(grep -o -- '--max-learners=[0-9]*' "$old" || true)
  if [ -d "$NODE_DIR/voters/voter-$n" ]; then mv "$NODE_DIR/voters/voter-$n" "$NODE_DIR/voters/voter-$n.removed-$(date +%s)"; fi
  out=$(node_etcdctl member add "voter-$n" --learner --peer-urls "https://$NODE_IP:$(voter_port "$n" 1)")
  cluster=$(echo "$out" | sed -n 's/^ETCD_INITIAL_CLUSTER="\(.*\)"$/\1/p')
  id=$(echo "$out" | sed -n 's/^Member \([0-9a-f]*\) added.*/\1/p')
  [ -n "$cluster" ] && [ -n "$id" ] || die "member add voter-$n: $out"
  voter_manifest "$n" existing "$cluster" >"$old"
  if [ -n "$learners" ]; then sed -i "s|^\(\s*\)- --name=voter-$n\$|&\n\1- $learners|" "$old"; fi
  start_voter "$n"
  wait_for "voter-$n ($id) promoted: etcd promotes a learner once caught up" 120 node_etcdctl member promote "$id"
  echo "kube-node: voter-$n back as member $id" >&2
}

voter_endpoints() { echo "https://$NODE_IP:$(voter_port 1 0),https://$NODE_IP:$(voter_port 2 0),https://$NODE_IP:$(voter_port 3 0)"; }

# start_control_plane starts what runs as processes, once the voters (the
# kubelet's static pods) answer.
start_control_plane() {
  local kc=$etc/admin.kubeconfig
  write_kubeconfig "$kc"
  wait_for "the voters healthy (the kubelet's static pods; $NODE_DIR/kubelet.log)" 120 node_etcdctl endpoint health
  start_bg kube-apiserver "$kbin/kube-apiserver" \
    --etcd-servers "$(voter_endpoints)" --etcd-cafile "$pki/etcd/ca.crt" \
    --etcd-certfile "$pki/apiserver-etcd-client.crt" --etcd-keyfile "$pki/apiserver-etcd-client.key" \
    --bind-address "$NODE_IP" --advertise-address "$NODE_IP" --secure-port 6443 \
    --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" --client-ca-file "$pki/ca.crt" \
    --service-account-issuer "https://kubernetes.default.svc.$CLUSTER_DOMAIN" \
    --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
    --service-cluster-ip-range "$SERVICE_SUBNET" --authorization-mode Node,RBAC --allow-privileged=true \
    --kubelet-preferred-address-types InternalIP --kubelet-client-certificate "$pki/admin.crt" --kubelet-client-key "$pki/admin.key" \
    --requestheader-client-ca-file "$pki/front-proxy-ca.crt" --requestheader-allowed-names front-proxy-client \
    --requestheader-username-headers X-Remote-User --requestheader-group-headers X-Remote-Group \
    --requestheader-extra-headers-prefix X-Remote-Extra- --enable-aggregator-routing=true \
    --proxy-client-cert-file "$pki/front-proxy-client.crt" --proxy-client-key-file "$pki/front-proxy-client.key" \
    --profiling=false
  wait_for "kube-apiserver ready ($NODE_DIR/log/kube-apiserver.log)" 90 "$kbin/kubectl" --kubeconfig "$kc" get --raw /readyz
  start_bg kube-controller-manager "$kbin/kube-controller-manager" \
    --kubeconfig "$kc" --authentication-kubeconfig "$kc" --authorization-kubeconfig "$kc" \
    --bind-address 127.0.0.1 --leader-elect=false --root-ca-file "$pki/ca.crt" \
    --service-account-private-key-file "$pki/sa.key" --cluster-signing-cert-file "$pki/ca.crt" --cluster-signing-key-file "$pki/ca.key" \
    --profiling=false
  start_bg kube-scheduler "$kbin/kube-scheduler" \
    --kubeconfig "$kc" --authentication-kubeconfig "$kc" --authorization-kubeconfig "$kc" \
    --bind-address 127.0.0.1 --leader-elect=false --profiling=false
  # No conntrack or localnet sysctls are written (0 keeps the kernel's).
  start_bg kube-proxy "$kbin/kube-proxy" --kubeconfig "$kc" --proxy-mode iptables --hostname-override "$NODE_NAME" \
    --cluster-cidr "$POD_SUBNET" --masquerade-all --iptables-localhost-nodeports=false \
    --conntrack-max-per-core 0 --conntrack-tcp-timeout-established 0 --conntrack-tcp-timeout-close-wait 0 \
    --metrics-bind-address 127.0.0.1:10249 --healthz-bind-address 127.0.0.1:10256
}

# stop_control_plane stops the processes; the voters stop with every other
# container (down kills the containerd tasks).
stop_control_plane() {
  local name
  for name in kube-proxy kube-scheduler kube-controller-manager kube-apiserver; do
    stop_pid "$RUN_DIR/$name.pid"
  done
}
