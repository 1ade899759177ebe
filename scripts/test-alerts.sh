#!/usr/bin/env bash
# Unit tests of the Prometheus alert rules with promtool: every alert in
# deploy/monitoring/alerts.yaml fires from synthetic series and stays quiet
# from healthy ones (deploy/monitoring/alerts_test.yaml). Not part of CI (CI
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
