package deploy

import (
	"slices"
	"testing"
)

func TestMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`up{job="understudy-replica"} == 0`, []string{"up"}},
		{`understudy_replica_freshness_age_seconds > 5`, []string{"understudy_replica_freshness_age_seconds"}},
		{`sum by (instance, outcome) (rate(a_total{job=~"$job", x="}{[("}[$__rate_interval]))`, []string{"a_total"}},
		{`sum(rate(a_total[5m])) by (mode) / ignoring(mode) group_left sum(b)`, []string{"a_total", "b"}},
		{`histogram_quantile(0.99, sum by (le) (rate(h_bucket{outcome="ok"}[1h30m])))`, []string{"h_bucket"}},
		{"(up == 0)\nor on (namespace, pod)\n(kube_pod_status_ready{condition=\"true\"} == 0)", []string{"kube_pod_status_ready", "up"}},
		{`x > 1000 and deriv(x[10m]) > 0 unless y offset 5m`, []string{"x", "y"}},
		{`max by (namespace) (max_over_time(lock[2m:30s])) == bool 1 + Inf - NaN`, []string{"lock"}},
		{`a - b{l='it''s'} * 1e3 + c:recorded:rate5m`, []string{"a", "b", "c:recorded:rate5m"}},
		{`count without (instance) (a) > on () group_right sum without (x) (b)`, []string{"a", "b"}},
	} {
		got, err := MetricNames(tc.expr)
		if err != nil {
			t.Errorf("MetricNames(%q): %v", tc.expr, err)
			continue
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("MetricNames(%q) = %q, want %q", tc.expr, got, tc.want)
		}
	}
	for _, bad := range []string{`up{job="x"`, `rate(x[5m)`, `x{a="b}`, `sum by (a (x)`} {
		if got, err := MetricNames(bad); err == nil {
			t.Errorf("MetricNames(%q) = %q, want an error", bad, got)
		}
	}
}
