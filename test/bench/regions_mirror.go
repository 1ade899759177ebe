package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/understudy-kv/understudy/test/harness"
)

// The mirror into region B (issue 29): understudy's mirror runs in region
// B beside a one-member destination cluster there, and watches the voters
// in region A through their client URLs across the WAN. Puts go to the
// leader in region A at twice the mirror scenario's rate; the lag is from
// the put to the destination's watch event (the WAN's one way, RTT/2,
// included) and from the source's own watch event in region A.

// regionMirrorName names a row of the mirror into region B.
func regionMirrorName(what string, rate int, rtt time.Duration) string {
	return fmt.Sprintf("mirror A → B: lag at %d puts/s%s, %s", rate, what, rttName(rtt))
}

// regionMirrorRows measures the mirror's lag at rtt.
func regionMirrorRows(r *runner, g *harness.Regions, p params, rtt time.Duration) []Row {
	g.SetRTT(rtt, jitterAt(rtt))
	dst := harness.StartCluster(r, harness.ClusterConfig{N: 1, Token: "bench-region-b"})
	dc := dst.Client(r)
	src := g.Cluster.Client(r)
	var remote []string
	for _, m := range g.Cluster.Members {
		remote = append(remote, g.RemoteClientURL(m))
	}
	bin, args := understudyMirror().cmd(g.Cluster.Bins, strings.Join(remote, ","), dst.Endpoints()[0])
	proc := harness.Start(r, harness.ProcConfig{Name: "mirror-b", Bin: bin, Args: args})
	defer proc.Stop()
	waitStreaming(r, src, dc, "the mirror into region B")
	rate := 2 * p.mirrorRate
	lag, own := mirrorLag(src, dc, p, rate)
	r.Logf("mirror A → B at %s: lag at %d puts/s p50 %v p99 %v (%d of %d events); from the source's watch event p50 %v p99 %v",
		rttName(rtt), rate, lag.P50, lag.P99, lag.Ops, lag.Ops+lag.Errors, own.P50, own.P99)
	note := fmt.Sprintf("understudy mirror in region B (--source-endpoints: the voters' client URLs across the WAN; --dest-endpoints: a one-member cluster in B), puts at the leader in region A at %d/s for %v; lag p99 %.2f one-way WAN delays (RTT/2)",
		rate, p.dur, float64(lag.P99)/float64(rtt/2))
	return []Row{
		{Scenario: "regions", Name: regionMirrorName("", rate, rtt), Result: lag, Note: note},
		{Scenario: "regions", Name: regionMirrorName(", from the source's watch event", rate, rtt), Result: own},
	}
}
