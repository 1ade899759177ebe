package main

import (
	"context"
	"fmt"
	"os"
	"time"
)

// Row names of the grpc-proxy scenario's watch windows: watchName is an
// arm's delivery row, and its other figures are rows of the same name with
// a suffix, one metric each (a row holds one metric's windows).
const (
	sfxLeaderCPU = ": leader CPU per put"
	sfxPeer      = ": leader peer bytes per put"
	sfxFrontCPU  = ": front CPU per 10,000 watchers"
	sfxFrontRSS  = ": front RSS per 10,000 watchers"

	metricFrontCPU = "front CPU % per 10k watchers"
	metricFrontRSS = "front RSS MiB per 10k watchers"
)

func watchName(n int, shape watchShape, front string) string {
	return fmt.Sprintf("%s watchers over %s @ %s", thousands(n), shape.name, front)
}

func noWatchersName(n int) string {
	return fmt.Sprintf("no watchers, in the rounds of %s watchers", thousands(n))
}

// thousands writes n with a comma every three digits.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// watchArm is one arm of the watch windows: watchers of a shape on a front,
// or none ("" front).
type watchArm struct {
	front string
	shape watchShape
}

// proxyWindow is what one window of puts measured.
type proxyWindow struct {
	puts Result
	// cpu is CPU-seconds by role: "leader", "self" (this process) and each
	// front's name; busy is the host's CPUs busy, % of all of them.
	cpu  map[string]float64
	busy float64
	sent float64 // bytes the leader sent its peers
	// Of a window with watchers: the front's RSS at its end (MiB), the
	// watchers the leader and all voters held then, the events expected
	// and their delivery, and how long the watchers took to open.
	rss                        float64
	atLeader, atVoters         float64
	lats                       []time.Duration
	expected, unacked, missing int
	opened                     time.Duration
}

// watchers measures n watchers: p.proxyRounds rounds of a window with no
// watchers and one per front and shape, in an order rotated each round.
func (g *proxyRig) watchers(r *runner, n int) []Row {
	arms := watchArms()
	wins := make([][]proxyWindow, len(arms))
	for k := range g.p.proxyRounds {
		for _, i := range rotation(len(arms), k) {
			wins[i] = append(wins[i], g.watchWindow(r, arms[i], n))
		}
	}
	return g.watchRows(n, arms, wins)
}

// watchArms are the arms of the watch windows: none first, then each
// shape through each front.
func watchArms() []watchArm {
	arms := []watchArm{{}}
	for _, s := range proxyShapes {
		for _, f := range proxyFronts {
			arms = append(arms, watchArm{f, s})
		}
	}
	return arms
}

// watchWindow opens arm's n watchers, puts at p.proxyPutRate through the
// leader for p.proxyWindow, and measures.
func (g *proxyRig) watchWindow(r *runner, arm watchArm, n int) proxyWindow {
	var ws *watchSet
	if arm.front != "" {
		ws = openWatchers(r, g.fronts[arm.front].url, arm.shape, n)
		defer ws.close()
	}
	w := g.putWindow(r, nil)
	if ws == nil {
		r.Logf("%-60s leader %.3f CPU-s/10k puts, host %.0f %% busy", noWatchersName(n), w.puts.CPUPer10k("leader"), w.busy)
		return w
	}
	f := g.fronts[arm.front]
	w.rss = rssMiB(f.pid)
	w.atLeader, w.atVoters = g.voterWatchers(r)
	w.expected = w.puts.Ops * arm.shape.perPut(n)
	ws.waitEvents(w.expected, 10*time.Second)
	ws.close()
	w.lats, w.unacked = delivery(ws.streams, g.acks.acked)
	w.missing = w.expected - len(w.lats)
	w.opened = ws.opened
	r.Logf("%-60s opened in %v; p50 %v p99 %v, %d missing; leader %.3f CPU-s/10k puts; front %.0f %% of a core, %.0f MiB; this process %.0f %%, host %.0f %% busy; watchers at the leader %.0f, at the voters %.0f",
		watchName(n, arm.shape, arm.front), w.opened.Round(100*time.Millisecond), percentile(w.lats, 0.5), percentile(w.lats, 0.99), w.missing,
		w.puts.CPUPer10k("leader"), 100*w.cpu[f.name]/w.puts.Seconds, w.rss, 100*w.cpu["self"]/w.puts.Seconds, w.busy, w.atLeader, w.atVoters)
	return w
}

// putWindow puts at p.proxyPutRate through the leader for p.proxyWindow,
// and runs during it, if not nil, what else the window carries; it
// measures the CPU of the leader, every front and this process, the host's
// and the bytes the leader sent its peers.
func (g *proxyRig) putWindow(r *runner, beside func()) proxyWindow {
	pids := map[string]int{"leader": g.leader.Proc.PID(), "self": os.Getpid()}
	for _, f := range g.fronts {
		pids[f.name] = f.pid
	}
	m := startSched(r, pids)
	t0 := mustTraffic(r, g.leader.ClientURL)
	done := make(chan struct{})
	if beside != nil {
		go func() { defer close(done); beside() }()
	} else {
		close(done)
	}
	puts := loadAt(context.Background(), g.p.proxyPutRate, 4, g.p.proxyWindow, func(ctx context.Context, _ int) error {
		return g.acks.put(ctx, g.put)
	})
	<-done
	w := proxyWindow{puts: puts}
	w.cpu, w.busy = m.stop(r)
	w.puts.CPU = map[string]float64{"leader": w.cpu["leader"]}
	w.sent = mustTraffic(r, g.leader.ClientURL).minus(t0).sent
	return w
}

