package main

import (
	"fmt"
	"strconv"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/test/harness"
)

// fanoutID is the fanout scenario's Row.Scenario.
const fanoutID = "fanout"

// fanoutEs are the numbers of cascaded replicas measured.
var fanoutEs = []int{0, 4, 8, 16}

// Kinds of the fanout scenario's rows; a row is named fanoutName(e, kind).
const (
	fanoutIdleU   = "leader idle, 3 primaries + 2 replicas + E cascaded replicas"
	fanoutIdleS   = "leader idle, 3 etcd voters + 2+E stock learners"
	fanoutPutsU   = "puts at the leader, 3 primaries + 2 replicas + E cascaded replicas"
	fanoutPutsS   = "puts at the leader, 3 etcd voters + 2+E stock learners"
	fanoutReads   = "strong reads over the E cascaded replicas"
	fanoutPartner = "linearizable reads over 2 stock etcd followers, beside the cascaded replicas'"
	fanoutRSS     = "RSS, cascaded replicas"
	// fanoutIdleStopped is fanoutIdleU with the cascaded replicas stopped
	// (SIGSTOP), in windows alternating with it: what they themselves cost
	// the idle leader, apart from what the rig's history and the host's
	// load do to it between the steps.
	fanoutIdleStopped = "leader idle, 3 primaries + 2 replicas + E cascaded replicas stopped (SIGSTOP)"
)

func fanoutName(e int, kind string) string { return fmt.Sprintf("E=%d: %s", e, kind) }

// fanoutRig is the fanout scenario's clusters: u, 3 primaries, 2 learner
// replicas and the cascaded replicas fed by them (half by each, the other
// as their second upstream); s, 3 stock etcd voters and 2 + E stock
// learners; f, 3 stock etcd voters whose 2 followers serve the partner
// reads. The three leaders share CPU 0, everything else the other CPUs.
type fanoutRig struct {
	scale    *scaleRig // its clusters, leaders, put clients and followers
	replicas []*harness.Replica
	cascaded []*harness.Replica
	cclients []*clientv3.Client
}

// fanoutScenario measures what cascaded replicas cost the leader (issue
// 38): at E = 0, 4, 8, 16 cascaded replicas beside 2 learner replicas,
// next to a cluster with 2 + E stock learners, the leader idle (and idle
// with the cascaded replicas stopped, windows alternating) and per put
// at a fixed rate; strong reads at a fixed rate over the cascaded replicas
// next to the same rate over 2 stock followers; the cascaded replicas'
// RSS. Arms alternate window by window, as in the scale scenario.
func fanoutScenario(p params) ([]Row, error) {
	var rows []Row
	err := scenario("fanout", func(r *runner) {
		// 2 + 16 stock learners: more than the harness's --max-learners.
		g := &fanoutRig{scale: startScaleRigWith(r, p, 32)}
		defer g.scale.pin(r)()
		g.grow(r, 0)
		// A fresh leader's first put window cost about twice the later
		// ones on both rigs (a quick run: 11.9 and 11.7 CPU-s per 10k at
		// E = 0, 5.4 and 10.4 at E = 4): one window each, not recorded.
		warm := newScaleArm(0, "warm-up", "leader CPU/10k")
		g.scale.writeWindow(warm, g.scale.uPut, g.scale.uLeader)
		g.scale.writeWindow(warm, g.scale.sPut, g.scale.sLeader)
		for _, e := range fanoutEs {
			g.grow(r, e)
			rows = append(rows, g.step(r, e)...)
		}
		rows = append(rows, g.watchTiers(r)...)
		rows = append(rows, g.bootstraps(r, p.fanoutBytes)...)
	})
	return rows, err
}

// grow starts the 2 learner replicas (once) and cascaded replicas until
// there are e, and stock learners until s has 2 + e.
func (g *fanoutRig) grow(r *runner, e int) {
	s := g.scale
	for i := len(g.replicas); i < 2; i++ {
		g.replicas = append(g.replicas, harness.StartReplica(r, s.u, harness.ReplicaConfig{Name: fmt.Sprintf("r%d", i+1), Extra: s.p.replicaArgs}))
	}
	for i := len(g.cascaded); i < e; i++ {
		a, b := g.replicas[i%2].ClientURL, g.replicas[1-i%2].ClientURL
		c := harness.StartReplica(r, s.u, harness.ReplicaConfig{Name: fmt.Sprintf("c%d", i+1), Upstream: []string{a, b}, Extra: s.p.replicaArgs})
		g.cascaded = append(g.cascaded, c)
		g.cclients = append(g.cclients, clients(r, c.ClientURL, 1)...)
	}
	for i := len(s.learners); i < 2+e; i++ {
		_, proc, _ := harness.StartStockLearner(r, s.s, fmt.Sprintf("l%d", i+1), false)
		s.learners = append(s.learners, proc)
	}
	<-time.After(s.p.dur / 2) // let the joins' traffic settle, as idle.go does
}

