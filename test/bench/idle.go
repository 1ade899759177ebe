package main

import (
	"context"
	"fmt"
	"time"

	"github.com/understudy-kv/understudy/test/harness"
)

// Idle rows' names, shared with the report.
const (
	idleBase        = "leader idle, 0 replicas"
	idleFastReplica = "leader idle, 1 replica, rounds every --freshness-interval"
	idleNoisyOne    = "leader idle, 1 replica, never quiet (rounds every --freshness-idle-interval)"
	idleOneReplica  = "leader idle, 1 replica"
	idleFourReplica = "leader idle, 4 replicas"
	idleStockBase   = "stock etcd leader idle, 0 learners"
	idleStockOne    = "stock etcd leader idle, 1 stock learner"
)

// idleScenario measures what idle replicas cost the leader: its CPU over a
// quiet window with 0, 1 and 4 replicas serving nothing (once they have gone
// quiet: --freshness-quiet-interval), and, for reference, with 1 replica
// whose freshness rounds never slow down (--freshness-idle-interval 0
// --freshness-quiet-interval 0, the behaviour before idle rounds existed)
// and with 1 replica that never goes quiet (--freshness-quiet-interval 0,
// the behaviour before quiet rounds). The same on stock etcd with 0 and 1
// stock learner shows what any non-voting member costs the leader (its
// heartbeats), which no replica can go below.
//
// The leader's CPU is read from /proc in 10 ms ticks, so a window is long
// (4× the row length: 40 s in the full run) to resolve a few hundredths of
// a percent of a core.
func idleScenario(p params) ([]Row, error) {
	window := 4 * p.dur
	measure := func(r *runner, c *harness.Cluster, name string, quiet ...*harness.Replica) Row {
		leader := c.WaitLeader(r, 30*time.Second)
		// Let joins and catch-up traffic settle: the measured window is
		// quiet, as an idle cluster is.
		<-time.After(p.dur / 2)
		var urls []string
		for _, rep := range quiet {
			urls = append(urls, rep.ClientURL)
		}
		waitQuiet(r, urls, p.replicaArgs)
		m := startCPU(map[string]int{"leader": leader.Proc.PID()})
		start := time.Now()
		<-time.After(window)
		return Row{Scenario: "idle", Name: name, Result: Result{Seconds: time.Since(start).Seconds(), CPU: m.stop()}}
	}
	var rows []Row
	err := scenario("idle: understudy", func(r *runner) {
		c := harness.StartCluster(r, harness.ClusterConfig{N: 3})
		rows = append(rows, measure(r, c, idleBase))
		for _, ref := range []struct{ name, row, idle string }{{"fast", idleFastReplica, "0"}, {"noisy", idleNoisyOne, "1s"}} {
			args := append([]string{"--freshness-idle-interval", ref.idle, "--freshness-quiet-interval", "0"}, p.replicaArgs...)
			rep := harness.StartReplica(r, c, harness.ReplicaConfig{Name: ref.name, Extra: args})
			rows = append(rows, measure(r, c, ref.row))
			rep.Stop()
			leave(r, c, ref.name)
		}
		var reps []*harness.Replica
		for i := range 4 {
			reps = append(reps, harness.StartReplica(r, c, harness.ReplicaConfig{Name: fmt.Sprintf("idle%d", i), Extra: p.replicaArgs}))
			if i == 0 {
				rows = append(rows, measure(r, c, idleOneReplica, reps...))
			}
		}
		rows = append(rows, measure(r, c, idleFourReplica, reps...))
	})
	if err != nil {
		return rows, err
	}
	err = scenario("idle: stock etcd", func(r *runner) {
		kinds := []harness.Kind{harness.KindEtcd, harness.KindEtcd, harness.KindEtcd}
		c := harness.StartCluster(r, harness.ClusterConfig{N: 3, Kinds: kinds})
		rows = append(rows, measure(r, c, idleStockBase))
		addStockLearner(r, c, "learner")
		rows = append(rows, measure(r, c, idleStockOne))
	})
	return rows, err
}

// leave removes the stopped replica name from c's membership.
func leave(r *runner, c *harness.Cluster, name string) {
	cli := c.Client(r)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ml, err := cli.MemberList(ctx)
	if err != nil {
		r.Fatalf("member list: %v", err)
	}
	for _, m := range ml.Members {
		if m.Name == name {
			if _, err := cli.MemberRemove(ctx, m.ID); err != nil {
				r.Fatalf("remove %s: %v", name, err)
			}
		}
	}
}

// idleCost is each idle member's added leader CPU, as a percentage of a
// core, from rows base (none) and with (n of them).
func idleCost(base, with Row, n int) float64 {
	if base.Seconds == 0 || with.Seconds == 0 || n == 0 {
		return 0
	}
	return 100 * (with.CPU["leader"]/with.Seconds - base.CPU["leader"]/base.Seconds) / float64(n)
}
