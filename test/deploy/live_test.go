package deploy

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/understudy-kv/understudy/test/harness"
)

// TestDashboardAndAlertsNameExportedMetrics scrapes a live replica and a
// live mirror and checks that every metric the dashboard's panels and
// variables and the alert rules name is one of theirs (or, for the rules
// only, one of external's). The replica runs with --role standby, so that
// the role loop's metrics (lag, promotable, failover lock) are registered,
// and serves a forwarded write, a strong and a serializable read first:
// metrics with labels appear in /metrics only once a label set was used.
func TestDashboardAndAlertsNameExportedMetrics(t *testing.T) {
	want := map[string][]string{} // metric → where it is named
	for where, expr := range dashboardQueries(t, loadDashboard(t)) {
		addNames(t, want, "dashboard "+where, expr)
	}
	for where, expr := range alertQueries(t) {
		addNames(t, want, where, expr)
	}
	for name, where := range want {
		if _, ok := external[name]; ok && !slices.ContainsFunc(where, isAlert) {
			t.Errorf("%s is not exported by understudy (%s exports it) but the dashboard names it: %v", name, external[name], where)
		}
	}

	// Over TLS, so that the replica presents certificate files
	// (understudy_tls_certificate_expiry_timestamp_seconds); its metrics on
	// a plain listener of their own, as the StatefulSet serves them.
	certs := harness.NewCerts(t)
	tlsSrc := harness.StartCluster(t, harness.ClusterConfig{N: 1, TLS: certs})
	replicaMetrics := harness.URL(harness.FreePort(t))
	r := harness.StartReplica(t, tlsSrc, harness.ReplicaConfig{Name: "r1", Extra: []string{"--role", "standby", "--listen-metrics-urls", replicaMetrics}})
	exercise(t, r.ClientURL, certs)

	src := harness.StartCluster(t, harness.ClusterConfig{N: 1})
	dst := harness.StartCluster(t, harness.ClusterConfig{N: 1})
	mirrorMetrics := harness.URL(harness.FreePort(t))
	harness.Start(t, harness.ProcConfig{Name: "mirror", Bin: src.Bins.Replica, Args: []string{
		"mirror", "--source-endpoints", src.Endpoints()[0], "--dest-endpoints", dst.Endpoints()[0],
		"--prefix", "/m/", "--listen-metrics-urls", mirrorMetrics,
	}})

	var missing []string
	harness.WaitFor(t, 2*time.Minute, "every named metric in the replica's or the mirror's /metrics", func() (bool, error) {
		have := map[string]bool{}
		for _, u := range []string{replicaMetrics, mirrorMetrics} {
			m, err := harness.Scrape(t.Context(), u+"/metrics", nil)
			if err != nil {
				return false, err
			}
			for _, n := range m.SeriesNames() { // histograms as their _bucket, _sum and _count, as PromQL names them
				have[n] = true
			}
		}
		missing = missing[:0]
		for name, where := range want {
			if !have[name] && external[name] == "" {
				missing = append(missing, fmt.Sprintf("%s (named by %s)", name, strings.Join(where, "; ")))
			}
		}
		slices.Sort(missing)
		return len(missing) == 0, fmt.Errorf("not exported: %s", strings.Join(missing, ", "))
	})
}

func isAlert(where string) bool { return strings.HasPrefix(where, "alert ") }

func addNames(t *testing.T, want map[string][]string, where, expr string) {
	t.Helper()
	names, err := MetricNames(expr)
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	for _, n := range names {
		want[n] = append(want[n], where)
	}
}

// exercise makes the replica use the label sets the dashboard shows: a
// write (forwarded), a strong and a serializable read, with certs' client
// certificate.
func exercise(t *testing.T, endpoint string, certs *harness.Certs) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(), TLS: certs.ClientConfig()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "/m/k", "v"); err != nil {
		t.Fatalf("put through the replica: %v", err)
	}
	if _, err := cli.Get(ctx, "/m/k"); err != nil {
		t.Fatalf("strong read: %v", err)
	}
	if _, err := cli.Get(ctx, "/m/k", clientv3.WithSerializable()); err != nil {
		t.Fatalf("serializable read: %v", err)
	}
}
