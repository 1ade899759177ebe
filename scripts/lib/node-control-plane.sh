# Sourced by scripts/kube-node.sh: the node's control plane, each process
# started in the background with its PID in $RUN_DIR/NAME.pid and its log in
# $NODE_DIR/log/NAME.log:
#   voter-1..3                three primaries (etcd v3.7.3 voters, --max-learners 8) on the bridge's
#                             address, client ports 2379/2479/2579, peer 2380/2480/2580, metrics 2381/2481/2581
#   kube-apiserver            on $NODE_IP:6443, storing in the voters
#   kube-controller-manager   with the HPA controller
#   kube-scheduler
#   kube-proxy                iptables mode, for the ClusterIPs (cluster DNS, the replicas' client Service)
# The voters resolve names through the cluster's DNS, as kubeadm's etcd pods
# with dnsPolicy ClusterFirstWithHostNet do (deploy/README.md, step 1): each
# runs in its own mount namespace with $etc/voter-resolv.conf bound over
# /etc/resolv.conf, so that the voters can dial the replicas' peer URLs and
# check their certificates by name. Nothing else on the machine is changed.

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

# start_voter N [STATE CLUSTER] starts voter-N (1..3) with
# --initial-cluster-state STATE (new) and --initial-cluster CLUSTER (the
# three voters); `scripts/kube-node.sh voter N start` restarts a stopped one.
start_voter() {
  local n=$1 state=${2:-new} cluster=${3:-} i
  if [ -z "$cluster" ]; then
    for i in 1 2 3; do cluster+="${cluster:+,}voter-$i=https://$NODE_IP:$(voter_port "$i" 1)"; done
  fi
  printf 'nameserver %s\nsearch kube-system.svc.%s svc.%s %s\noptions ndots:5\n' \
    "$SERVICE_IP_DNS" "$CLUSTER_DOMAIN" "$CLUSTER_DOMAIN" "$CLUSTER_DOMAIN" >"$etc/voter-resolv.conf"
  start_bg "voter-$n" unshare -m --propagation private sh -c 'mount --bind "$0" /etc/resolv.conf && exec "$@"' "$etc/voter-resolv.conf" \
    "$NODE_DIR/bin/primary" --name "voter-$n" --data-dir "$NODE_DIR/voters/voter-$n" \
    --listen-client-urls "https://$NODE_IP:$(voter_port "$n" 0)" --advertise-client-urls "https://$NODE_IP:$(voter_port "$n" 0)" \
    --listen-peer-urls "https://$NODE_IP:$(voter_port "$n" 1)" --initial-advertise-peer-urls "https://$NODE_IP:$(voter_port "$n" 1)" \
    --listen-metrics-urls "http://$NODE_IP:$(voter_port "$n" 2)" \
    --initial-cluster "$cluster" --initial-cluster-state "$state" --initial-cluster-token understudy-node \
    --cert-file "$pki/etcd/server.crt" --key-file "$pki/etcd/server.key" --trusted-ca-file "$pki/etcd/ca.crt" --client-cert-auth \
    --peer-cert-file "$pki/etcd/server.crt" --peer-key-file "$pki/etcd/server.key" --peer-trusted-ca-file "$pki/etcd/ca.crt" --peer-client-cert-auth \
    --max-learners 8
}

node_etcdctl() {
  "$NODE_DIR/bin/etcdctl" --endpoints "$(voter_endpoints)" --cacert "$pki/etcd/ca.crt" --cert "$pki/etcd/server.crt" --key "$pki/etcd/server.key" "$@"
}

# rejoin_voter N brings voter-N back after a standby replaced its member,
# as docs/roles.md's runbook says: its data dir (a removed member's) moved
# aside, the member added back as a learner, started as an existing member,
# promoted once caught up.
rejoin_voter() {
  local n=$1 out cluster id
  stop_pid "$RUN_DIR/voter-$n.pid"
  if [ -d "$NODE_DIR/voters/voter-$n" ]; then mv "$NODE_DIR/voters/voter-$n" "$NODE_DIR/voters/voter-$n.removed-$(date +%s)"; fi
  out=$(node_etcdctl member add "voter-$n" --learner --peer-urls "https://$NODE_IP:$(voter_port "$n" 1)")
  cluster=$(echo "$out" | sed -n 's/^ETCD_INITIAL_CLUSTER="\(.*\)"$/\1/p')
  id=$(echo "$out" | sed -n 's/^Member \([0-9a-f]*\) added.*/\1/p')
  [ -n "$cluster" ] && [ -n "$id" ] || die "member add voter-$n: $out"
  start_voter "$n" existing "$cluster"
  wait_for "voter-$n ($id) promoted: etcd promotes a learner once caught up" 120 node_etcdctl member promote "$id"
  echo "kube-node: voter-$n back as member $id" >&2
}

voter_endpoints() { echo "https://$NODE_IP:$(voter_port 1 0),https://$NODE_IP:$(voter_port 2 0),https://$NODE_IP:$(voter_port 3 0)"; }

start_control_plane() {
  local kc=$etc/admin.kubeconfig
  write_kubeconfig "$kc"
  for n in 1 2 3; do start_voter "$n"; done
  wait_for "the voters healthy ($NODE_DIR/log/voter-*.log)" 60 \
    "$NODE_DIR/bin/etcdctl" --endpoints "$(voter_endpoints)" --cacert "$pki/etcd/ca.crt" --cert "$pki/etcd/server.crt" --key "$pki/etcd/server.key" endpoint health
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

stop_control_plane() {
  local name
  for name in kube-proxy kube-scheduler kube-controller-manager kube-apiserver voter-1 voter-2 voter-3; do
    stop_pid "$RUN_DIR/$name.pid"
  done
}
