# Sourced by scripts/kube-node.sh: the node's certificates, made once with
# openssl under $pki, laid out as kubeadm lays out /etc/kubernetes/pki (so
# scripts/kube-pki-secret.sh --ca-dir $pki/etcd works as on a control-plane
# node):
#   etcd/ca                    the voters' CA (scripts/kube-pki-secret.sh signs the replicas' certificates with it)
#   etcd/server                the three voters' client and peer certificate (they share the bridge's address)
#   apiserver-etcd-client      kube-apiserver's client certificate for the voters
#   ca, apiserver              the Kubernetes CA and kube-apiserver's serving certificate
#   admin                      system:masters; every component's kubeconfig uses it (a test node: no Node authorizer)
#   front-proxy-ca, front-proxy-client   the aggregation layer (metrics-server's APIService)
#   sa.key, sa.pub             service-account token signing

# node_cert NAME CA CN O SANS USAGE writes $pki/NAME.{crt,key}, signed by
# $pki/CA.{crt,key}; SANS is openssl's subjectAltName list (or empty); USAGE
# is its extendedKeyUsage.
node_cert() {
  local name=$1 ca=$2 cn=$3 o=$4 sans=$5 usage=$6 subj="/CN=$3" ext
  [ -s "$pki/$name.crt" ] && return 0
  [ -n "$o" ] && subj="/O=$o/CN=$cn"
  ext=$(mktemp)
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$usage"
    [ -n "$sans" ] && echo "subjectAltName=$sans"
  } >"$ext"
  openssl req -new -newkey rsa:2048 -nodes -keyout "$pki/$name.key" -subj "$subj" -out "$pki/$name.csr" 2>/dev/null
  openssl x509 -req -in "$pki/$name.csr" -CA "$pki/$ca.crt" -CAkey "$pki/$ca.key" -CAcreateserial \
    -days 365 -extfile "$ext" -out "$pki/$name.crt" 2>/dev/null
  rm -f "$ext" "$pki/$name.csr"
}

# node_ca NAME CN writes a self-signed CA $pki/NAME.{crt,key}.
node_ca() {
  [ -s "$pki/$1.crt" ] && return 0
  openssl req -x509 -new -newkey rsa:2048 -nodes -keyout "$pki/$1.key" -subj "/CN=$2" -days 3650 \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
    -out "$pki/$1.crt" 2>/dev/null
}

make_pki() {
  mkdir -p "$pki/etcd"
  node_ca etcd/ca etcd-ca
  node_cert etcd/server etcd/ca "$NODE_NAME" "" "IP:$NODE_IP,IP:127.0.0.1,DNS:localhost,DNS:$NODE_NAME" serverAuth,clientAuth
  node_cert apiserver-etcd-client etcd/ca kube-apiserver-etcd-client "" "" clientAuth
  node_ca ca kubernetes
  node_cert apiserver ca kube-apiserver "" \
    "IP:$SERVICE_IP_KUBERNETES,IP:$NODE_IP,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.$CLUSTER_DOMAIN,DNS:$NODE_NAME" serverAuth
  node_cert admin ca kubernetes-admin system:masters "" clientAuth
  node_ca front-proxy-ca front-proxy-ca
  node_cert front-proxy-client front-proxy-ca front-proxy-client "" "" clientAuth
  [ -s "$pki/sa.key" ] || openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
  [ -s "$pki/sa.pub" ] || openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
}

# write_kubeconfig FILE writes a kubeconfig for the admin certificate.
write_kubeconfig() {
  cat >"$1" <<EOK
apiVersion: v1
kind: Config
clusters:
  - name: understudy-node
    cluster:
      server: https://$NODE_IP:6443
      certificate-authority: $pki/ca.crt
users:
  - name: admin
    user:
      client-certificate: $pki/admin.crt
      client-key: $pki/admin.key
contexts:
  - name: understudy-node
    context: {cluster: understudy-node, user: admin}
current-context: understudy-node
EOK
}