// voterWatchers are the watchers the leader holds and all the voters do
// (etcd_debugging_mvcc_watcher_total): grpc-proxy's watches on them.
func (g *proxyRig) voterWatchers(r *runner) (atLeader, atVoters float64) {
	for _, m := range g.c.Members {
		fams, err := scrape(m.ClientURL)
		if err != nil {
			r.Fatalf("watchers at %s: %v", m.Name, err)
		}
		var v float64
		if f := fams["etcd_debugging_mvcc_watcher_total"]; f != nil && len(f.Metric) > 0 {
			v = f.Metric[0].GetGauge().GetValue()
		}
		atVoters += v
		if m == g.leader {
			atLeader = v
		}
	}
	return atLeader, atVoters
}

// rotation is 0..n-1 rotated left by k: round k's order.
func rotation(n, k int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = (i + k) % n
	}
	return out
}

// watchRows are the watch windows' rows: for each arm with watchers, its
// delivery row and a row for each of its other figures, per window; for
// the arm with none, its leader CPU and peer bytes per put.
func (g *proxyRig) watchRows(n int, arms []watchArm, wins [][]proxyWindow) []Row {
	none := wins[0]
	per10k := float64(n) / 10000
	how := fmt.Sprintf("%d puts/s through the leader for %v a window", g.p.proxyPutRate, g.p.proxyWindow)
	var rows []Row
	perPut := func(name string, ws []proxyWindow) []Row {
		var res []Result
		var cpu, sent []float64
		for _, w := range ws {
			res = append(res, w.puts)
			cpu = append(cpu, w.puts.CPUPer10k("leader"))
			sent = append(sent, w.sent/float64(max(1, w.puts.Ops)))
		}
		all := combineAll(res)
		return []Row{
			{Scenario: grpcProxyID, Name: name + sfxLeaderCPU, Result: all, Windows: cpu, WindowsMetric: "leader CPU/10k",
				Note: fmt.Sprintf("%s; leader CPU-s/10k puts (schedstat) per window: %s", how, windowsText(cpu, 3))},
			{Scenario: grpcProxyID, Name: name + sfxPeer, Result: all, Windows: sent, WindowsMetric: metricPeerPerPut,
				Note: fmt.Sprintf("bytes of raft messages the leader sent its peers per put, per window: %s", windowsText(sent, 0))},
		}
	}
	rows = append(rows, perPut(noWatchersName(n), none)...)
	for i, arm := range arms[1:] {
		ws := wins[i+1]
		name := watchName(n, arm.shape, arm.front)
		var res []Result
		var p99, cpu, rss []float64
		figs := map[string]float64{}
		k := float64(len(ws))
		for j, w := range ws {
			secs := w.puts.Seconds
			front := 100 * w.cpu[arm.front] / secs
			idle := 100 * none[j].cpu[arm.front] / none[j].puts.Seconds
			res = append(res, Result{Ops: len(w.lats), Errors: max(0, w.missing), Seconds: secs,
				P50: percentile(w.lats, 0.5), P99: percentile(w.lats, 0.99),
				CPU: map[string]float64{"leader": w.cpu["leader"], "extra": w.cpu[arm.front]}})
			p99 = append(p99, percentile(w.lats, 0.99).Seconds())
			cpu = append(cpu, (front-idle)/per10k)
			rss = append(rss, (w.rss-g.fresh[arm.front])/per10k)
			figs[figFront] += front / k
			figs[figFrontIdle] += idle / k
			if arm.front == frontCascaded {
				figs[figFeeder] += 100 * w.cpu[frontLearner] / secs / k
			}
			figs[figSelf] += 100 * w.cpu["self"] / secs / k
			figs[figBusy] += w.busy / k
			figs[figRSS] = max(figs[figRSS], w.rss)
			figs[figOpened] += w.opened.Seconds() / k
			figs[figAtLeader] += w.atLeader / k
			figs[figAtVoters] += w.atVoters / k
			figs[figUnacked] += float64(w.unacked)
		}
		all := combineAll(res)
		all.Throughput = float64(all.Ops) / all.Seconds
		rows = append(rows, Row{Scenario: grpcProxyID, Name: name, Result: all, Windows: p99, WindowsMetric: "p99", Figures: figs,
			Note: fmt.Sprintf("%s; ops = events delivered, errors = events missing; p50 and p99 from the put's acknowledgement to the event; p99 per window (ms): %s", how, windowsText(scaled(p99, 1000), 1))})
		rows = append(rows, perPut(name, ws)...)
		rows = append(rows,
			Row{Scenario: grpcProxyID, Name: name + sfxFrontCPU, Result: all, Windows: cpu, WindowsMetric: metricFrontCPU,
				Note: fmt.Sprintf("the front's CPU (%% of a core, schedstat) less its own in the window without watchers of the same round, per 10,000 watchers, per window: %s", windowsText(cpu, 2))},
			Row{Scenario: grpcProxyID, Name: name + sfxFrontRSS, Result: all, Windows: rss, WindowsMetric: metricFrontRSS,
				Note: fmt.Sprintf("the front's VmRSS at the window's end less its own before any watcher (%.0f MiB), per 10,000 watchers, per window: %s", g.fresh[arm.front], windowsText(rss, 1))})
	}
	return rows
}

// scaled is xs times k.
func scaled(xs []float64, k float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = x * k
	}
	return out
}
