package main

import (
	"fmt"
	"math"
)

// scaleFitN is the largest N the model is fitted on; N = 8 is left to
// check its prediction against.
const scaleFitN = 4

// roundMs is the leader's CPU-ms per ReadIndex round in the reads of mode
// at n: its CPU over the windows less its idle CPU at n over as long, per
// round more than the idle replicas' background rounds over as long; NaN
// where a figure is missing.
func roundMs(byName map[string]Row, n int, mode string) float64 {
	r, ok := byName[scaleName(n, mode)]
	idle, okI := byName[scaleName(n, scaleIdleReplicas)]
	if !ok || !okI || idle.Seconds == 0 {
		return math.NaN()
	}
	rounds := r.LeaderRounds - idle.LeaderRounds/idle.Seconds*r.Seconds
	if rounds <= 0 {
		return math.NaN()
	}
	return 1000 * (r.CPU["leader"] - idle.CPU["leader"]/idle.Seconds*r.Seconds) / rounds
}

// scalePoints are the scale rows' figures by N, for the model.
func scalePoints(byName map[string]Row) []scalePoint {
	var pts []scalePoint
	for _, n := range scaleNs {
		idle, ok := byName[scaleName(n, scaleIdleReplicas)]
		if !ok {
			continue
		}
		p := scalePoint{N: float64(n), IdlePct: math.NaN(), WritePer10k: math.NaN(), RoundMs: map[string]float64{}, RoundsPerRead: map[string]float64{}}
		if idle.Seconds > 0 {
			p.IdlePct = 100 * idle.CPU["leader"] / idle.Seconds
		}
		if wr, ok := byName[scaleName(n, scaleWritesReplicas)]; ok && wr.Ops > 0 {
			p.WritePer10k = wr.CPUPer10k("leader")
		}
		for _, mode := range []string{scaleReadsOwn, scaleReadsHub} {
			row := mode
			if n == 1 {
				row = scaleReadsOwn // one replica: its own rounds are its hub's
			}
			if r, ok := byName[scaleName(n, row)]; ok && r.Ops > 0 && r.LeaderRounds > 0 {
				p.RoundMs[mode], p.RoundsPerRead[mode] = roundMs(byName, n, row), r.LeaderRounds/float64(r.Ops)
			}
		}
		pts = append(pts, p)
	}
	return pts
}

// scaleRates are the put and strong-read rates the run held (ops/s at
// N = 1), 0 where not measured.
func scaleRates(byName map[string]Row) (puts, reads float64) {
	return math.Round(byName[scaleName(1, scaleWritesReplicas)].Throughput), math.Round(byName[scaleName(1, scaleReadsOwn)].Throughput)
}

