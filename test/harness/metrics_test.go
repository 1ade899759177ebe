package harness

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

const exposition = `# HELP understudy_replica_requests_total KV calls served, by method and read mode.
# TYPE understudy_replica_requests_total counter
understudy_replica_requests_total{method="Put",mode="",service="KV"} 3
understudy_replica_requests_total{method="Range",mode="serializable",service="KV"} 5
understudy_replica_requests_total{method="Range",mode="strong",service="KV"} 7
# HELP understudy_mirror_stalled 1 while the mirror is stalled.
# TYPE understudy_mirror_stalled gauge
understudy_mirror_stalled 1
# HELP understudy_replica_freshness_round_seconds How long a freshness round takes.
# TYPE understudy_replica_freshness_round_seconds histogram
understudy_replica_freshness_round_seconds_bucket{le="0.005"} 2
understudy_replica_freshness_round_seconds_bucket{le="0.01"} 4
understudy_replica_freshness_round_seconds_bucket{le="+Inf"} 6
understudy_replica_freshness_round_seconds_sum 0.25
understudy_replica_freshness_round_seconds_count 6
# HELP go_gc_duration_seconds A summary of the GC pause durations.
# TYPE go_gc_duration_seconds summary
go_gc_duration_seconds{quantile="0.5"} 0.001
go_gc_duration_seconds{quantile="1"} 0.004
go_gc_duration_seconds_sum 0.5
go_gc_duration_seconds_count 9
`

func parsed(t *testing.T) Metrics {
	t.Helper()
	m, err := ParseMetrics(strings.NewReader(exposition))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestMetricsSumAndValue(t *testing.T) {
	m := parsed(t)
	const reqs = "understudy_replica_requests_total"
	for _, tc := range []struct {
		name   string
		labels []string
		sum    float64
	}{
		{reqs, nil, 15},
		{reqs, []string{"method=Range"}, 12},
		{reqs, []string{"method=Range", "mode=strong"}, 7},
		{reqs, []string{"mode="}, 3}, // an empty label value matches
		{reqs, []string{"method=Range", "absent="}, 12},
		{reqs, []string{"method=Txn"}, 0},
		{reqs, []string{"thod=Range"}, 0}, // labels match by name, not substring
		{"understudy_mirror_stalled", nil, 1},
		{"understudy_replica_freshness_round_seconds_count", nil, 6},
		{"understudy_replica_freshness_round_seconds_sum", nil, 0.25},
		{"understudy_replica_freshness_round_seconds_bucket", []string{"le=0.01"}, 4},
		{"understudy_replica_freshness_round_seconds_bucket", []string{"le=+Inf"}, 6},
		{"understudy_replica_freshness_round_seconds", nil, 0}, // no such series in PromQL
		{"go_gc_duration_seconds", []string{"quantile=1"}, 0.004},
		{"go_gc_duration_seconds_count", nil, 9},
		{"no_such_metric", nil, 0},
	} {
		if got := m.Sum(tc.name, tc.labels...); got != tc.sum {
			t.Errorf("Sum(%s, %v) = %v, want %v", tc.name, tc.labels, got, tc.sum)
		}
	}
	if v, err := m.Value(reqs, "method=Put"); err != nil || v != 3 {
		t.Errorf("Value(Put) = %v, %v; want 3", v, err)
	}
	if _, err := m.Value(reqs, "method=Range"); err == nil {
		t.Error("Value of two series: no error")
	}
	if _, err := m.Value("no_such_metric"); err == nil {
		t.Error("Value of no series: no error")
	}
}

func TestMetricsNamesTypesAndFormat(t *testing.T) {
	m := parsed(t)
	wantFams := []string{"go_gc_duration_seconds", "understudy_mirror_stalled", "understudy_replica_freshness_round_seconds", "understudy_replica_requests_total"}
	if got := m.Names(); !slices.Equal(got, wantFams) {
		t.Errorf("Names() = %v, want %v", got, wantFams)
	}
	wantSeries := []string{"go_gc_duration_seconds", "go_gc_duration_seconds_count", "go_gc_duration_seconds_sum",
		"understudy_mirror_stalled",
		"understudy_replica_freshness_round_seconds_bucket", "understudy_replica_freshness_round_seconds_count", "understudy_replica_freshness_round_seconds_sum",
		"understudy_replica_requests_total"}
	if got := m.SeriesNames(); !slices.Equal(got, wantSeries) {
		t.Errorf("SeriesNames() = %v, want %v", got, wantSeries)
	}
	for fam, typ := range map[string]string{"understudy_replica_requests_total": "counter", "understudy_mirror_stalled": "gauge",
		"understudy_replica_freshness_round_seconds": "histogram", "go_gc_duration_seconds": "summary", "nope": ""} {
		if got := m.Type(fam); got != typ {
			t.Errorf("Type(%s) = %q, want %q", fam, got, typ)
		}
	}
	if got, want := m.Help("understudy_mirror_stalled"), "1 while the mirror is stalled."; got != want {
		t.Errorf("Help = %q, want %q", got, want)
	}
	wantFmt := `understudy_replica_requests_total{method="Put",mode="",service="KV"} 3
understudy_replica_requests_total{method="Range",mode="serializable",service="KV"} 5
understudy_replica_requests_total{method="Range",mode="strong",service="KV"} 7
`
	if got := m.Format("understudy_replica_req"); got != wantFmt {
		t.Errorf("Format:\n%s\nwant:\n%s", got, wantFmt)
	}
	if got := strings.Count(m.Format("understudy_replica_freshness_round_seconds_bucket"), "\n"); got != 3 {
		t.Errorf("Format of a histogram's buckets: %d lines, want 3", got)
	}
}

func TestParseMetricsRejectsGarbage(t *testing.T) {
	if _, err := ParseMetrics(strings.NewReader("understudy_x{a=\"1\" 3\n")); err == nil {
		t.Error("a malformed line parsed without error")
	}
}

func TestScrapeOverHTTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, exposition)
	}))
	defer srv.Close()
	m, err := Scrape(t.Context(), srv.URL+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Sum("understudy_replica_requests_total", "mode=strong"); got != 7 {
		t.Errorf("scraped Sum = %v, want 7", got)
	}
	if _, err := Scrape(t.Context(), srv.URL+"/nope", nil); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("scrape of a 404 page: %v, want an error naming 404", err)
	}
}

func TestScrapeOverTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, exposition) }))
	defer srv.Close()
	if _, err := Scrape(t.Context(), srv.URL+"/metrics", nil); err == nil {
		t.Error("scrape of a server whose certificate the default transport does not trust: no error")
	}
	tlsCfg := srv.Client().Transport.(*http.Transport).TLSClientConfig
	m, err := Scrape(t.Context(), srv.URL+"/metrics", tlsCfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Sum("understudy_mirror_stalled"); got != 1 {
		t.Errorf("scraped over TLS: %v, want 1", got)
	}
}
