package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/test/harness"
)

// scaleID is the scale scenario's Row.Scenario.
const scaleID = "scale"

// scaleNs are the fleet sizes measured (replicas, and stock learners
// beside them); 0, the clusters before any joins, is the base.
var scaleNs = []int{0, 1, 2, 4, 8}

// Kinds of the scale scenario's rows; a row is named scaleName(n, kind).
const (
	scaleIdleReplicas   = "leader idle, 3 primaries + replicas"
	scaleIdleLearners   = "leader idle, 3 etcd voters + stock learners"
	scaleWritesReplicas = "puts at the leader, 3 primaries + replicas"
	scaleWritesLearners = "puts at the leader, 3 etcd voters + stock learners"
	scaleReadsOwn       = "strong reads over the replicas, each on its own rounds"
	scaleReadsHub       = "strong reads over the replicas, one hub (--read-index-via the first)"
	scaleReadsHub4      = "strong reads over the replicas, one hub per 4 replicas"
	scalePartner        = "linearizable reads over 2 stock etcd followers, beside: "
	scaleRSSReplicas    = "RSS, replicas"
	scaleRSSLearners    = "RSS, stock learners"
)

// Window metrics of the scale rows other than "leader CPU/10k".
const (
	metricLeaderPct = "leader CPU %"
	metricRSS       = "RSS MiB"
)

func scaleName(n int, kind string) string { return fmt.Sprintf("N=%d: %s", n, kind) }

// scaleRig is the scale scenario's three clusters, started side by side:
// u, 3 primaries and the replicas; s, 3 stock etcd voters and as many stock
// learners; f, 3 stock etcd voters and nothing else, whose 2 followers
// serve the partner rows' linearizable reads. Their leaders share CPU 0;
// every other process is on the other CPUs.
type scaleRig struct {
	p                  params
	u, s, f            *harness.Cluster
	uLeader, sLeader   *harness.Member
	fLeader            *harness.Member
	uPut, sPut         *clientv3.Client
	followers          []*clientv3.Client
	replicas           []*scaleReplica
	learners           []*harness.Proc
	writeRate, readRte int
}

// scaleReplica is one replica of u, its arguments without a hub, the hub
// it obtains read indexes through now ("" for its own rounds) and its
// clients.
type scaleReplica struct {
	*harness.Replica
	base    []string
	via     string
	clients []*clientv3.Client
}

// scaleScenario measures what N replicas cost the leader next to N stock
// etcd learners (issue 24), at N = 1, 2, 4, 8: the leader idle; per put at
// a fixed put rate; per strong read at a fixed total read rate spread over
// the N replicas, each on its own rounds, with one hub and with one hub per
// 4; the ReadIndex rounds the replicas asked for; the replicas' and the
// learners' RSS. The partner of each read arm is the same read rate over
// the 2 followers of a stock etcd cluster. Arms alternate window by
// window (forward, then backward), so a drift in the machine's load falls
// on every arm alike; the idle windows measure both leaders at once.
func scaleScenario(p params, plotDir string) ([]Row, error) {
	var rows []Row
	err := scenario("scale", func(r *runner) {
		g := startScaleRig(r, p)
		defer g.pin(r)()
		for _, n := range scaleNs {
			g.grow(r, n)
			rows = append(rows, g.step(r, n)...)
		}
	})
	if err != nil {
		return rows, err
	}
	if err := scalePlot(plotDir, rows); err != nil {
		return rows, err
	}
	return rows, nil
}

func startScaleRig(r *runner, p params) *scaleRig { return startScaleRigWith(r, p, 16) }

// startScaleRigWith is startScaleRig with room for maxLearners learners in
// the clusters with learners.
func startScaleRigWith(r *runner, p params, maxLearners int) *scaleRig {
	etcd := []harness.Kind{harness.KindEtcd, harness.KindEtcd, harness.KindEtcd}
	g := &scaleRig{p: p, writeRate: p.scaleWriteRate, readRte: p.scaleReadRate}
	// Snapshots every 2,000 entries, with 1,000 kept for slow members:
	// what a joiner replays stays short (see grow). An election timeout of
	// 5 s (etcd's heartbeat, 100 ms, kept: it is what each member costs
	// the leader idle): on a host this loaded, a follower starved of CPU
	// for a second moved the leader in a run, and a leader that moves is
	// no longer the one process measured.
	args := []string{"--snapshot-count", "2000", "--snapshot-catchup-entries", "1000", "--election-timeout", "5000"}
	room := []string{"--max-learners", strconv.Itoa(maxLearners)}
	g.u = harness.StartCluster(r, harness.ClusterConfig{N: 3, ExtraArgs: append(room, args...)})
	g.s = harness.StartCluster(r, harness.ClusterConfig{N: 3, Kinds: etcd, ExtraArgs: append(room, args...)})
	g.f = harness.StartCluster(r, harness.ClusterConfig{N: 3, Kinds: etcd, ExtraArgs: args[4:]})
	g.uLeader, g.sLeader, g.fLeader = g.u.WaitLeader(r, 30*time.Second), g.s.WaitLeader(r, 30*time.Second), g.f.WaitLeader(r, 30*time.Second)
	populate(r, g.u.Client(r), p.keys, value256)
	populate(r, g.f.Client(r), p.keys, value256)
	g.uPut = clients(r, g.uLeader.ClientURL, 1)[0]
	g.sPut = clients(r, g.sLeader.ClientURL, 1)[0]
	for _, m := range g.f.Members {
		if m != g.fLeader {
			g.followers = append(g.followers, clients(r, m.ClientURL, max(1, p.conns/2))...)
		}
	}
	return g
}

