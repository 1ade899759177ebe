package main

import (
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/test/harness"
)

// Rows of the headers scenario, shared with the report.
const (
	headersOn  = "replica weak, answer headers on"
	headersOff = "replica weak, --freshness-headers=false"
)

// headersScenario measures what the four answer headers a replica attaches
// to every answer (readpath/answer.go) cost weak reads (issue 23): the same
// weak reads, generator and connections through a replica with its headers
// and through one with --freshness-headers=false. Two replicas join the
// same cluster, one with each setting; windows of p.dur alternate between
// them (on, off, off, on), and halfway both restart with the settings
// swapped, so that neither a drift in the machine's load nor a difference
// between the two processes favours one arm. p.headersWindows windows of
// p.headersWindow per arm, added up.
func headersScenario(p params) ([]Row, error) {
	var rows []Row
	err := scenario("headers", func(r *runner) {
		c := harness.StartCluster(r, harness.ClusterConfig{N: 3, Kinds: []harness.Kind{harness.KindPrimary, harness.KindPrimary, harness.KindPrimary}})
		reps := []*harness.Replica{
			harness.StartReplica(r, c, harness.ReplicaConfig{Name: "replica-a", Extra: headersArgs(p, true)}),
			harness.StartReplica(r, c, harness.ReplicaConfig{Name: "replica-b", Extra: headersArgs(p, false)}),
		}
		tp := &topology{cluster: c}
		tp.roles(r)
		populate(r, c.Client(r), p.keys, value256)
		var on, off []Result
		// A window through each, not counted: the first reads after the
		// fill and the joins are slower.
		for _, rep := range reps {
			tp.extraURL, tp.extraPID = rep.ClientURL, rep.PID()
			readsOn(r, tp, p, 0, p.workers, "warm-up via "+rep.Name, []string{rep.ClientURL}, clients(r, rep.ClientURL, p.conns), true, "")
		}
		perPhase := max(p.headersWindows/2, 1)
		short := p
		short.dur = p.headersWindow
		for phase := range 2 {
			if phase == 1 {
				// Swap the settings: replica-a without, replica-b with.
				for i, rep := range reps {
					rep.Stop()
					rep.RestartWithArgs(r, append(rep.Args(), fmt.Sprintf("--freshness-headers=%v", i == 1)))
					rep.WaitServing(r, 5*time.Minute)
				}
			}
			withHeaders, without := reps[phase], reps[1-phase]
			csOn, csOff := clients(r, withHeaders.ClientURL, p.conns), clients(r, without.ClientURL, p.conns)
			for k := range perPhase {
				arms := []struct {
					rep *harness.Replica
					cs  []*clientv3.Client
					sum *[]Result
					on  bool
				}{{withHeaders, csOn, &on, true}, {without, csOff, &off, false}}
				if (k+phase)%2 == 1 {
					slices.Reverse(arms)
				}
				for _, a := range arms {
					tp.extraURL, tp.extraPID = a.rep.ClientURL, a.rep.PID()
					name := fmt.Sprintf("replica weak via %s, headers %v", a.rep.Name, a.on)
					row := readsOn(r, tp, short, 0, p.workers, name, []string{a.rep.ClientURL}, a.cs, true, "")
					*a.sum = append(*a.sum, row.Result)
				}
			}
			for _, cl := range append(csOn, csOff...) {
				cl.Close()
			}
		}
		note := fmt.Sprintf("both rows: %d windows of %v each, %d workers over %d connections; two replicas, one with each setting, windows alternating between them (on, off, off, on, …: window i of each row is a pair), both restarted with the settings swapped halfway; a window of %v through each first, not counted", 2*perPhase, short.dur, p.workers, p.conns, p.dur)
		onRes, offRes := combineAll(on), combineAll(off)
		rows = append(rows,
			Row{Scenario: "headers", Name: headersOn, Note: note + "; ops/s per window: " + windowsText(throughputs(on), 0), Windows: throughputs(on), WindowsMetric: "throughput", Result: onRes},
			Row{Scenario: "headers", Name: headersOff, Note: "ops/s per window: " + windowsText(throughputs(off), 0), Windows: throughputs(off), WindowsMetric: "throughput", Result: offRes})
		r.Logf("weak reads: headers on %.0f ops/s, off %.0f ops/s: %.3f×", onRes.Throughput, offRes.Throughput, onRes.Throughput/offRes.Throughput)
	})
	return rows, err
}

// headersArgs are a replica's arguments in the headers scenario.
func headersArgs(p params, headers bool) []string {
	return append(slices.Clone(p.replicaArgs), fmt.Sprintf("--freshness-headers=%v", headers))
}

// combineAll adds up runs of the same thing: ops, errors, seconds and
// CPU summed, p50 and p99 the runs' mean.
func combineAll(rs []Result) Result {
	sum := Result{CPU: map[string]float64{}}
	for _, r := range rs {
		sum.Ops += r.Ops
		sum.Errors += r.Errors
		sum.Seconds += r.Seconds
		sum.P50 += r.P50 / time.Duration(len(rs))
		sum.P99 += r.P99 / time.Duration(len(rs))
		for role, s := range r.CPU {
			sum.CPU[role] += s
		}
	}
	if sum.Seconds > 0 {
		sum.Throughput = float64(sum.Ops) / sum.Seconds
	}
	return sum
}

// throughputs are rs' ops/s.
func throughputs(rs []Result) []float64 {
	var out []float64
	for _, r := range rs {
		out = append(out, r.Throughput)
	}
	return out
}
