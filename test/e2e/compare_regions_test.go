package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/understudy-kv/understudy/compare"
	"github.com/understudy-kv/understudy/test/harness"
)

// TestCompareBoundCheckAcrossRegions: with the replica in region B at
// 150 ms RTT from the voters, bounded reads asking for 100 ms — less than
// the replica can prove there (a round takes one RTT) — are answered by
// the documented fallback (a ReadIndex round), never from a state older
// than their budget; and no answer of the replica reports a staleness
// bound smaller than what it missed. `replica compare` checks both against
// the writer's acknowledged history (issue 29), with a mirror in region B
// whose watch crosses the WAN.
func TestCompareBoundCheckAcrossRegions(t *testing.T) {
	bins := harness.Binaries(t)
	harness.Must(t, bins.RequireReplica())
	g := harness.StartRegions(t, harness.RegionsConfig{NoLearner: true})
	dst := harness.StartCluster(t, harness.ClusterConfig{N: 1, Token: "region-b"})
	var remote []string
	for _, m := range g.Cluster.Members {
		remote = append(remote, g.RemoteClientURL(m))
	}
	harness.Start(t, harness.ProcConfig{Name: "mirror", Bin: bins.Replica, Args: []string{
		"mirror", "--source-endpoints", strings.Join(remote, ","), "--dest-endpoints", dst.Endpoints()[0],
		"--prefix", "/cmp/", "--name", "cmp", "--log-level", "warn"}})
	g.SetRTT(150*time.Millisecond, 2*time.Millisecond)

	out := t.TempDir()
	p := harness.Start(t, harness.ProcConfig{Name: "compare", Bin: bins.Replica, Args: []string{
		"compare", "--primary", strings.Join(g.Cluster.Endpoints(), ","), "--replica", g.Replica.ClientURL,
		"--mirror-dest", dst.Endpoints()[0], "--prefix", "/cmp/", "--bound", "100ms",
		"--duration", "12s", "--out", out}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	code, err := p.Wait(ctx)
	if err != nil || code != 0 {
		t.Fatalf("compare across regions: exit %d, %v:\n%s", code, err, p.Log())
	}
	b, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatalf("no report: %v\n%s", err, p.Log())
	}
	var r compare.Report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("report.json: %v", err)
	}
	bounded := pathReport(t, &r, compare.PathReplicaBounded)
	if bounded.Run.Reads == 0 {
		t.Fatalf("no bounded reads answered:\n%s", b)
	}
	if bounded.BoundViolations != 0 {
		t.Errorf("%d bounded reads older than their 100ms budget", bounded.BoundViolations)
	}
	for _, path := range []compare.Path{compare.PathReplicaStrong, compare.PathReplicaWeak, compare.PathReplicaBounded} {
		pr := pathReport(t, &r, path)
		if pr.ReportedBounds == 0 || pr.ReportedBoundViolations != 0 {
			t.Errorf("%s: %d of %d answers reported a bound smaller than what they missed (want some answers, none)", path, pr.ReportedBoundViolations, pr.ReportedBounds)
		}
		t.Logf("%s: %d reads, staleness p50 %.0f ms p99 %.0f ms; %d reported bounds, %d too small", path, pr.Run.Reads, pr.Run.StalenessMS.P50, pr.Run.StalenessMS.P99, pr.ReportedBounds, pr.ReportedBoundViolations)
	}
	if pr := pathReport(t, &r, compare.PathReplicaStrong); pr.Linearizable != compare.VerdictOK {
		t.Errorf("strong reads in region B: porcupine says %s, want linearizable", pr.Linearizable)
	}
	mirror := pathReport(t, &r, compare.PathMirror)
	t.Logf("mirror in region B: staleness p50 %.0f ms p99 %.0f ms over %d reads", mirror.Run.StalenessMS.P50, mirror.Run.StalenessMS.P99, mirror.Run.Reads)
}