// writeScaleModel writes the model fitted on N ≤ scaleFitN, its N = 8
// prediction beside the measurement, its predictions beyond, and the N at
// which the leader would need a whole core.
func writeScaleModel(w func(string, ...any), byName map[string]Row) {
	pts := scalePoints(byName)
	if len(pts) < 3 {
		return
	}
	m := fitScale(pts, scaleFitN)
	puts, reads := scaleRates(byName)
	var at8 *scalePoint
	for i := range pts {
		if pts[i].N == 8 {
			at8 = &pts[i]
		}
	}
	w("\nThe model (docs/scaling.md), least squares on N ≤ %d, against N = 8 and beyond; \"at the run's rates\" is %.0f puts/s or %.0f strong reads/s:\n\n| figure | fitted on N ≤ %d | N = 8 predicted | N = 8 measured | off by | N = 16 | N = 32 | N = 64 |\n|---|---|---|---|---|---|---|---|\n", scaleFitN, puts, reads, scaleFitN)
	type fig struct {
		name, fit string
		f         func(n float64) float64
		measured  float64
	}
	meas := func(f func(p scalePoint) float64) float64 {
		if at8 == nil {
			return math.NaN()
		}
		return f(*at8)
	}
	// The leader's CPU per read less its idle CPU over as long: what the
	// model's rounds cost.
	readMeas := func(mode string) float64 {
		r, ok := byName[scaleName(8, mode)]
		idle, okI := byName[scaleName(8, scaleIdleReplicas)]
		if !ok || !okI || r.Ops == 0 || idle.Seconds == 0 {
			return math.NaN()
		}
		return 1e4 * (r.CPU["leader"] - idle.CPU["leader"]/idle.Seconds*r.Seconds) / float64(r.Ops)
	}
	figs := []fig{
		{"leader idle CPU, % of a core", lineText(m.Idle, "%.3f"), m.Idle.at, meas(func(p scalePoint) float64 { return p.IdlePct })},
		{"leader CPU-s per 10k puts", lineText(m.Write, "%.4f"), m.Write.at, meas(func(p scalePoint) float64 { return p.WritePer10k })},
		{"leader CPU-ms per ReadIndex round", lineText(m.Round, "%.5f"), m.Round.at, roundMs(byName, 8, scaleReadsOwn)},
		{"rounds per strong read, own rounds", lineText(m.Rounds[scaleReadsOwn], "%.4f"), func(n float64) float64 { return m.roundsPerRead(n, scaleReadsOwn) }, meas(func(p scalePoint) float64 { return p.RoundsPerRead[scaleReadsOwn] })},
		{"rounds per strong read, one hub", lineText(m.Rounds[scaleReadsHub], "%.4f"), func(n float64) float64 { return m.roundsPerRead(n, scaleReadsHub) }, meas(func(p scalePoint) float64 { return p.RoundsPerRead[scaleReadsHub] })},
		{"leader CPU-s per 10k strong reads (idle CPU taken off), own rounds", "", func(n float64) float64 { return m.ReadPer10k(n, scaleReadsOwn) }, readMeas(scaleReadsOwn)},
		{"leader CPU-s per 10k strong reads (idle CPU taken off), one hub", "", func(n float64) float64 { return m.ReadPer10k(n, scaleReadsHub) }, readMeas(scaleReadsHub)},
	}
	for _, f := range figs {
		pred := f.f(8)
		w("| %s | %s | %.4g | %.4g | %s | %.4g | %.4g | %.4g |\n", f.name, f.fit, pred, f.measured, offBy(pred, f.measured), f.f(16), f.f(32), f.f(64))
	}
	w("\nThe leader's CPU the model gives for a workload, and the N at which the leader would need a whole core (the run's leader was on a CPU of a 2-CPU host shared with every other process; the workloads' rates are assumptions, docs/scaling.md says which):\n\n| workload | puts/s | strong reads/s | leader CPU at N = 8, one hub | at N = 64, one hub | saturates, own rounds | saturates, one hub |\n|---|---|---|---|---|---|---|\n")
	for _, wl := range append([]scaleWorkload{{"this run's rates", puts, reads}}, scaleWorkloads...) {
		w("| %s | %.0f | %.0f | %.1f %% | %.1f %% | %s | %s |\n", wl.name, wl.puts, wl.reads, m.LeaderPct(8, wl.puts, wl.reads, scaleReadsHub), m.LeaderPct(64, wl.puts, wl.reads, scaleReadsHub),
			saturationText(m, wl.puts, wl.reads, scaleReadsOwn), saturationText(m, wl.puts, wl.reads, scaleReadsHub))
	}
}

// scaleWorkload is a load the model is asked about: puts/s and strong
// reads/s at the leader's cluster (weak and bounded reads and watches
// served by replicas cost the leader nothing per operation).
type scaleWorkload struct {
	name        string
	puts, reads float64
}

// scaleWorkloads are docs/scaling.md's three workloads.
var scaleWorkloads = []scaleWorkload{
	{"Kubernetes control plane, 5,000 nodes", 1000, 500},
	{"service discovery fan-out", 50, 20000},
	{"config distribution", 5, 1000},
}

func lineText(l line, format string) string {
	return fmt.Sprintf(format+" + "+format+"·N", l.A, l.B)
}

// offBy is how far pred is from measured, as a signed percentage of it.
func offBy(pred, measured float64) string {
	if math.IsNaN(measured) || measured == 0 {
		return "—"
	}
	pct := math.Round(100 * (pred - measured) / measured)
	if pct == 0 {
		return "0 %"
	}
	return fmt.Sprintf("%+.0f %%", pct)
}

func saturationText(m scaleModel, puts, reads float64, mode string) string {
	const limit = 100000
	n, ok := m.Saturation(puts, reads, mode, limit)
	switch {
	case !ok:
		return fmt.Sprintf("beyond %d", limit)
	case n == 0:
		return "already with no replica"
	}
	return fmt.Sprintf("N = %d", n)
}
