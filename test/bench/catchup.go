package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/understudy-kv/understudy/test/harness"
)

// Rows of the catch-up scenario, shared with the report.
const (
	catchUpNone      = "leader puts, no learner joining"
	catchUpReplica   = "leader puts while a replica catches up"
	catchUpNoneStock = "leader puts, no learner joining (the stock learner's cluster)"
	catchUpStock     = "leader puts while a stock etcd learner catches up"
)

// joiner is a member joining a cluster: its process, a wait until it has
// caught up, and its stop.
type joiner struct {
	pid        int
	wait, stop func()
}

// catchupScenario times a member's join into a loaded cluster while a
// writer measures the leader's write throughput before and during the
// catch-up: a replica, then, in a cluster of its own with the same data, a
// stock etcd learner (member add --learner, then started) as the
// reference. The leader's CPU and the joining member's over the catch-up
// say where the machine's time went.
func catchupScenario(p params) ([]Row, error) {
	var rows []Row
	err := scenario("catch-up", func(r *runner) {
		none, during, took := catchUpArm(r, p, func(c *harness.Cluster) joiner {
			rep := harness.StartReplica(r, c, harness.ReplicaConfig{Name: "replica", NoWait: true})
			return joiner{pid: rep.PID(), wait: func() { rep.WaitServing(r, 10*time.Minute) }, stop: rep.Proc.Stop}
		})
		rows = append(rows,
			Row{Scenario: "catch-up", Name: catchUpNone, Result: none},
			Row{Scenario: "catch-up", Name: catchUpReplica, Result: during, Note: catchUpNote(during, took, "replica (until it serves)")},
			Row{Scenario: "catch-up", Name: fmt.Sprintf("replica join to serving, %d keys of 1 KiB", p.catchupKeys), Result: Result{Seconds: took.Seconds()}},
		)
		none, during, took = catchUpArm(r, p, func(c *harness.Cluster) joiner {
			url, proc, _ := harness.JoinStockLearner(r, c, "learner", false)
			return joiner{pid: proc.PID(), wait: func() { harness.WaitCaughtUp(r, c, url) }, stop: proc.Stop}
		})
		rows = append(rows,
			Row{Scenario: "catch-up", Name: catchUpNoneStock, Result: none},
			Row{Scenario: "catch-up", Name: catchUpStock, Result: during, Note: catchUpNote(during, took, "stock learner (until it has applied the leader's commit index)")},
		)
	})
	return rows, err
}

// catchUpNote says what a catch-up cost the machine.
func catchUpNote(during Result, took time.Duration, who string) string {
	return fmt.Sprintf("the join took %.1f s; over it the leader used %.2f CPU-s (%.0f %% of a core) and the joining %s %.2f CPU-s (%.0f %%), of this machine's 2 cores",
		took.Seconds(), during.CPU["leader"], 100*during.CPU["leader"]/took.Seconds(), who, during.CPU["extra"], 100*during.CPU["extra"]/took.Seconds())
}

// catchUpArm starts a cluster of 3 voters with p.catchupKeys keys of
// 1 KiB, measures the leader's puts for p.dur, then joins a member (join)
// while the puts go on, until it has caught up, and stops the cluster. It
// returns the puts before and during the join, with the leader's and the
// joining member's CPU-s over the join in the latter, and how long it took.
func catchUpArm(r *runner, p params, join func(c *harness.Cluster) joiner) (before, during Result, took time.Duration) {
	c := harness.StartCluster(r, harness.ClusterConfig{N: 3})
	defer func() {
		for _, m := range c.Members {
			m.Proc.Stop()
		}
	}()
	leader := c.Leader(r)
	populate(r, c.Client(r), p.catchupKeys, strings.Repeat("x", 1024))
	cs := clients(r, leader.ClientURL, p.conns)
	put := func(ctx context.Context, w int) error {
		_, err := cs[w%len(cs)].Put(ctx, "bench/c/"+strconv.Itoa(w), value256)
		return err
	}
	cpu0 := cpuOf(r, leader.Proc.PID())
	before = load(context.Background(), p.workers/2, p.dur, put)
	before.CPU = map[string]float64{"leader": cpuOf(r, leader.Proc.PID()) - cpu0}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		during = load(ctx, p.workers/2, 10*time.Minute, put)
	}()
	start, leader0 := time.Now(), cpuOf(r, leader.Proc.PID())
	j := join(c)
	j.wait()
	took = time.Since(start)
	// The joining member's CPU since it started: all of it is the join.
	cpu := map[string]float64{"leader": cpuOf(r, leader.Proc.PID()) - leader0, "extra": cpuOf(r, j.pid)}
	cancel()
	<-done
	j.stop()
	during.CPU = cpu
	r.Logf("joined after %v; leader puts %.0f/s before, %.0f/s during; leader %.2f CPU-s, joining member %.2f CPU-s",
		took.Round(time.Millisecond), before.Throughput, during.Throughput, cpu["leader"], cpu["extra"])
	return before, during, took
}
