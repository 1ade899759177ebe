package main

import (
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
	pairedIdleRunning = "leader idle, the cascaded replicas running (a decoy cluster's 16 stopped)"
	pairedIdleStopped = "leader idle, the same cascaded replicas stopped (SIGSTOP; a decoy cluster's 16 running)"
	pairedPutsRunning = "puts at the leader, the cascaded replicas running (a decoy cluster's 16 stopped)"
	pairedPutsStopped = "puts at the leader, the same cascaded replicas stopped (SIGSTOP; a decoy cluster's 16 running)"
)

// Metrics of the fanout-paired scenario's work counters: the bytes of raft
// messages the leader sends its peers, a second idle and per put.
const (
	metricPeerBps    = "leader peer B/s"
	metricPeerPerPut = "leader peer B/put"
	pairedSentSuffix = ": bytes sent to peers"
)

// pairedLeaderWait bounds the wait for each rig's first leader.
const pairedLeaderWait = 30 * time.Second

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
// (SIGSTOP), in the order AB AB then BA BA, and a decoy cluster's 16 readers stopped and
// running in their place (pairedDecoy), so that what runs beside the
// leader is alike in both arms. Stopped, the leader's cluster is E = 0's:
// the cascaded replicas are no raft members and never talk to the leader;
// what differs between the arms is what the 16 cost it. CPU comes from the
// leader's threads' schedstat (nanoseconds, not ticks); the bytes it sends
// its peers are counted beside it, idle and per put.
func fanoutPairedScenario(p params) ([]Row, error) {
	var rows []Row
	err := scenario(fanoutPairedID, func(r *runner) {
		g := startPairedRig(r, p)
		defer g.undo()
		arms := map[string]*scaleArm{}
		for _, k := range []string{pairedIdleRunning, pairedIdleStopped} {
			arms[k] = newScaleArm(pairedE, k, metricLeaderPct)
			arms[k+pairedSentSuffix] = newScaleArm(pairedE, k+pairedSentSuffix, metricPeerBps)
		}
		for _, k := range []string{pairedPutsRunning, pairedPutsStopped} {
			arms[k] = newScaleArm(pairedE, k, "leader CPU/10k")
			arms[k+pairedSentSuffix] = newScaleArm(pairedE, k+pairedSentSuffix, metricPeerPerPut)
		}
		var traffic [2]idleTraffic
		idle := [2]func(){
			func() { g.idleWindow(r, arms, pairedIdleRunning, false, &traffic[0]) },
			func() { g.idleWindow(r, arms, pairedIdleStopped, true, &traffic[1]) },
		}
		puts := [2]func(){
			func() { g.putWindow(r, arms, pairedPutsRunning, false) },
			func() { g.putWindow(r, arms, pairedPutsStopped, true) },
		}
		// Rounds of AB AB, then BA BA: each arm's windows sit at the same
		// mean position (a linear drift cancels), and each idle arm
		// follows a put window as often as the other. (A round of ABBA
		// reversed, as before, put the stopped idle window after a put
		// window in every other round and the running one never: the
		// leader's after-put work, its next collection among it, fell in
		// one arm only.)
		for k := range p.pairedRounds {
			a, b := k%2, 1-k%2
			idle[a]()
			idle[b]()
			puts[a]()
			puts[b]()
		}
		if l := g.c.Leader(r); l != g.leader {
			r.Fatalf("the leader moved from %s to %s: its CPU is no longer one process's", g.leader.Name, l.Name)
		}
		rows = g.rows(p, arms, traffic)
	})
	return rows, err
}