// pin puts the three leaders on CPU 0 and every other process, this one
// and what it starts from now on included, on the others; it returns the
// undo.
func (g *scaleRig) pin(r *runner) func() {
	var others []int
	for _, c := range []*harness.Cluster{g.u, g.s, g.f} {
		for _, m := range c.Members {
			if m != g.uLeader && m != g.sLeader && m != g.fLeader {
				others = append(others, m.Proc.PID())
			}
		}
	}
	how, undo, err := isolateLeader(g.uLeader.Proc.PID(), others...)
	if err != nil {
		r.Fatalf("%v", err)
	}
	for _, m := range []*harness.Member{g.sLeader, g.fLeader} {
		if err := pinCPU(m.Proc.PID(), 0); err != nil {
			r.Fatalf("%v", err)
		}
	}
	r.Logf("CPUs: %s (the three clusters' leaders share CPU 0)", how)
	return undo
}

// grow joins replicas to u and stock learners to s until each has n, and
// puts every replica back on its own rounds.
func (g *scaleRig) grow(r *runner, n int) {
	for _, rep := range g.replicas {
		g.setVia(r, rep, "")
	}
	// A member that joins by a snapshot more than 5,000 entries past its
	// applied index stays in etcd's publish loop ("etcdserver: too many
	// requests") until it applies an entry after the snapshot (etcd
	// v3.7.3's applySnapshot does not move the applied index that
	// publish checks), so never on an idle cluster: a put every 50 ms
	// into each cluster while members join.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, _ = g.uPut.Put(ctx, "bench/scale/join", "x")
				_, _ = g.sPut.Put(ctx, "bench/scale/join", "x")
				cancel()
			}
		}
	}()
	defer func() { close(stop); <-done }()
	for i := len(g.replicas); i < n; i++ {
		name := fmt.Sprintf("r%d", i+1)
		rep := harness.StartReplica(r, g.u, harness.ReplicaConfig{Name: name, Extra: g.p.replicaArgs})
		g.replicas = append(g.replicas, &scaleReplica{Replica: rep, base: rep.Args(), clients: clients(r, rep.ClientURL, 2)})
	}
	for i := len(g.learners); i < n; i++ {
		_, proc, _ := harness.StartStockLearner(r, g.s, fmt.Sprintf("l%d", i+1), false)
		g.learners = append(g.learners, proc)
	}
	// Let joins and catch-up traffic settle, as idle.go does.
	<-time.After(g.p.dur / 2)
}

// setVia restarts rep with --read-index-via hub ("" for its own rounds)
// if it is not so already, and waits until it serves again.
func (g *scaleRig) setVia(r *runner, rep *scaleReplica, hub string) {
	if rep.via == hub {
		return
	}
	args := slices.Clone(rep.base)
	if hub != "" {
		args = append(args, "--read-index-via", hub)
	}
	serving := strings.Count(rep.Log(), `"msg":"replica serving"`)
	rep.RestartWithArgs(r, args)
	harness.WaitFor(r, 2*time.Minute, rep.Name+" serving again", func() (bool, error) {
		return strings.Count(rep.Log(), `"msg":"replica serving"`) > serving, nil
	})
	rep.via = hub
}

// hubs sets the first n replicas' hubs for mode: own rounds, the first
// replica for all, or the first of each 4; it waits until every replica
// answers a strong read.
func (g *scaleRig) hubs(r *runner, n int, mode string) {
	for i, rep := range g.replicas[:n] {
		hub := ""
		switch mode {
		case scaleReadsHub:
			hub = g.replicas[0].ClientURL
		case scaleReadsHub4:
			hub = g.replicas[i/4*4].ClientURL
		}
		if hub == rep.ClientURL {
			hub = ""
		}
		g.setVia(r, rep, hub)
	}
	for _, rep := range g.replicas[:n] {
		for _, cli := range rep.clients {
			harness.WaitFor(r, time.Minute, rep.Name+" answers a strong read", func() (bool, error) {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				_, err := cli.Get(ctx, "bench/key/0")
				return err == nil, err
			})
		}
	}
}