// step measures every arm at e cascaded replicas.
func (g *fanoutRig) step(r *runner, e int) []Row {
	s := g.scale
	idleU, idleS := newScaleArm(e, fanoutIdleU, metricLeaderPct), newScaleArm(e, fanoutIdleS, metricLeaderPct)
	putU, putS := newScaleArm(e, fanoutPutsU, "leader CPU/10k"), newScaleArm(e, fanoutPutsS, "leader CPU/10k")
	arms := []*scaleArm{idleU, idleS, putU, putS}
	quiet := append(g.urls(g.replicas), g.urls(g.cascaded)...)
	windows := []func(){
		func() { s.idleWindow(r, idleU, idleS, quiet) },
		func() { s.writeWindow(putU, s.uPut, s.uLeader, g.pids(g.replicas)...) },
		func() { s.writeWindow(putS, s.sPut, s.sLeader) },
	}
	if e > 0 {
		stopped := newScaleArm(e, fanoutIdleStopped, metricLeaderPct)
		windows = append(windows, func() { g.idleStoppedWindow(r, stopped, quiet, e) })
		arms = append(arms, stopped)
	}
	s.alternate(windows)
	if e > 0 {
		reads, partner := newScaleArm(e, fanoutReads, "leader CPU/10k"), newScaleArm(e, fanoutPartner, "leader CPU/10k")
		s.alternate([]func(){
			// The leader pays for the learner replicas' rounds, which the
			// cascaded replicas' rounds become.
			func() { s.readWindow(r, reads, g.cclients[:e], s.uLeader, g.urls(g.replicas)) },
			func() { s.readWindow(r, partner, s.followers, s.fLeader, nil) },
		})
		rss := newScaleArm(e, fanoutRSS, metricRSS)
		for _, c := range g.cascaded[:e] {
			rss.windows = append(rss.windows, rssMiB(c.PID()))
		}
		arms = append(arms, reads, partner, rss)
	}
	var rows []Row
	for _, a := range arms {
		row := a.row(s.p)
		row.Scenario, row.Name = fanoutID, fanoutName(e, a.kind)
		rows = append(rows, row)
	}
	return rows
}

// idleStoppedWindow is an idle window of the understudy rig with its e
// cascaded replicas stopped (SIGSTOP) once every replica is quiet, and
// continued (SIGCONT) after it.
func (g *fanoutRig) idleStoppedWindow(r *runner, a *scaleArm, quiet []string, e int) {
	waitQuiet(r, quiet, g.scale.p.replicaArgs)
	defer signalAll(r, g.pids(g.cascaded[:e]), syscall.SIGSTOP, syscall.SIGCONT)()
	// The stock rig's arm of this window is not recorded.
	g.scale.idleWindow(r, a, newScaleArm(e, "unrecorded", metricLeaderPct), g.urls(g.replicas))
}

func (g *fanoutRig) pids(rs []*harness.Replica) []int {
	var out []int
	for _, r := range rs {
		out = append(out, r.PID())
	}
	return out
}

func (g *fanoutRig) urls(rs []*harness.Replica) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.ClientURL)
	}
	return out
}

// fanoutComparisons are the report's ratios of the fanout rows.
func fanoutComparisons() []comparison {
	last := fanoutEs[len(fanoutEs)-1]
	e := strconv.Itoa(last)
	return []comparison{
		{"leader CPU per put with " + e + " cascaded replicas vs none (2 learner replicas in both)", fanoutName(last, fanoutPutsU), fanoutName(0, fanoutPutsU), "leader CPU/10k", "≤ 1.1", ""},
		{"leader CPU per put with 2+" + e + " stock learners vs 2", fanoutName(last, fanoutPutsS), fanoutName(0, fanoutPutsS), "leader CPU/10k", "", ""},
		{"leader CPU idle with " + e + " cascaded replicas vs none", fanoutName(last, fanoutIdleU), fanoutName(0, fanoutIdleU), metricLeaderPct, "≤ 1.1", ""},
		{"leader CPU idle with " + e + " cascaded replicas running vs the same " + e + " stopped (SIGSTOP), in alternating windows", fanoutName(last, fanoutIdleU), fanoutName(last, fanoutIdleStopped), metricLeaderPct, "", ""},
		{"leader CPU idle with 2+" + e + " stock learners vs 2", fanoutName(last, fanoutIdleS), fanoutName(0, fanoutIdleS), metricLeaderPct, "", ""},
		{"leader CPU per strong read over " + e + " cascaded replicas vs the same rate over 2 stock followers", fanoutName(last, fanoutReads), fanoutName(last, fanoutPartner), "leader CPU/10k", "≤ 1.0", ""},
		{"watch delivery p99, a cascaded replica vs the learner replica feeding it", tierCascaded, tierReplica, "p99", "", ""},
		{"time until serving, a cascaded replica bootstrapping from a learner replica vs a learner replica joining", bootCascaded, bootLearner, "p99", "", ""},
		{"leader CPU while a cascaded replica bootstraps from a learner replica vs while a learner replica joins", bootCascaded, bootLearner, "leader CPU", "", ""},
	}
}
