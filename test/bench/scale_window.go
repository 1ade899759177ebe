package main

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/test/harness"
)

// scaleArm is one row of the scale scenario being measured: its windows'
// figures (in metric) and their results added up.
type scaleArm struct {
	n             int
	kind, metric  string
	windows       []float64
	results       []Result
	rounds        float64
	leaderSeconds float64
}

func newScaleArm(n int, kind, metric string) *scaleArm {
	return &scaleArm{n: n, kind: kind, metric: metric}
}

// add records one window's result and its figure.
func (a *scaleArm) add(res Result, figure float64) {
	a.results = append(a.results, res)
	a.windows = append(a.windows, figure)
	a.rounds += res.LeaderRounds
}

func (a *scaleArm) row(p params) Row {
	res := Result{}
	if len(a.results) > 0 {
		res = combineAll(a.results)
		res.LeaderRounds = a.rounds
	}
	var note string
	switch a.metric {
	case metricLeaderPct:
		note = fmt.Sprintf("leader CPU, %% of a core, per window of %v: %s", 2*p.scaleWindow, windowsText(a.windows, 3))
	case metricRSS:
		note = fmt.Sprintf("VmRSS, MiB, per process: %s", windowsText(a.windows, 1))
	default:
		note = fmt.Sprintf("leader CPU-s/10k per window of %v: %s", p.scaleWindow, windowsText(a.windows, 3))
	}
	return Row{Scenario: scaleID, Name: scaleName(a.n, a.kind), Note: note, Windows: a.windows, WindowsMetric: a.metric, Result: res}
}

// idleWindow measures both leaders over one quiet window of 2 × the
// window, and counts the background rounds the replicas at urls asked
// u's leader for.
func (g *scaleRig) idleWindow(r *runner, u, s *scaleArm, urls []string) {
	waitQuiet(r, urls, g.p.replicaArgs)
	rounds0, err := leaderRounds(urls)
	if err != nil {
		r.Fatalf("idle: rounds before: %v", err)
	}
	cpu := startCPU(map[string]int{"u": g.uLeader.Proc.PID(), "s": g.sLeader.Proc.PID()})
	start := time.Now()
	<-time.After(2 * g.p.scaleWindow)
	secs := time.Since(start).Seconds()
	used := cpu.stop()
	rounds1, err := leaderRounds(urls)
	if err != nil {
		r.Fatalf("idle: rounds after: %v", err)
	}
	u.add(Result{Seconds: secs, CPU: map[string]float64{"leader": used["u"]}, LeaderRounds: rounds1 - rounds0}, 100*used["u"]/secs)
	s.add(Result{Seconds: secs, CPU: map[string]float64{"leader": used["s"]}}, 100*used["s"]/secs)
}

// writeWindow puts at p.scaleWriteRate through cli, to leader, for a
// window; the CPU of the processes extra names (the learner replicas that
// feed cascaded ones) goes in the row's "extra" CPU, summed.
func (g *scaleRig) writeWindow(a *scaleArm, cli *clientv3.Client, leader *harness.Member, extra ...int) {
	pids := map[string]int{"leader": leader.Proc.PID()}
	for i, pid := range extra {
		pids["extra"+strconv.Itoa(i)] = pid
	}
	cpu := startCPU(pids)
	res := loadAt(context.Background(), g.writeRate, 16, g.p.scaleWindow, func(ctx context.Context, w int) error {
		_, err := cli.Put(ctx, "bench/scale/"+strconv.Itoa(w), value256)
		return err
	})
	used := cpu.stop()
	res.CPU = map[string]float64{"leader": used["leader"]}
	if len(extra) > 0 {
		for i := range extra {
			res.CPU["extra"] += used["extra"+strconv.Itoa(i)]
		}
	}
	a.add(res, res.CPUPer10k("leader"))
}

// readWindow reads at p.scaleReadRate over cs for a window, strong, and
// counts the rounds the replicas at urls asked leader for.
func (g *scaleRig) readWindow(r *runner, a *scaleArm, cs []*clientv3.Client, leader *harness.Member, urls []string) {
	rounds0, err := leaderRounds(urls)
	if err != nil {
		r.Fatalf("%s: rounds before: %v", a.kind, err)
	}
	cpu := startCPU(map[string]int{"leader": leader.Proc.PID()})
	var first atomic.Value // the first error, for the log
	res := loadAt(context.Background(), g.readRte, g.p.workers, g.p.scaleWindow, func(ctx context.Context, w int) error {
		_, err := cs[w%len(cs)].Get(ctx, "bench/key/"+strconv.Itoa(w*7919%g.p.keys))
		if err != nil {
			first.CompareAndSwap(nil, err.Error())
		}
		return err
	})
	if e := first.Load(); e != nil {
		r.Logf("%s: first error: %v", a.kind, e)
	}
	res.CPU = cpu.stop()
	rounds1, err := leaderRounds(urls)
	if err != nil {
		r.Fatalf("%s: rounds after: %v", a.kind, err)
	}
	res.LeaderRounds = rounds1 - rounds0
	a.add(res, res.CPUPer10k("leader"))
	r.Logf("N=%d %-70s %6.0f ops/s (%d errors) leader %.3f CPU-s/10k, %.0f rounds", a.n, a.kind, res.Throughput, res.Errors, res.CPUPer10k("leader"), res.LeaderRounds)
}
