package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"

	"github.com/understudy-kv/understudy/wire"
)

// readMode is one way the grpc-proxy scenario asks for a read.
type readMode struct {
	name         string
	serializable bool
	// bound is the read's wire.MaxStalenessKey, "" for none: a replica's
	// bounded read (grpc-proxy forwards no metadata but a token: for it a
	// serializable read).
	bound string
}

// proxyBound is the bounded reads' budget.
const proxyBound = "100ms"

var proxyReadModes = []readMode{{"serializable", true, ""}, {"linearizable", false, ""}, {"bounded (" + proxyBound + ")", true, proxyBound}}

// Names and the metric of the read windows' rows.
const (
	readsBaseName       = "puts alone, beside the reads' windows"
	metricLeaderPerRead = "leader CPU/10k reads, less puts alone"
)

func readName(m readMode, front string) string { return fmt.Sprintf("%s reads @ %s", m.name, front) }

// Figures of a read row (Row.Figures).
const (
	figAnswers    = "answers"
	figBehind     = "answers behind the last acknowledged put"
	figMaxBehind  = "most revisions behind"
	figStaleP99   = "staleness p99 ms"
	figStaleMax   = "staleness max ms"
	figBusy       = "host busy %"
	figSelf       = "this process CPU %"
	figFront      = "front CPU %"
	figFeeder     = "feeder CPU %"
	figFrontIdle  = "front CPU % without watchers"
	figRSS        = "front RSS MiB"
	figOpened     = "seconds to open the watchers"
	figAtLeader   = "watchers at the leader"
	figAtVoters   = "watchers at the voters"
	figUnacked    = "events of puts not acknowledged"
	figPeerPerPut = "leader peer bytes per put"
)

// revisionTally judges answers by their header revision against the last
// put acknowledged when each read was sent: an answer below it misses a
// write its client could know of. Its staleness is how long before the
// read was sent the first put it misses was acknowledged.
type revisionTally struct {
	mu        sync.Mutex
	answers   int
	behind    int
	maxBehind int64
	stale     []time.Duration
}

// add judges one answer at revision got to a read sent at sent, when the
// last acknowledged put's revision was need; acked tells when a revision
// was acknowledged.
func (t *revisionTally) add(need, got int64, sent time.Time, acked func(int64) (int64, bool)) {
	var stale time.Duration
	if got < need {
		if at, ok := acked(got + 1); ok {
			stale = time.Duration(max(0, sent.UnixNano()-at))
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.answers++
	t.stale = append(t.stale, stale)
	if got < need {
		t.behind++
		t.maxBehind = max(t.maxBehind, need-got)
	}
}

// figures are the tally's for a row.
func (t *revisionTally) figures() map[string]float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := slices.Sorted(slices.Values(t.stale))
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return map[string]float64{figAnswers: float64(t.answers), figBehind: float64(t.behind), figMaxBehind: float64(t.maxBehind),
		figStaleP99: ms(percentile(s, 0.99)), figStaleMax: ms(percentile(s, 1))}
}

// readArm is one arm of the read windows: a mode through a front, or the
// puts alone ("" front).
type readArm struct {
	front string
	mode  readMode
}

// readWindow is what one read window measured.
type readWindow struct {
	proxyWindow
	reads Result
	tally *revisionTally
	// phases are the proof's phases and the feeder's rounds across a
	// linearizable window through a replica (grpcproxy_phases.go).
	phases phaseReading
}

// reads measures p.proxyReadRounds rounds of a window of puts alone and
// one per front and read mode, each at p.proxyReadRate reads/s beside
// p.proxyPutRate puts/s through the leader, in an order rotated each
// round.
func (g *proxyRig) reads(r *runner) []Row {
	arms := readArms()
	readers := map[string][]*clientv3.Client{}
	for _, f := range g.fronts {
		readers[f.name] = clients(r, f.url, 4)
	}
	wins := make([][]readWindow, len(arms))
	for k := range g.p.proxyReadRounds {
		for _, i := range rotation(len(arms), k) {
			wins[i] = append(wins[i], g.readWindow(r, arms[i], readers[arms[i].front]))
		}
	}
	return g.readRows(arms, wins)
}

// readArms are the arms of the read windows: the puts alone first, then
// each mode through each front.
func readArms() []readArm {
	arms := []readArm{{}}
	for _, m := range proxyReadModes {
		for _, f := range proxyReadFronts {
			arms = append(arms, readArm{f, m})
		}
	}
	return arms
}

func (g *proxyRig) readWindow(r *runner, arm readArm, cs []*clientv3.Client) readWindow {
	rw := readWindow{tally: &revisionTally{}}
	var beside func()
	if arm.front != "" {
		var opts []clientv3.OpOption
		if arm.mode.serializable {
			opts = append(opts, clientv3.WithSerializable())
		}
		var next atomic.Int64
		var first atomic.Value
		op := func(ctx context.Context, w int) error {
			if arm.mode.bound != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, wire.MaxStalenessKey, arm.mode.bound)
			}
			need, sent := g.acks.last.Load(), time.Now()
			resp, err := cs[w%len(cs)].Get(ctx, proxyKey(int(next.Add(1)*7919%proxyKeys)), opts...)
			if err != nil {
				first.CompareAndSwap(nil, err.Error())
				return err
			}
			rw.tally.add(need, resp.Header.Revision, sent, g.acks.acked)
			return nil
		}
		beside = func() {
			rw.reads = loadAt(context.Background(), g.p.proxyReadRate, 16, g.p.proxyWindow, op)
			if e := first.Load(); e != nil {
				r.Logf("%s: first error: %v", readName(arm.mode, arm.front), e)
			}
		}
	}
	var before phaseReading
	phased := !arm.mode.serializable && (arm.front == frontCascaded || arm.front == frontLearner)
	if phased {
		var err error
		if before, err = g.readPhases(); err != nil {
			r.Fatalf("%v", err)
		}
	}
	rw.proxyWindow = g.putWindow(r, beside)
	if phased {
		after, err := g.readPhases()
		if err != nil {
			r.Fatalf("%v", err)
		}
		rw.phases = after.minus(before)
	}
	if arm.front == "" {
		r.Logf("%-50s leader %.3f CPU-s/10k puts, host %.0f %% busy", readsBaseName, rw.puts.CPUPer10k("leader"), rw.busy)
		return rw
	}
	fig := rw.tally.figures()
	if rw.phases != nil {
		ph := phaseFigures([]phaseReading{rw.phases}, rw.reads.Ops)
		r.Logf("%-50s proof: upstream p50 %.2f p99 %.2f ms, apply p50 %.2f p99 %.2f ms; feeder rounds p50 %.2f p99 %.2f ms, %.2f per read",
			readName(arm.mode, arm.front), ph[figProofUpstreamP50], ph[figProofUpstreamP99], ph[figProofApplyP50], ph[figProofApplyP99], ph[figFeederRoundP50], ph[figFeederRoundP99], ph[figFeederRounds])
	}
	r.Logf("%-50s %5.0f reads/s (%d errors) p50 %v p99 %v; %.0f of %.0f behind the last acknowledged put (at most %.0f revisions, staleness max %.0f ms); leader %.2f CPU-s; host %.0f %% busy",
		readName(arm.mode, arm.front), rw.reads.Throughput, rw.reads.Errors, rw.reads.P50, rw.reads.P99, fig[figBehind], fig[figAnswers], fig[figMaxBehind], fig[figStaleMax], rw.cpu["leader"], rw.busy)
	return rw
}

