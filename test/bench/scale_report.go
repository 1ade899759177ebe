package main

import (
	"fmt"
	"math"
	"strings"
)

// scaleFleetName is the fleet row's comparison at n replicas.
func scaleFleetName(n int) string {
	return fmt.Sprintf("same strong-read rate over N replicas sharing hubs vs over 2 stock followers, leader CPU per read, N=%d", n)
}

// scaleSharing is the read mode the fleet row takes at n replicas: one hub
// per 4 (at n ≤ 4, one hub; at 1, the replica's own rounds).
func scaleSharing(n int) string {
	switch {
	case n <= 1:
		return scaleReadsOwn
	case n <= 4:
		return scaleReadsHub
	}
	return scaleReadsHub4
}

// scaleFleetComparison is the fleet row for a scale row of strong reads
// in the mode the fleet row takes at its N.
func scaleFleetComparison(r Row) (comparison, bool) {
	if r.Scenario != scaleID {
		return comparison{}, false
	}
	for _, n := range scaleNs {
		mode := scaleSharing(n)
		if n == 0 || r.Name != scaleName(n, mode) {
			continue
		}
		goal := ""
		switch n {
		case 4:
			goal = "≤ 0.5"
		case 8:
			goal = "≤ 0.6"
		}
		return comparison{scaleFleetName(n), r.Name, scaleName(n, scalePartner+mode), "leader CPU/10k", goal, ""}, true
	}
	return comparison{}, false
}

// meanSE is the mean of xs and its standard error (0 for one).
func meanSE(xs []float64) (mean, se float64) {
	if len(xs) == 0 {
		return math.NaN(), 0
	}
	if len(xs) == 1 {
		return xs[0], 0
	}
	m, v := meanVar(xs)
	return m, math.Sqrt(v / float64(len(xs)))
}

// perMember is what n members add to the leader's idle CPU each (% of a
// core), from the idle windows at n and at 0, and its standard error.
func perMember(byName map[string]Row, kind string, n int) (cost, se float64, ok bool) {
	r, okR := byName[scaleName(n, kind)]
	b, okB := byName[scaleName(0, kind)]
	if !okR || !okB || n == 0 {
		return 0, 0, false
	}
	mr, sr := meanSE(r.Windows)
	mb, sb := meanSE(b.Windows)
	return (mr - mb) / float64(n), math.Hypot(sr, sb) / float64(n), true
}

// quotient is a/b with its standard error to first order.
func quotient(a, sa, b, sb float64) (q, se float64) {
	q = a / b
	return q, math.Abs(q) * math.Hypot(sa/a, sb/b)
}

// writeScale writes the scale scenario's section: per N, the idle cost of
// a replica and of a stock learner, the leader's cost per put and per
// strong read in each mode beside the stock followers', the rounds, the
// memory, and the model fitted on N ≤ 4 against N = 8.
func writeScale(w func(string, ...any), all []Row, byName map[string]Row) {
	var rows []Row
	for _, r := range all {
		if r.Scenario == scaleID {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return
	}
	w("\n## Scaling (`--only scale`: 3 primaries + N replicas beside 3 etcd voters + N stock learners, and 3 etcd voters whose 2 followers serve the partner rows; the three leaders alone on CPU 0; details in docs/scaling.md)\n\n")
	w("| N | leader idle CPU added per replica | per stock learner | replica ÷ stock learner | goal | leader CPU/10k puts, replicas | stock learners | RSS MiB, replica | stock learner |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, n := range scaleNs[1:] {
		ur, us, okU := perMember(byName, scaleIdleReplicas, n)
		sr, ss, okS := perMember(byName, scaleIdleLearners, n)
		if !okU || !okS {
			continue
		}
		q, se := quotient(ur, us, sr, ss)
		goal := goalMark(q-2*se, q+2*se, "≤ 1.1")
		ratio := fmt.Sprintf("**%s×** ± %s", ratioText(q), ratioText(2*se))
		if sr <= 2*ss {
			ratio, goal = ratioText(q)+"×, not resolved", "≤ 1.1: the stock learner's cost is not above noise"
		}
		rr, _ := meanSE(byName[scaleName(n, scaleRSSReplicas)].Windows)
		rl, _ := meanSE(byName[scaleName(n, scaleRSSLearners)].Windows)
		w("| %d | %.3f ± %.3f %% of a core | %.3f ± %.3f %% | %s | %s | %.3f | %.3f | %.0f | %.0f |\n", n, ur, 2*us, sr, 2*ss, ratio, goal,
			byName[scaleName(n, scaleWritesReplicas)].CPUPer10k("leader"), byName[scaleName(n, scaleWritesLearners)].CPUPer10k("leader"), rr, rl)
	}
	w("\nLeader CPU-s per 10,000 strong reads at a fixed total rate spread over the N replicas, and the same rate over 2 stock followers in windows beside each mode's; the fleet row is in the Ratios table:\n\n| N | own rounds | 2 stock followers | one hub | 2 stock followers | one hub per 4 | 2 stock followers |\n|---|---|---|---|---|---|---|\n")
	for _, n := range scaleNs[1:] {
		cell := func(kind string) string {
			r, ok := byName[scaleName(n, kind)]
			if !ok {
				return "—"
			}
			return fmt.Sprintf("%.3f", r.CPUPer10k("leader"))
		}
		w("| %d | %s | %s | %s | %s | %s | %s |\n", n, cell(scaleReadsOwn), cell(scalePartner+scaleReadsOwn), cell(scaleReadsHub), cell(scalePartner+scaleReadsHub), cell(scaleReadsHub4), cell(scalePartner+scaleReadsHub4))
	}
	w("\nReadIndex rounds the replicas asked the leader for (from their `/metrics`) and the leader's CPU per round, its idle CPU at the same N taken off:\n\n| N | mode | reads/s | errors | rounds/s | reads per round | leader CPU-ms per round |\n|---|---|---|---|---|---|---|\n")
	for _, n := range scaleNs[1:] {
		for _, mode := range []string{scaleReadsOwn, scaleReadsHub, scaleReadsHub4} {
			r, ok := byName[scaleName(n, mode)]
			if !ok || r.LeaderRounds <= 0 {
				continue
			}
			w("| %d | %s | %.0f | %d | %.0f | %.1f | %.4f |\n", n, strings.TrimPrefix(mode, "strong reads over the replicas, "), r.Throughput, r.Errors, r.LeaderRounds/r.Seconds, float64(r.Ops)/r.LeaderRounds, roundMs(byName, n, mode))
		}
	}
	writeScaleModel(w, byName)
	writeNotes(w, rows)
}
