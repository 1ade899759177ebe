package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/test/harness"
)

// fanoutPairedID is the fanout-paired scenario's Row.Scenario.
const fanoutPairedID = "fanout-paired"

// pairedE is the fanout-paired scenario's number of cascaded replicas.
const pairedE = 16

// Kinds of the fanout-paired scenario's rows, named fanoutName(pairedE, kind).
const (
	pairedIdleRunning = "leader idle, the cascaded replicas running"
	pairedIdleStopped = "leader idle, the same cascaded replicas stopped (SIGSTOP)"
	pairedPutsRunning = "puts at the leader, the cascaded replicas running"
	pairedPutsStopped = "puts at the leader, the same cascaded replicas stopped (SIGSTOP)"
)

// fanoutPairedScenario answers the lines of the fanout scenario its
// windows cannot (issue 38, at E = 16: leader CPU idle and per put ≤ 1.1×
// E = 0). There, an idle leader spends about 1.5 % of a core, 15 of
// /proc's 10 ms ticks a window, so idle ratios carry ± 0.7; and at E = 16
// the host is saturated (2 + 16 stock learners and 16 cascaded replicas
// on one CPU): puts fail and the leader, waiting on starved followers,
// batches more and spends less per put on both rigs. Here one rig — 3
// primaries, 2 learner replicas, 16 cascaded replicas fed by them, no
// stock rig — is measured idle and under puts at a rate the host carries,
// in rounds of windows with the cascaded replicas running and stopped
// (SIGSTOP), in ABBA order. Stopped, the leader's cluster is E = 0's: the
// cascaded replicas are no raft members and never talk to the leader; what
// differs between the arms is what the 16 cost it. CPU comes from the
// leader's threads' schedstat (nanoseconds, not ticks); its peer and gRPC
// traffic is counted beside it.
func fanoutPairedScenario(p params) ([]Row, error) {
	var rows []Row
	err := scenario(fanoutPairedID, func(r *runner) {
		g := startPairedRig(r, p)
		defer g.undo()
		arms := map[string]*scaleArm{}
		var traffic [2]idleTraffic
		for _, k := range []string{pairedIdleRunning, pairedIdleStopped, pairedPutsRunning, pairedPutsStopped} {
			arms[k] = newScaleArm(pairedE, k, metricLeaderPct)
		}
		arms[pairedPutsRunning].metric, arms[pairedPutsStopped].metric = "leader CPU/10k", "leader CPU/10k"
		windows := []func(){
			func() { g.idleWindow(r, arms[pairedIdleRunning], false, &traffic[0]) },
			func() { g.idleWindow(r, arms[pairedIdleStopped], true, &traffic[1]) },
			func() { g.putWindow(r, arms[pairedPutsRunning], false) },
			func() { g.putWindow(r, arms[pairedPutsStopped], true) },
		}
		for k := range p.pairedRounds {
			for i := range windows {
				if k%2 == 1 {
					i = len(windows) - 1 - i
				}
				windows[i]()
			}
		}
		if l := g.c.Leader(r); l != g.leader {
			r.Fatalf("the leader moved from %s to %s: its CPU is no longer one process's", g.leader.Name, l.Name)
		}
		for _, k := range []string{pairedIdleRunning, pairedIdleStopped, pairedPutsRunning, pairedPutsStopped} {
			a := arms[k]
			row := a.row(p)
			row.Scenario, row.Name = fanoutPairedID, fanoutName(pairedE, k)
			if a.metric == metricLeaderPct {
				t := traffic[0]
				if k == pairedIdleStopped {
					t = traffic[1]
				}
				row.Note = fmt.Sprintf("leader CPU, %% of a core (schedstat), per window of %v: %s; the leader's traffic per second: %s", p.pairedWindow, windowsText(a.windows, 3), t.text())
			} else {
				row.Note = fmt.Sprintf("leader CPU-s/10k (schedstat) per window of %v at %d puts/s: %s", p.pairedPutWindow, p.pairedPutRate, windowsText(a.windows, 3))
			}
			rows = append(rows, row)
		}
	})
	return rows, err
}

// pairedRig is the fanout-paired scenario's cluster: the leader alone on
// CPU 0, 2 learner replicas and pairedE cascaded replicas fed by them.
type pairedRig struct {
	p      params
	c      *harness.Cluster
	leader *harness.Member
	put    *clientv3.Client
	fan    *fanoutRig
	undo   func()
}

