package main

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/understudy-kv/understudy/test/harness"
)

// Where a strong read through the cascaded replica spends its time (issue
// 58: "a histogram per phase"), from its understudy_cascade_proof_seconds
// and its learner replica's understudy_replica_freshness_round_seconds
// across the linearizable read windows through it.
const (
	figProofUpstreamP50 = "proof: upstream p50 ms"
	figProofUpstreamP99 = "proof: upstream p99 ms"
	figProofApplyP50    = "proof: apply p50 ms"
	figProofApplyP99    = "proof: apply p99 ms"
	figFeederRoundP50   = "feeder round p50 ms"
	figFeederRoundP99   = "feeder round p99 ms"
	figFeederRounds     = "feeder rounds per read"
	figProofs           = "proofs"
)

// phaseHists are the histograms a phase tally reads, by the name it gives
// them.
var phaseHists = []struct{ name, family, phase string }{
	{"upstream", "understudy_cascade_proof_seconds", "upstream"},
	{"apply", "understudy_cascade_proof_seconds", "apply"},
	{"round", "understudy_replica_freshness_round_seconds", ""},
}

// hist is a histogram's cumulative bucket counts by upper bound, and its
// count.
type hist struct {
	bounds []float64
	counts []float64
	n      float64
}

// minus is h less an earlier reading of the same histogram.
func (h hist) minus(o hist) hist {
	d := hist{bounds: h.bounds, counts: slices.Clone(h.counts), n: h.n - o.n}
	for i := range d.counts {
		if i < len(o.counts) {
			d.counts[i] -= o.counts[i]
		}
	}
	return d
}

// plus adds o (of the same buckets) to h.
func (h hist) plus(o hist) hist {
	if h.bounds == nil {
		return o
	}
	s := hist{bounds: h.bounds, counts: slices.Clone(h.counts), n: h.n + o.n}
	for i := range s.counts {
		if i < len(o.counts) {
			s.counts[i] += o.counts[i]
		}
	}
	return s
}

// quantile is the q-quantile interpolated within its bucket, as
// Prometheus' histogram_quantile does; NaN without samples.
func (h hist) quantile(q float64) float64 {
	if h.n <= 0 {
		return math.NaN()
	}
	rank := q * h.n
	lower, below := 0.0, 0.0
	for i, c := range h.counts {
		if c >= rank {
			if c == below {
				return h.bounds[i]
			}
			return lower + (h.bounds[i]-lower)*(rank-below)/(c-below)
		}
		lower, below = h.bounds[i], c
	}
	return lower // in the +Inf bucket: its lower bound
}

// readHist is family's histogram (of phase, when not "") summed over its
// series in m, its buckets in the order of their bounds.
func readHist(m harness.Metrics, family, phase string) hist {
	var labels []string
	if phase != "" {
		labels = []string{"phase=" + phase}
	}
	byBound := map[float64]float64{}
	for _, b := range m.Series(family + "_bucket") {
		if phase != "" && b.Labels["phase"] != phase {
			continue
		}
		le, err := strconv.ParseFloat(b.Labels["le"], 64)
		if err != nil {
			continue
		}
		byBound[le] += b.Value
	}
	h := hist{bounds: slices.Sorted(maps.Keys(byBound)), n: m.Sum(family+"_count", labels...)}
	for _, le := range h.bounds {
		h.counts = append(h.counts, byBound[le])
	}
	return h
}

// phaseReading is the phase histograms at one moment: the proof's at the
// cascaded replica, the rounds' at its learner replica.
type phaseReading map[string]hist

func (g *proxyRig) readPhases() (phaseReading, error) {
	out := phaseReading{}
	for _, at := range []string{frontCascaded, frontLearner} {
		m, err := harness.Scrape(context.Background(), g.fronts[at].url+"/metrics", nil)
		if err != nil {
			return nil, fmt.Errorf("proof phases at %s: %w", at, err)
		}
		for _, ph := range phaseHists {
			if (ph.name == "round") == (at == frontLearner) {
				out[ph.name] = readHist(m, ph.family, ph.phase)
			}
		}
	}
	return out, nil
}

// minus is what happened between an earlier reading and p.
func (p phaseReading) minus(o phaseReading) phaseReading {
	d := phaseReading{}
	for k, h := range p {
		d[k] = h.minus(o[k])
	}
	return d
}

// phaseFigures are the figures of the read windows' phases summed over
// ws, for reads strong reads.
func phaseFigures(ws []phaseReading, reads int) map[string]float64 {
	sum := phaseReading{}
	for _, w := range ws {
		for k, h := range w {
			sum[k] = sum[k].plus(h)
		}
	}
	ms := func(k string, q float64) float64 { return 1e3 * sum[k].quantile(q) }
	return map[string]float64{
		figProofUpstreamP50: ms("upstream", 0.5), figProofUpstreamP99: ms("upstream", 0.99),
		figProofApplyP50: ms("apply", 0.5), figProofApplyP99: ms("apply", 0.99),
		figFeederRoundP50: ms("round", 0.5), figFeederRoundP99: ms("round", 0.99),
		figFeederRounds: sum["round"].n / float64(max(1, reads)), figProofs: sum["upstream"].n,
	}
}
