#!/usr/bin/env bash
# Renders the Kubernetes manifests offline (deploy/kubernetes/overlays/reader,
# overlays/standby, overlays/cascaded, monitoring) with `kubectl kustomize`
# (or `kustomize build`), and checks each overlay yields its StatefulSet,
# headless and client Services and PodDisruptionBudget and no CRD's object
# (the ServiceMonitor is in monitoring, optional), the cascaded overlay its
# Deployment, client Service, HPA and PDB, and monitoring its ServiceMonitor
# and PrometheusRule. CI's Go test test/deploy
# checks the replica's settings in them without kubectl.
set -euo pipefail
cd "$(dirname "$0")/../deploy/kubernetes"
if command -v kubectl >/dev/null; then
  build() { kubectl kustomize "$1"; }
elif command -v kustomize >/dev/null; then
  build() { kustomize build "$1"; }
else
  echo "check-kubernetes: needs kubectl or kustomize" >&2
  exit 1
fi
for overlay in reader standby; do
  out=$(build "overlays/$overlay")
  for want in "kind: StatefulSet" "name: understudy-replica-$overlay$" "clusterIP: None" \
    "name: understudy-replica-client-$overlay$" "kind: PodDisruptionBudget" \
    "value: understudy-replica-$overlay$" "UNDERSTUDY_ROLE: $overlay$"; do
    grep -q -- "$want" <<<"$out" || { echo "check-kubernetes: overlays/$overlay: no '$want'" >&2; exit 1; }
  done
  if grep -q "monitoring.coreos.com" <<<"$out"; then
    echo "check-kubernetes: overlays/$overlay: a prometheus-operator object (it belongs in monitoring)" >&2; exit 1
  fi
  echo "overlays/$overlay: $(grep -c '^kind:' <<<"$out") objects"
done
out=$(build overlays/cascaded)
for want in "kind: Deployment" "name: understudy-replica-cascaded$" "kind: HorizontalPodAutoscaler" \
  "name: understudy-replica-client-cascaded$" "kind: PodDisruptionBudget" "emptyDir: {}" "UNDERSTUDY_UPSTREAM: https://"; do
  grep -q -- "$want" <<<"$out" || { echo "check-kubernetes: overlays/cascaded: no '$want'" >&2; exit 1; }
done
if grep -q -- "UNDERSTUDY_JOIN\|kind: StatefulSet\|PersistentVolumeClaim" <<<"$out"; then
  echo "check-kubernetes: overlays/cascaded: a member's setting (--join, a StatefulSet, a PVC)" >&2; exit 1
fi
echo "overlays/cascaded: $(grep -c '^kind:' <<<"$out") objects"
out=$(build monitoring)
for want in "kind: PrometheusRule" "kind: ServiceMonitor"; do
  grep -q -- "$want" <<<"$out" || { echo "check-kubernetes: monitoring: no '$want'" >&2; exit 1; }
done
echo "monitoring: $(grep -c '^kind:' <<<"$out") objects"