// readRows are the read windows' rows: the base's, and each arm's with its
// leader CPU per 10,000 reads less the base's CPU in the same round over as
// long.
func (g *proxyRig) readRows(arms []readArm, wins [][]readWindow) []Row {
	base := wins[0]
	var baseRes []Result
	var baseWin []float64
	for _, w := range base {
		baseRes = append(baseRes, w.puts)
		baseWin = append(baseWin, w.puts.CPUPer10k("leader"))
	}
	rows := []Row{{Scenario: grpcProxyID, Name: readsBaseName, Result: combineAll(baseRes), Windows: baseWin, WindowsMetric: "leader CPU/10k",
		Note: fmt.Sprintf("%d puts/s through the leader for %v a window, no reads; leader CPU-s/10k puts per window: %s", g.p.proxyPutRate, g.p.proxyWindow, windowsText(baseWin, 3))}}
	for i, arm := range arms[1:] {
		var res []Result
		var per []float64
		var phases []phaseReading
		figs := map[string]float64{}
		for k, w := range wins[i+1] {
			b := base[k]
			extra := w.cpu["leader"] - b.cpu["leader"]*w.puts.Seconds/b.puts.Seconds
			rd := w.reads
			rd.CPU = map[string]float64{"leader": w.cpu["leader"], "extra": w.cpu[arm.front]}
			res = append(res, rd)
			per = append(per, 1e4*extra/float64(max(1, rd.Ops)))
			for name, v := range w.tally.figures() {
				switch name {
				case figMaxBehind, figStaleMax:
					figs[name] = max(figs[name], v)
				case figStaleP99:
					figs[name] += v / float64(len(wins[i+1]))
				default:
					figs[name] += v
				}
			}
			if w.phases != nil {
				phases = append(phases, w.phases)
			}
			figs[figBusy] += w.busy / float64(len(wins[i+1]))
			figs[figSelf] += 100 * w.cpu["self"] / w.puts.Seconds / float64(len(wins[i+1]))
			figs[figFront] += 100 * w.cpu[arm.front] / w.puts.Seconds / float64(len(wins[i+1]))
		}
		if phases != nil {
			maps.Copy(figs, phaseFigures(phases, combineAll(res).Ops))
		}
		row := Row{Scenario: grpcProxyID, Name: readName(arm.mode, arm.front), Result: combineAll(res), Windows: per, WindowsMetric: metricLeaderPerRead, Figures: figs,
			Note: fmt.Sprintf("%d reads/s from 16 workers over 4 connections beside %d puts/s through the leader, %v a window; leader CPU-s per 10k reads less the puts-alone window of the same round: %s",
				g.p.proxyReadRate, g.p.proxyPutRate, g.p.proxyWindow, windowsText(per, 3))}
		rows = append(rows, row)
	}
	return rows
}