func startPairedRig(r *runner, p params) *pairedRig {
	g := &pairedRig{p: p, fan: &fanoutRig{}}
	// An election timeout of 5 s, as the scale rig's: a leader that moves
	// is no longer the one process measured.
	g.c = harness.StartCluster(r, harness.ClusterConfig{N: 3, ExtraArgs: []string{"--election-timeout", "5000"}})
	g.leader = g.c.WaitLeader(r, 30*time.Second)
	var others []int
	for _, m := range g.c.Members {
		if m != g.leader {
			others = append(others, m.Proc.PID())
		}
	}
	how, undo, err := isolateLeader(g.leader.Proc.PID(), others...)
	if err != nil {
		r.Fatalf("%v", err)
	}
	g.undo = undo
	r.Logf("CPUs: %s", how)
	populate(r, g.c.Client(r), p.keys, value256)
	g.put = clients(r, g.leader.ClientURL, 1)[0]
	for i := range 2 {
		g.fan.replicas = append(g.fan.replicas, harness.StartReplica(r, g.c, harness.ReplicaConfig{Name: fmt.Sprintf("r%d", i+1), Extra: p.replicaArgs}))
	}
	for i := range pairedE {
		a, b := g.fan.replicas[i%2].ClientURL, g.fan.replicas[1-i%2].ClientURL
		g.fan.cascaded = append(g.fan.cascaded, harness.StartReplica(r, g.c, harness.ReplicaConfig{Name: fmt.Sprintf("c%d", i+1), Upstream: []string{a, b}, Extra: p.replicaArgs}))
	}
	return g
}

// idleWindow measures the idle leader for a window, the cascaded replicas
// stopped if stop, once every replica is quiet.
func (g *pairedRig) idleWindow(r *runner, a *scaleArm, stop bool, t *idleTraffic) {
	waitQuiet(r, append(g.fan.urls(g.fan.replicas), g.fan.urls(g.fan.cascaded)...), g.p.replicaArgs)
	if stop {
		defer signalAll(r, g.fan.pids(g.fan.cascaded), syscall.SIGSTOP, syscall.SIGCONT)()
	}
	learners := g.fan.urls(g.fan.replicas)
	rounds0, err := leaderRounds(learners)
	if err != nil {
		r.Fatalf("fanout-paired: rounds before: %v", err)
	}
	t0 := mustTraffic(r, g.leader.ClientURL)
	cpu0 := mustSched(r, g.leader.Proc.PID())
	start := time.Now()
	// Two minutes: the Go runtime collects an idle process at least every
	// two minutes, a cost a 30 s window held or not (1.7–3.9 % of a core
	// per window in a run of 12 pairs: 1.05× ± 0.26).
	<-time.After(g.p.pairedWindow)
	secs := time.Since(start).Seconds()
	used := mustSched(r, g.leader.Proc.PID()) - cpu0
	t.add(mustTraffic(r, g.leader.ClientURL).minus(t0), secs)
	rounds1, err := leaderRounds(learners)
	if err != nil {
		r.Fatalf("fanout-paired: rounds after: %v", err)
	}
	a.add(Result{Seconds: secs, CPU: map[string]float64{"leader": used}, LeaderRounds: rounds1 - rounds0}, 100*used/secs)
}

// putWindow puts at p.pairedPutRate for p.pairedPutWindow, the cascaded
// replicas stopped if stop.
func (g *pairedRig) putWindow(r *runner, a *scaleArm, stop bool) {
	if stop {
		defer signalAll(r, g.fan.pids(g.fan.cascaded), syscall.SIGSTOP, syscall.SIGCONT)()
	}
	cpu0 := mustSched(r, g.leader.Proc.PID())
	res := loadAt(context.Background(), g.p.pairedPutRate, 16, g.p.pairedPutWindow, func(ctx context.Context, w int) error {
		_, err := g.put.Put(ctx, "bench/paired/"+strconv.Itoa(w), value256)
		return err
	})
	res.CPU = map[string]float64{"leader": mustSched(r, g.leader.Proc.PID()) - cpu0}
	a.add(res, res.CPUPer10k("leader"))
}

// signalAll sends sig to every pid and returns what sends undo to them.
func signalAll(r *runner, pids []int, sig, undo syscall.Signal) func() {
	for _, pid := range pids {
		if err := syscall.Kill(pid, sig); err != nil {
			r.Fatalf("signal %v to %d: %v", sig, pid, err)
		}
	}
	return func() {
		for _, pid := range pids {
			if err := syscall.Kill(pid, undo); err != nil {
				r.Fatalf("signal %v to %d: %v", undo, pid, err)
			}
		}
	}
}

func mustSched(r *runner, pid int) float64 {
	s, err := schedSeconds(pid)
	if err != nil {
		r.Fatalf("fanout-paired: %v", err)
	}
	return s
}

// schedSeconds is the CPU time pid's threads have run, from each one's
// /proc/<pid>/task/<tid>/schedstat (nanoseconds on a CPU: exact, where
// /proc/<pid>/stat counts 10 ms ticks). A thread that exits in between
// takes its time with it; etcd's threads live as long as the process.
func schedSeconds(pid int) (float64, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		return 0, fmt.Errorf("threads of %d: %v (%d found)", pid, err, len(tasks))
	}
	var ns float64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // the thread exited
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			return 0, fmt.Errorf("%s: empty", t)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %v", t, err)
		}
		ns += v
	}
	return ns / 1e9, nil
}
