package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/understudy-kv/understudy/test/harness"
)

// The paired rows settle whether the WAN adds to the local reads' tail
// (issue 29: weak and bounded reads at 150 ms RTT p99 ≤ 1.2× at RTT 0).
// Measured one RTT after the other, minutes apart, two p99s also differ
// by whatever else the 2 cores did in between: the stock learner's
// serializable reads, which cross no WAN either, moved by 1.18× in one
// run. Here windows at RTT 0 and at the far RTT alternate (0, far, far,
// 0, …: window i of each arm is a pair), and each arm's p99 is taken
// over all its windows' reads.
const (
	// pairedWindow is one window's measured part, after pairedSettle
	// at its RTT (the links' delay changed; bounded reads' freshness
	// rounds take one round trip to follow).
	pairedWindow = 4 * time.Second
	pairedSettle = time.Second
	// pairedWindows per arm (quick: pairedWindowsQuick).
	pairedWindows      = 6
	pairedWindowsQuick = 2
)

// pairedPaths are the paths whose p99 the WAN must not move.
var pairedPaths = []string{pathReplicaWeak, pathReplicaBounded}

// pairedRowName names the paired row of path at rtt with n clients.
func pairedRowName(path string, rtt time.Duration, n int) string {
	return regionRowName(path, rtt, n) + ", paired windows"
}

// regionPairedRows measures each of pairedPaths at 1 and at 32 clients in
// windows alternating between RTT 0 and far, and leaves the links at far.
func regionPairedRows(r *runner, g *harness.Regions, ep regionEndpoints, far time.Duration, quick bool) []Row {
	windows := pairedWindows
	if quick {
		windows = pairedWindowsQuick
	}
	defer g.SetRTT(far, jitterAt(far))
	var rows []Row
	for _, n := range regionClients {
		for _, name := range pairedPaths {
			path := regionPathNamed(r, name)
			rtts := []time.Duration{0, far}
			lat := map[time.Duration][]time.Duration{}
			res := map[time.Duration][]Result{}
			for k := range windows {
				order := slices.Clone(rtts)
				if k%2 == 1 {
					slices.Reverse(order)
				}
				for _, rtt := range order {
					g.SetRTT(rtt, jitterAt(rtt))
					w, l := pairedWindowRun(path, ep, n)
					res[rtt] = append(res[rtt], w)
					lat[rtt] = append(lat[rtt], l...)
				}
			}
			p99 := map[time.Duration]time.Duration{}
			for _, rtt := range rtts {
				slices.Sort(lat[rtt])
				p99[rtt] = percentile(lat[rtt], 0.99)
			}
			if p99[0] == 0 || p99[far] == 0 {
				r.Fatalf("%s, %d clients, paired: no reads counted (p99 %v at RTT 0, %v at %v)", name, n, p99[0], p99[far], far)
			}
			ratio := p99[far].Seconds() / p99[0].Seconds()
			for _, rtt := range rtts {
				sum := combineAll(res[rtt])
				sum.P50, sum.P99 = percentile(lat[rtt], 0.50), p99[rtt]
				note := fmt.Sprintf("%d windows of %v (after %v at its RTT, not counted), alternating with the same path at %s (%s, %s, %s, %s, …); p50 and p99 over all the windows' reads", windows, pairedWindow, pairedSettle, rttName(rtts[1-slices.Index(rtts, rtt)]), rttName(0), rttName(far), rttName(far), rttName(0))
				if rtt == far {
					note += fmt.Sprintf("; p99 vs its pair at RTT 0: %s× (goal ≤ 1.2 %s)", ratioText(ratio), tick(ratio <= 1.2))
				}
				rows = append(rows, Row{Scenario: regionsID, Name: pairedRowName(name, rtt, n), Note: note, Result: sum})
			}
			r.Logf("%s, %d clients, paired: p99 %v at RTT 0, %v at %v: %.2f×", name, n, p99[0].Round(time.Microsecond), p99[far].Round(time.Microsecond), far, ratio)
		}
	}
	return rows
}

// pairedWindowRun runs path with n clients for pairedSettle+pairedWindow
// and keeps the latencies of the reads that began after the settle.
func pairedWindowRun(path regionPath, ep regionEndpoints, n int) (Result, []time.Duration) {
	cs := path.on(ep)
	lat := make([][]time.Duration, n)
	errs := make([]int, n)
	start := time.Now()
	res := load(context.Background(), n, pairedSettle+pairedWindow, func(ctx context.Context, w int) error {
		t0 := time.Now()
		err := path.op(ctx, cs[w%len(cs)], w)
		if t0.Sub(start) < pairedSettle || ctx.Err() != nil {
			return nil // not counted: the settle, or cut off by the end
		}
		if err != nil {
			errs[w]++
			return err
		}
		lat[w] = append(lat[w], time.Since(t0))
		return nil
	})
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	// Ops and throughput of the counted part (no CPU: these reads cost
	// the leader nothing, and the regular rows have it).
	res.Ops, res.Seconds, res.Errors = len(all), pairedWindow.Seconds(), 0
	for _, e := range errs {
		res.Errors += e
	}
	res.Throughput = float64(res.Ops) / res.Seconds
	return res, all
}

// regionPathNamed is the regionPaths entry called name.
func regionPathNamed(r *runner, name string) regionPath {
	for _, p := range regionPaths {
		if p.name == name {
			return p
		}
	}
	r.Fatalf("no region path %q", name)
	return regionPath{}
}
