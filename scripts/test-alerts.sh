#!/usr/bin/env bash
# Unit tests of the Prometheus alert rules with promtool: every alert in
# deploy/monitoring/alerts.yaml fires from synthetic series and stays quiet
# from healthy ones (deploy/monitoring/alerts_test.yaml); and every query of
# the Grafana dashboard parses as PromQL (with Grafana's variables replaced,
# as recording rules promtool checks). Not part of CI (CI
# installs nothing); CI's Go test test/deploy checks the rules parse, name
# only exported metrics and match the PrometheusRule.
#
# promtool: `apt-get install prometheus` on Debian (2.42 checked), or any
# Prometheus release's promtool; PROMTOOL=/path/to/promtool picks one.
set -euo pipefail
cd "$(dirname "$0")/../deploy/monitoring"
PROMTOOL=${PROMTOOL:-promtool}
command -v "$PROMTOOL" >/dev/null || {
  echo "test-alerts: no promtool (apt-get install prometheus, or set PROMTOOL)" >&2
  exit 1
}
"$PROMTOOL" --version 2>&1 | head -1
"$PROMTOOL" check rules alerts.yaml
"$PROMTOOL" test rules alerts_test.yaml

# The dashboard's queries, as recording rules, for promtool's PromQL parser.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - dashboard.json >"$tmp/dashboard-queries.yaml" <<'PY'
import json, re, sys
d = json.load(open(sys.argv[1]))
exprs = [t["expr"] for p in d["panels"] for t in p.get("targets", [])]
for v in d["templating"]["list"]:
    q = v.get("query")
    q = q.get("query") if isinstance(q, dict) else q
    m = re.match(r"^label_values\((.*),\s*[a-zA-Z_]+\)$", q or "")
    if v["type"] == "query" and m:
        exprs.append(m.group(1))
print("groups:\n  - name: dashboard\n    rules:")
for i, e in enumerate(exprs):
    e = e.replace("$__rate_interval", "5m")
    e = re.sub(r"\$[a-zA-Z_]+", ".*", e)
    print("      - record: dashboard:query%d\n        expr: %s" % (i, json.dumps(e)))
PY
echo "dashboard.json queries:"
"$PROMTOOL" check rules "$tmp/dashboard-queries.yaml" | tail -n +2
