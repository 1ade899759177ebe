package main

import (
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/test/harness"
	"github.com/understudy-kv/understudy/wire"
)

// Rows of the headers scenario, shared with the report.
const (
	headersOn       = "replica weak, --freshness-headers=always"
	headersOff      = "replica weak, --freshness-headers=off"
	headersAsked    = "replica weak, asking (understudy-freshness; default on-request)"
	headersNotAsked = "replica weak, not asking (default on-request)"
)

// headersScenario measures what the four answer headers (readpath/answer.go)
// cost weak reads, in two pairs of arms of the same weak reads, generator
// and connections:
//   - always vs off: two replicas join the same cluster, one with each
//     setting; windows of p.headersWindow alternate between them (on, off,
//     off, on), and halfway both restart with the settings swapped, so that
//     neither a drift in the machine's load nor a difference between the
//     two processes favours one arm;
//   - asking vs not asking: a third replica with the default
//     (on-request), the same client asking (wire.FreshnessKey) in one
//     arm's windows and not in the other's, alternating likewise.
//
// p.headersWindows windows per arm, added up.
func headersScenario(p params) ([]Row, error) {
	var rows []Row
	err := scenario("headers", func(r *runner) {
		c := harness.StartCluster(r, harness.ClusterConfig{N: 3, Kinds: []harness.Kind{harness.KindPrimary, harness.KindPrimary, harness.KindPrimary}})
		reps := []*harness.Replica{
			harness.StartReplica(r, c, harness.ReplicaConfig{Name: "replica-a", Extra: headersArgs(p, wire.HeadersAlways)}),
			harness.StartReplica(r, c, harness.ReplicaConfig{Name: "replica-b", Extra: headersArgs(p, wire.HeadersOff)}),
			harness.StartReplica(r, c, harness.ReplicaConfig{Name: "replica-c", Extra: slices.Clone(p.replicaArgs)}),
		}
		tp := &topology{cluster: c}
		tp.roles(r)
		populate(r, c.Client(r), p.keys, value256)
		// A window through each, not counted: the first reads after the
		// fill and the joins are slower.
		for _, rep := range reps {
			tp.extraURL, tp.extraPID = rep.ClientURL, rep.PID()
			readsOn(r, tp, p, 0, p.workers, "warm-up via "+rep.Name, []string{rep.ClientURL}, clients(r, rep.ClientURL, p.conns), true, nil)
		}
		perPhase := max(p.headersWindows/2, 1)
		short := p
		short.dur = p.headersWindow
		var on, off, asked, notAsked []Result
		for phase := range 2 {
			if phase == 1 {
				// Swap the settings: replica-a off, replica-b always.
				for i, rep := range reps[:2] {
					rep.Stop()
					rep.RestartWithArgs(r, append(rep.Args(), "--freshness-headers="+[]string{wire.HeadersOff, wire.HeadersAlways}[i]))
					rep.WaitServing(r, 5*time.Minute)
				}
			}
			always, never := reps[phase], reps[1-phase]
			csAlways, csNever, csDefault := clients(r, always.ClientURL, p.conns), clients(r, never.ClientURL, p.conns), clients(r, reps[2].ClientURL, p.conns)
			for k := range perPhase {
				pairs := [][]headersArm{
					{{always, csAlways, &on, nil, "always"}, {never, csNever, &off, nil, "off"}},
					{{reps[2], csDefault, &asked, []string{wire.FreshnessKey, "1"}, "asking"}, {reps[2], csDefault, &notAsked, nil, "not asking"}},
				}
				for _, arms := range pairs {
					if (k+phase)%2 == 1 {
						slices.Reverse(arms)
					}
					for _, a := range arms {
						tp.extraURL, tp.extraPID = a.rep.ClientURL, a.rep.PID()
						row := readsOn(r, tp, short, 0, p.workers, fmt.Sprintf("replica weak via %s, %s", a.rep.Name, a.what), []string{a.rep.ClientURL}, a.cs, true, a.md)
						*a.sum = append(*a.sum, row.Result)
					}
				}
			}
			for _, cl := range slices.Concat(csAlways, csNever, csDefault) {
				cl.Close()
			}
		}
		note := fmt.Sprintf("%d windows of %v each, %d workers over %d connections; ", 2*perPhase, short.dur, p.workers, p.conns)
		for _, arm := range []struct {
			name, note string
			rs         []Result
		}{
			{headersOn, note + "two replicas, one with each setting, windows alternating between them (on, off, off, on, …: window i of each row is a pair), both restarted with the settings swapped halfway; a window of " + p.dur.String() + " through each first, not counted", on},
			{headersOff, "", off},
			{headersAsked, note + "one replica with the default, the same clients asking in one row's windows and not in the other's, alternating", asked},
			{headersNotAsked, "", notAsked},
		} {
			tps := throughputs(arm.rs)
			n := "ops/s per window: " + windowsText(tps, 0)
			if arm.note != "" {
				n = arm.note + "; " + n
			}
			rows = append(rows, Row{Scenario: "headers", Name: arm.name, Note: n, Windows: tps, WindowsMetric: "throughput", Result: combineAll(arm.rs)})
		}
		r.Logf("weak reads: always %.0f ops/s, off %.0f, asking %.0f, not asking %.0f", rows[0].Throughput, rows[1].Throughput, rows[2].Throughput, rows[3].Throughput)
	})
	return rows, err
}

// headersArm is one arm of the headers scenario: reads through rep on
// clients cs, sending md, added up in sum.
type headersArm struct {
	rep  *harness.Replica
	cs   []*clientv3.Client
	sum  *[]Result
	md   []string
	what string
}

// headersArgs are a replica's arguments in the headers scenario.
func headersArgs(p params, mode string) []string {
	return append(slices.Clone(p.replicaArgs), "--freshness-headers="+mode)
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
