package main

import "math"

// line is y = A + B·x.
type line struct{ A, B float64 }

func (l line) at(x float64) float64 { return l.A + l.B*x }

// fitLine is the least-squares line through the points (xs[i], ys[i]);
// through fewer than two distinct xs, the flat line at the ys' mean.
func fitLine(xs, ys []float64) line {
	n := float64(len(xs))
	if n == 0 {
		return line{}
	}
	var sx, sy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
	}
	mx, my := sx/n, sy/n
	var sxx, sxy float64
	for i := range xs {
		sxx += (xs[i] - mx) * (xs[i] - mx)
		sxy += (xs[i] - mx) * (ys[i] - my)
	}
	if sxx == 0 {
		return line{A: my}
	}
	b := sxy / sxx
	return line{A: my - b*mx, B: b}
}

// fitRising is fitLine held to a slope of 0 or more: a member added never
// makes the leader's work less, so a falling fit is the noise of the few
// points, and the flat line at their mean is taken instead.
func fitRising(xs, ys []float64) line {
	l := fitLine(xs, ys)
	if l.B >= 0 {
		return l
	}
	return flatLine(ys)
}

// flatLine is the flat line at the mean of ys.
func flatLine(ys []float64) line {
	if len(ys) == 0 {
		return line{}
	}
	var s float64
	for _, y := range ys {
		s += y
	}
	return line{A: s / float64(len(ys))}
}

// scalePoint is what the scale scenario measured at one fleet size N (N
// replicas): figures it does not have are NaN.
type scalePoint struct {
	N float64
	// IdlePct is the idle leader's CPU, % of a core.
	IdlePct float64
	// WritePer10k is the leader's CPU-s per 10,000 puts.
	WritePer10k float64
	// RoundMs is the leader's CPU-ms per ReadIndex round (its idle CPU
	// taken off), RoundsPerRead the rounds a strong read cost, by read
	// mode (a row kind, scaleReadsOwn or scaleReadsHub).
	RoundMs, RoundsPerRead map[string]float64
}

// scaleModel is the leader's cost as lines in N, the number of replicas:
//
//	idle CPU (% of a core)   = Idle.A + Idle.B·N      (B: a member's heartbeats and background rounds)
//	CPU-s per 10k puts        = Write.A + Write.B·N    (B: appending to one more member)
//	CPU-ms per ReadIndex round = Round.A + Round.B·N   (B: one more heartbeat in the round's broadcast)
//	rounds per strong read    = Rounds[mode].at(N), held within [0, 1]
//
// so that at W puts/s and R strong reads/s the leader uses
// Idle(N) + 100·(W·Write(N)/10⁴ + R·Rounds(N)·Round(N)/10³) % of a core.
type scaleModel struct {
	Idle, Write, Round line
	Rounds             map[string]line
}

// fitScale fits the model by least squares on the points with N ≤ maxN,
// every line rising or flat (fitRising): every figure a point has counts, each read mode's rounds per read on its
// own, the cost of a round on every mode's points together (a round costs
// the leader the same whoever asked for it).
func fitScale(pts []scalePoint, maxN float64) scaleModel {
	var ix, iy, wx, wy, rx, ry []float64
	rpx, rpy := map[string][]float64{}, map[string][]float64{}
	for _, p := range pts {
		if p.N > maxN {
			continue
		}
		if !math.IsNaN(p.IdlePct) {
			ix, iy = append(ix, p.N), append(iy, p.IdlePct)
		}
		if !math.IsNaN(p.WritePer10k) {
			wx, wy = append(wx, p.N), append(wy, p.WritePer10k)
		}
		for _, ms := range p.RoundMs {
			if !math.IsNaN(ms) {
				rx, ry = append(rx, p.N), append(ry, ms)
			}
		}
		for mode, v := range p.RoundsPerRead {
			if !math.IsNaN(v) {
				rpx[mode], rpy[mode] = append(rpx[mode], p.N), append(rpy[mode], v)
			}
		}
	}
	m := scaleModel{Idle: fitRising(ix, iy), Write: fitRising(wx, wy), Round: fitRising(rx, ry), Rounds: map[string]line{}}
	for mode := range rpx {
		m.Rounds[mode] = fitRising(rpx[mode], rpy[mode])
	}
	return m
}

// roundsPerRead is the model's rounds per strong read at n in mode.
func (m scaleModel) roundsPerRead(n float64, mode string) float64 {
	return min(max(m.Rounds[mode].at(n), 0), 1)
}

// ReadPer10k is the leader's CPU-s per 10,000 strong reads at n in mode.
func (m scaleModel) ReadPer10k(n float64, mode string) float64 {
	return 1e4 * m.roundsPerRead(n, mode) * m.Round.at(n) / 1e3
}

// LeaderPct is the leader's CPU, % of a core, at n replicas taking
// writeRate puts/s and readRate strong reads/s (spread over them) in mode.
func (m scaleModel) LeaderPct(n, writeRate, readRate float64, mode string) float64 {
	return m.Idle.at(n) + 100*(writeRate*m.Write.at(n)+readRate*m.ReadPer10k(n, mode))/1e4
}

// Saturation is the least n ≤ limit at which the leader needs a whole
// core at writeRate puts/s and readRate strong reads/s in mode, and false
// if it does not up to limit.
func (m scaleModel) Saturation(writeRate, readRate float64, mode string, limit int) (int, bool) {
	for n := 0; n <= limit; n++ {
		if m.LeaderPct(float64(n), writeRate, readRate, mode) >= 100 {
			return n, true
		}
	}
	return 0, false
}
