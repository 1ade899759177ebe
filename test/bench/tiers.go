package main

import (
	"fmt"
	"slices"
	"time"

	"github.com/understudy-kv/understudy/test/harness"
)

// tiersID is the tiers scenario's Row.Scenario.
const tiersID = "tiers"

// Rows of the tiers scenario: each tier's delivery, and what each hop
// adds to the tier above it.
var tierNames = []string{
	"tiers: delivery at tier 0, the leader",
	"tiers: delivery at tier 1, a learner replica",
	"tiers: delivery at tier 2, a cascaded replica fed by it",
	"tiers: delivery at tier 3, a cascaded replica fed by that one",
}

var tierAdded = []string{
	"",
	"tiers: added at tier 1 (a learner replica, after the leader's acknowledgement)",
	"tiers: added at tier 2 (a cascaded replica, after its learner replica)",
	"tiers: added at tier 3 (a cascaded replica, after the cascaded replica feeding it)",
}

// tiersScenario measures watch delivery down a chain of copies with
// nothing else on the host (issue 58: the added p50 per tier ≤ 2 ms,
// p99 ≤ 5 ms): 3 primaries, a learner replica, a cascaded replica fed by
// it and one fed by that one, a watch on each, puts at p.tierRate through
// the leader in p.tierRounds rounds of p.tierPuts. A put's delay at a tier
// runs from the leader's acknowledgement to its event there; what a tier
// adds is, put by put, its event's arrival less the tier above's.
func tiersScenario(p params) ([]Row, error) {
	var rows []Row
	err := scenario(tiersID, func(r *runner) {
		c := harness.StartCluster(r, harness.ClusterConfig{N: 3})
		leader := c.WaitLeader(r, 30*time.Second)
		replica := harness.StartReplica(r, c, harness.ReplicaConfig{Name: "r1", Extra: p.replicaArgs})
		tier2 := harness.StartReplica(r, c, harness.ReplicaConfig{Name: "c1", Upstream: []string{replica.ClientURL}, Extra: p.replicaArgs})
		tier3 := harness.StartReplica(r, c, harness.ReplicaConfig{Name: "c2", Upstream: []string{tier2.ClientURL}, Extra: p.replicaArgs})
		urls := []string{leader.ClientURL, replica.ClientURL, tier2.ClientURL, tier3.ClientURL}
		put := clients(r, leader.ClientURL, 1)[0]
		var runs []delivered
		for k := range p.tierRounds {
			runs = append(runs, deliveries(r, put, urls, fmt.Sprintf("bench/tiers/%d/", k), p.tierPuts, p.tierRate))
		}
		if l := c.Leader(r); l != leader {
			r.Fatalf("tiers: the leader moved from %s to %s", leader.Name, l.Name)
		}
		rows = tierRows(p, runs)
		for _, row := range rows {
			r.Logf("%-85s p50 %v p99 %v", row.Name, row.P50, row.P99)
		}
	})
	return rows, err
}

// tierRows are the tiers scenario's rows from its runs: each tier's
// delays, and what each tier added to the one above, over every run; the
// p50 and p99 of each run apart in the note.
func tierRows(p params, runs []delivered) []Row {
	var rows []Row
	how := fmt.Sprintf("%d rounds of %d puts at %d/s through the leader", len(runs), p.tierPuts, p.tierRate)
	for i, name := range tierNames {
		var all []time.Duration
		var p50s, p99s []float64
		missed := 0
		for _, d := range runs {
			ds, m := d.delays(i)
			all = append(all, ds...)
			missed += m
			p50s, p99s = append(p50s, ms(percentile(ds, 0.5))), append(p99s, ms(percentile(ds, 0.99)))
		}
		slices.Sort(all)
		rows = append(rows, tierRow(name, all, missed, fmt.Sprintf("%s; the delay from the put's acknowledgement to its event; p50 per round %s ms, p99 %s ms", how, windowsText(p50s, 2), windowsText(p99s, 2)), len(runs), p))
		if i == 0 {
			continue
		}
		all, p50s, p99s = nil, nil, nil
		for _, d := range runs {
			ds := d.added(i, i-1)
			all = append(all, ds...)
			p50s, p99s = append(p50s, ms(percentile(ds, 0.5))), append(p99s, ms(percentile(ds, 0.99)))
		}
		slices.Sort(all)
		rows = append(rows, tierRow(tierAdded[i], all, 0, fmt.Sprintf("%s; put by put, its event's arrival here less at the tier above; p50 per round %s ms, p99 %s ms", how, windowsText(p50s, 2), windowsText(p99s, 2)), len(runs), p))
	}
	return rows
}

// tierRow is a row of the tiers scenario over sorted delays ds.
func tierRow(name string, ds []time.Duration, missed int, note string, runs int, p params) Row {
	return Row{Scenario: tiersID, Name: name, Note: note, Result: Result{Ops: len(ds), Errors: missed,
		Seconds: float64(runs*p.tierPuts) / float64(p.tierRate), P50: percentile(ds, 0.5), P99: percentile(ds, 0.99)}}
}