// rows are the fanout-paired scenario's rows, from its arms.
func (g *pairedRig) rows(p params, arms map[string]*scaleArm, traffic [2]idleTraffic) []Row {
	var rows []Row
	for _, k := range []string{pairedIdleRunning, pairedIdleStopped, pairedPutsRunning, pairedPutsStopped} {
		for _, name := range []string{k, k + pairedSentSuffix} {
			a := arms[name]
			row := a.row(p)
			row.Scenario, row.Name = fanoutPairedID, fanoutName(pairedE, name)
			switch a.metric {
			case metricLeaderPct:
				t := traffic[0]
				if k == pairedIdleStopped {
					t = traffic[1]
				}
				row.Note = fmt.Sprintf("leader CPU, %% of a core (schedstat), per window of %v: %s (its collections: %s); the leader's traffic per second: %s", p.pairedWindow, windowsText(a.windows, 3), windowsText(g.gcs[k], 0), t.text())
			case metricPeerBps:
				row.Note = fmt.Sprintf("bytes of raft messages the leader sent its peers, per second, per window of %v: %s", p.pairedWindow, windowsText(a.windows, 0))
			case metricPeerPerPut:
				row.Note = fmt.Sprintf("bytes of raft messages the leader sent its peers, per put, per window of %v at %d puts/s: %s", p.pairedPutWindow, p.pairedPutRate, windowsText(a.windows, 1))
			default:
				row.Note = fmt.Sprintf("leader CPU-s/10k (schedstat) per window of %v at %d puts/s (the decoy at the same rate): %s", p.pairedPutWindow, p.pairedPutRate, windowsText(a.windows, 3))
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// pairedRig is the fanout-paired scenario's cluster: the leader alone on
// CPU 0, 2 learner replicas and pairedE cascaded replicas fed by them; and
// the decoy beside it.
type pairedRig struct {
	p      params
	c      *harness.Cluster
	leader *harness.Member
	put    *clientv3.Client
	fan    *fanoutRig
	decoy  *pairedDecoy
	undo   func()
	// gcs are the leader's collections in each idle window, by arm kind.
	gcs map[string][]float64
}

func startPairedRig(r *runner, p params) *pairedRig { return startPairedRigWith(r, p, flatLayout) }

// readerLayout starts a rig's readers on c, their names prefixed with
// prefix: its learner replicas and the cascaded replicas they feed.
type readerLayout func(r *runner, c *harness.Cluster, p params, prefix string) *fanoutRig

// flatLayout is the fanout-paired scenario's readers: 2 learner replicas
// and pairedE cascaded replicas fed by them, half by each, the other as
// their second upstream.
func flatLayout(r *runner, c *harness.Cluster, p params, prefix string) *fanoutRig {
	f := &fanoutRig{}
	for i := range 2 {
		f.replicas = append(f.replicas, harness.StartReplica(r, c, harness.ReplicaConfig{Name: fmt.Sprintf("%sr%d", prefix, i+1), Extra: p.replicaArgs}))
	}
	for i := range pairedE {
		a, b := f.replicas[i%2].ClientURL, f.replicas[1-i%2].ClientURL
		f.cascaded = append(f.cascaded, harness.StartReplica(r, c, harness.ReplicaConfig{Name: fmt.Sprintf("%sc%d", prefix, i+1), Upstream: []string{a, b}, Extra: p.replicaArgs}))
	}
	return f
}

// startPairedRigWith starts the measured cluster with its readers laid out
// by layout, and the decoy beside it with the same readers.
func startPairedRigWith(r *runner, p params, layout readerLayout) *pairedRig {
	g := &pairedRig{p: p, gcs: map[string][]float64{}}
	// An election timeout of 5 s, as the scale rig's: a leader that moves
	// is no longer the one process measured.
	g.c = harness.StartCluster(r, harness.ClusterConfig{N: 3, ExtraArgs: []string{"--election-timeout", "5000"}})
	g.leader = g.c.WaitLeader(r, pairedLeaderWait)
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
	g.fan = layout(r, g.c, p, "")
	// Started after the pinning, as every process but the leader: the
	// decoy shares the followers' CPUs.
	g.decoy = startPairedDecoy(r, p, layout)
	return g
}

// idleWindow measures the idle leader for a window, once every replica is
// quiet, with its cascaded replicas stopped if stop (the decoy's running),
// else the decoy's stopped: the arm kind's CPU and bytes sent.
func (g *pairedRig) idleWindow(r *runner, arms map[string]*scaleArm, kind string, stop bool, t *idleTraffic) {
	waitQuiet(r, g.replicaURLs(), g.p.replicaArgs)
	defer g.swap(r, stop)()
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
	d := mustTraffic(r, g.leader.ClientURL).minus(t0)
	t.add(d, secs)
	g.gcs[kind] = append(g.gcs[kind], d.gcs)
	rounds1, err := leaderRounds(learners)
	if err != nil {
		r.Fatalf("fanout-paired: rounds after: %v", err)
	}
	res := Result{Seconds: secs, CPU: map[string]float64{"leader": used}, LeaderRounds: rounds1 - rounds0}
	arms[kind].add(res, 100*used/secs)
	arms[kind+pairedSentSuffix].add(res, d.sent/secs)
}

// putWindow puts at p.pairedPutRate for p.pairedPutWindow on both rigs,
// with the measured rig's cascaded replicas stopped if stop (the decoy's
// running), else the decoy's stopped: the arm kind's CPU and bytes sent
// per put.
func (g *pairedRig) putWindow(r *runner, arms map[string]*scaleArm, kind string, stop bool) {
	defer g.swap(r, stop)()
	t0 := mustTraffic(r, g.leader.ClientURL)
	cpu0 := mustSched(r, g.leader.Proc.PID())
	res := g.putBoth()
	res.CPU = map[string]float64{"leader": mustSched(r, g.leader.Proc.PID()) - cpu0}
	d := mustTraffic(r, g.leader.ClientURL).minus(t0)
	arms[kind].add(res, res.CPUPer10k("leader"))
	perPut := 0.0
	if res.Ops > 0 {
		perPut = d.sent / float64(res.Ops)
	}
	arms[kind+pairedSentSuffix].add(res, perPut)
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
