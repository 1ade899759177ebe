package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/test/harness"
)

// regionsSoakID is the Row.Scenario of the regions-ready scenario.
const regionsSoakID = "regions-ready"

// regionsSoakRTTs are the RTTs the soak holds, each for the soak's length.
var regionsSoakRTTs = []time.Duration{50 * time.Millisecond, 150 * time.Millisecond}

// regionsSoakScenario holds two regions at each RTT for ten minutes (one
// with quick) under a light load — puts through the leader, strong and weak
// reads through the replica, 20/s each — with the replica in region B a
// standby (--role standby, its defaults), and asks its /readyz every
// second (issue 29): readiness must never flap, the voters' term and
// leader must not change, and the standby must remove no live voter.
func regionsSoakScenario(p params, quick bool) ([]Row, error) {
	hold := 10 * time.Minute
	if quick {
		hold = time.Minute
	}
	var rows []Row
	err := scenario(regionsSoakID, func(r *runner) {
		g := harness.StartRegions(r, harness.RegionsConfig{NoLearner: true, ReplicaArgs: append(slices.Clone(p.replicaArgs), "--role", "standby")})
		before := memberNames(r, g.Cluster)
		put, rep := g.Cluster.Client(r), clients(r, g.Replica.ClientURL, 1)[0]
		ready := watchReady(g.Replica.ClientURL, g.Cluster)
		for _, rtt := range regionsSoakRTTs {
			g.SetRTT(rtt, jitterAt(rtt))
			ready.begin(rtt)
			rows = append(rows, soakLoad(put, rep, rtt, hold)...)
		}
		readyRows := ready.finish()
		after := memberNames(r, g.Cluster)
		for i := range readyRows {
			readyRows[i].Scenario = regionsSoakID
			readyRows[i].Name = strings.Replace(readyRows[i].Name, "replica /readyz", "standby /readyz, held", 1)
			readyRows[i].Note += fmt.Sprintf("; members before %s, after %s", before, after)
		}
		if before != after {
			r.Logf("members changed: %s → %s", before, after)
		}
		rows = append(readyRows, rows...)
	})
	return rows, err
}

// soakLoad runs the soak's light load for hold at rtt: a row per op.
func soakLoad(put, rep *clientv3.Client, rtt, hold time.Duration) []Row {
	ops := []struct {
		name string
		op   func(ctx context.Context, w int) error
	}{
		{"put @ leader", func(ctx context.Context, w int) error { return regionPut(ctx, put, w) }},
		{"standby strong", func(ctx context.Context, w int) error { return regionGet()(ctx, rep, w) }},
		{"standby weak", func(ctx context.Context, w int) error {
			return regionGet(clientv3.WithSerializable())(ctx, rep, w)
		}},
	}
	out := make([]Row, len(ops))
	var wg sync.WaitGroup
	for i, o := range ops {
		wg.Go(func() {
			res := loadAt(context.Background(), 20, 32, hold, o.op)
			out[i] = Row{Scenario: regionsSoakID, Name: fmt.Sprintf("%s, held, %s", o.name, rttName(rtt)), Result: res,
				Note: fmt.Sprintf("20/s for %v while /readyz was asked (an open loop from 32 workers; errors include ops a second behind their time)", hold)}
		})
	}
	wg.Wait()
	return out
}

// memberNames is c's member list as "name(learner)" words, sorted.
func memberNames(r *runner, c *harness.Cluster) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Client(r).MemberList(ctx)
	if err != nil {
		r.Fatalf("member list: %v", err)
	}
	var names []string
	for _, m := range resp.Members {
		n := m.Name
		if m.IsLearner {
			n += "(learner)"
		}
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, " ")
}
