#!/usr/bin/env bash
# Prints the Secret understudy-etcd-pki that deploy/kubernetes mounts at
# /etc/kubernetes/pki/etcd, laid out as kubeadm's etcd PKI: ca.crt, and a
# server and a peer certificate and key for the replicas, signed by the
# cluster's etcd CA. Run it where the CA is (a control-plane node):
#
#   scripts/kube-pki-secret.sh reader standby | kubectl apply -f -
#
# Arguments are the overlays (deploy/kubernetes/overlays/<name>) whose pods
# use the Secret: StatefulSet understudy-replica-<name>, its headless Service
# of the same name, client Service understudy-replica-client-<name>.
# Options, before them:
#   --ca-dir DIR      the etcd CA (ca.crt, ca.key); default /etc/kubernetes/pki/etcd
#   --namespace NS    default kube-system
#   --domain D        the cluster's DNS domain; default cluster.local
#   --ordinals N      pods 0..N-1 of each StatefulSet are named; default 10
#   --ip IP           one more IP SAN, such as the client Service's ClusterIP
#                     for kube-apiserver's --etcd-servers (repeatable)
#   --days N          validity; default 365
#
# Both certificates name every pod by its DNS name, not by a wildcard: etcd
# checks a peer's client certificate against the connection's source IP by
# resolving the names it lists (etcd's checkSAN), and a wildcard cannot be
# resolved. So the voters must resolve the cluster's DNS names (README).
set -euo pipefail

ca_dir=/etc/kubernetes/pki/etcd namespace=kube-system domain=cluster.local ordinals=10 days=365
ips=()
while [ $# -gt 0 ]; do
  case $1 in
    --ca-dir) ca_dir=$2; shift 2 ;;
    --namespace) namespace=$2; shift 2 ;;
    --domain) domain=$2; shift 2 ;;
    --ordinals) ordinals=$2; shift 2 ;;
    --ip) ips+=("$2"); shift 2 ;;
    --days) days=$2; shift 2 ;;
    -*) echo "kube-pki-secret: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
if [ $# -eq 0 ]; then
  echo "usage: $0 [options] OVERLAY..." >&2
  exit 2
fi
for f in ca.crt ca.key; do
  [ -r "$ca_dir/$f" ] || { echo "kube-pki-secret: cannot read $ca_dir/$f (--ca-dir)" >&2; exit 1; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

sans=DNS:localhost
for overlay in "$@"; do
  sts=understudy-replica-$overlay client=understudy-replica-client-$overlay
  for ((i = 0; i < ordinals; i++)); do
    sans+=",DNS:$sts-$i.$sts.$namespace.svc.$domain,DNS:$sts-$i.$sts.$namespace.svc"
  done
  sans+=",DNS:$client.$namespace.svc.$domain,DNS:$client.$namespace.svc"
done
sans+=",IP:127.0.0.1"
for ip in "${ips[@]}"; do sans+=",IP:$ip"; done

# Like kubeadm's kube-etcd and kube-etcd-peer: both server and client auth.
for kind in server peer; do
  openssl req -new -newkey rsa:2048 -nodes -keyout "$tmp/$kind.key" -out "$tmp/$kind.csr" \
    -subj "/CN=understudy-replica-$kind" 2>/dev/null
  printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=%s\n' \
    "$sans" >"$tmp/$kind.ext"
  openssl x509 -req -in "$tmp/$kind.csr" -CA "$ca_dir/ca.crt" -CAkey "$ca_dir/ca.key" -set_serial "0x$(openssl rand -hex 16)" \
    -days "$days" -sha256 -extfile "$tmp/$kind.ext" -out "$tmp/$kind.crt" 2>/dev/null
  openssl verify -CAfile "$ca_dir/ca.crt" "$tmp/$kind.crt" >/dev/null
done
cp "$ca_dir/ca.crt" "$tmp/ca.crt"

b64() { base64 <"$1" | tr -d '\n'; }
cat <<EOF
apiVersion: v1
kind: Secret
metadata:
  name: understudy-etcd-pki
  namespace: $namespace
  labels:
    app.kubernetes.io/part-of: understudy
type: Opaque
data:
  ca.crt: $(b64 "$tmp/ca.crt")
  server.crt: $(b64 "$tmp/server.crt")
  server.key: $(b64 "$tmp/server.key")
  peer.crt: $(b64 "$tmp/peer.crt")
  peer.key: $(b64 "$tmp/peer.key")
EOF