// step measures every arm at n members: idle and puts beside the stock
// learners', then strong reads in each read mode beside the stock
// followers'.
func (g *scaleRig) step(r *runner, n int) []Row {
	idleU, idleS := newScaleArm(n, scaleIdleReplicas, metricLeaderPct), newScaleArm(n, scaleIdleLearners, metricLeaderPct)
	wU, wS := newScaleArm(n, scaleWritesReplicas, "leader CPU/10k"), newScaleArm(n, scaleWritesLearners, "leader CPU/10k")
	arms := []*scaleArm{idleU, idleS, wU, wS}
	first := []func(){
		func() { g.idleWindow(r, idleU, idleS, g.replicaURLs(n)) },
		func() { g.writeWindow(wU, g.uPut, g.uLeader) },
		func() { g.writeWindow(wS, g.sPut, g.sLeader) },
	}
	modes := []string{scaleReadsOwn}
	if n >= 2 {
		modes = append(modes, scaleReadsHub)
	}
	if n > 4 {
		modes = append(modes, scaleReadsHub4)
	}
	// Idle and puts first, by themselves: no client asks the replicas
	// anything over them, so that they go quiet (--freshness-quiet-interval)
	// as idle replicas do; the idle window waits for it.
	g.alternate(first)
	for i, mode := range modes {
		if n == 0 {
			break
		}
		g.hubs(r, n, mode)
		reads, partner := newScaleArm(n, mode, "leader CPU/10k"), newScaleArm(n, scalePartner+mode, "leader CPU/10k")
		arms = append(arms, reads, partner)
		fs := []func(){
			func() { g.readWindow(r, reads, g.replicaClients(n), g.uLeader, g.replicaURLs(n)) },
			func() { g.readWindow(r, partner, g.followers, g.fLeader, nil) },
		}
		g.alternate(fs)
		if i == 0 {
			arms = append(arms, g.rss(n)...)
		}
	}
	for _, c := range []struct {
		c *harness.Cluster
		m *harness.Member
	}{{g.u, g.uLeader}, {g.s, g.sLeader}, {g.f, g.fLeader}} {
		if l := c.c.Leader(r); l != c.m {
			r.Fatalf("a leader moved from %s to %s: its CPU is no longer one process's", c.m.Name, l.Name)
		}
	}
	var rows []Row
	for _, a := range arms {
		rows = append(rows, a.row(g.p))
	}
	return rows
}

// alternate runs each window function p.scaleRounds times, in turn,
// forward in even rounds and backward in odd ones.
func (g *scaleRig) alternate(fs []func()) {
	for k := range g.p.scaleRounds {
		for i := range fs {
			if k%2 == 1 {
				i = len(fs) - 1 - i
			}
			fs[i]()
		}
	}
}

func (g *scaleRig) replicaClients(n int) []*clientv3.Client {
	var cs []*clientv3.Client
	for _, rep := range g.replicas[:n] {
		cs = append(cs, rep.clients...)
	}
	return cs
}

func (g *scaleRig) replicaURLs(n int) []string {
	var urls []string
	for _, rep := range g.replicas[:n] {
		urls = append(urls, rep.ClientURL)
	}
	return urls
}

// rss is the replicas' and the learners' resident memory (MiB), one
// window per process.
func (g *scaleRig) rss(n int) []*scaleArm {
	reps, lrns := newScaleArm(n, scaleRSSReplicas, metricRSS), newScaleArm(n, scaleRSSLearners, metricRSS)
	for _, rep := range g.replicas[:n] {
		reps.windows = append(reps.windows, rssMiB(rep.PID()))
	}
	for _, l := range g.learners[:n] {
		lrns.windows = append(lrns.windows, rssMiB(l.PID()))
	}
	return []*scaleArm{reps, lrns}
}

// rssMiB is process pid's resident set (VmRSS) in MiB, 0 if unreadable.
func rssMiB(pid int) float64 { return procMiB(pid, "status", "VmRSS") }

// procMiB is field (in kB) of /proc/<pid>/<file>, in MiB; 0 if unreadable.
// Fields of status (VmRSS, RssAnon, RssFile) and smaps_rollup (Pss: each
// resident page divided by the processes that map it) are in this form.
func procMiB(pid int, file, field string) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, field+":"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				kb, _ := strconv.ParseFloat(f[0], 64)
				return kb / 1024
			}
		}
	}
	return 0
}
