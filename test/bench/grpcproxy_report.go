package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// proxyWatcherCounts are the watcher counts whose rows the report looks
// for: the full run's and the quick run's.
func proxyWatcherCounts() []int {
	return slices.Concat(fullParams().proxyWatchers, quickParams().proxyWatchers)
}

// grpcProxyComparisons are the Ratios table's rows of the grpc-proxy
// scenario: a cascaded replica (and a learner replica) against grpc-proxy
// on what issue 58 asks; the goals are its, at 100,000 watchers.
func grpcProxyComparisons() []comparison {
	var cs []comparison
	for _, n := range proxyWatcherCounts() {
		goal := func(g string) string {
			if n >= 100000 {
				return g
			}
			return ""
		}
		for _, s := range proxyShapes {
			at := thousands(n) + " watchers over " + s.name
			c, l, p := watchName(n, s, frontCascaded), watchName(n, s, frontLearner), watchName(n, s, frontProxy)
			cs = append(cs,
				comparison{"watch delivery p99, " + at + ", through a cascaded replica vs through grpc-proxy", c, p, "p99", goal("≤ 1.0"), ""},
				comparison{"watch delivery p99, " + at + ", through a learner replica vs through grpc-proxy", l, p, "p99", "", ""},
				comparison{"leader CPU per put, " + at + ", on a cascaded replica vs on grpc-proxy", c + sfxLeaderCPU, p + sfxLeaderCPU, "leader CPU/10k", goal("≤ 1.0"), ""},
				comparison{"front CPU per 10,000 watchers, " + at + ", a cascaded replica vs grpc-proxy", c + sfxFrontCPU, p + sfxFrontCPU, metricFrontCPU, "", ""},
				comparison{"front RSS per 10,000 watchers, " + at + ", a cascaded replica vs grpc-proxy", c + sfxFrontRSS, p + sfxFrontRSS, metricFrontRSS, goal("≤ 1.5"), ""},
			)
		}
	}
	lin, ser := proxyReadModes[1], proxyReadModes[0]
	return append(cs,
		comparison{"leader CPU per linearizable read through a cascaded replica vs through grpc-proxy (each less the puts alone)", readName(lin, frontCascaded), readName(lin, frontProxy), metricLeaderPerRead, "", ""},
		comparison{"leader CPU per linearizable read through a learner replica vs through grpc-proxy (each less the puts alone)", readName(lin, frontLearner), readName(lin, frontProxy), metricLeaderPerRead, "", ""},
		comparison{"linearizable read p50 through a cascaded replica vs through grpc-proxy", readName(lin, frontCascaded), readName(lin, frontProxy), "p50", "", ""},
		comparison{"linearizable read p99 through a cascaded replica vs through grpc-proxy", readName(lin, frontCascaded), readName(lin, frontProxy), "p99", "", ""},
		comparison{"serializable read p99 through a cascaded replica vs through grpc-proxy (its cache)", readName(ser, frontCascaded), readName(ser, frontProxy), "p99", "", ""},
		comparison{"strong read p50 through a cascaded replica vs a linearizable read at a follower", readName(lin, frontCascaded), readName(lin, frontFollower), "p50", "≤ 1.3", ""},
		comparison{"strong read p99 through a cascaded replica vs a linearizable read at a follower", readName(lin, frontCascaded), readName(lin, frontFollower), "p99", "≤ 1.2", ""},
		comparison{"leader CPU per strong read through a cascaded replica vs per linearizable read at a follower (each less the puts alone)", readName(lin, frontCascaded), readName(lin, frontFollower), metricLeaderPerRead, "≤ 0.6", ""},
		comparison{"strong read p50 through a learner replica vs a linearizable read at a follower", readName(lin, frontLearner), readName(lin, frontFollower), "p50", "", ""},
	)
}

// writeGRPCProxy writes the grpc-proxy scenario's section: its watch
// windows (delivery and the leader; the fronts' cost) and its reads.
func writeGRPCProxy(w func(string, ...any), all []Row, byName map[string]Row) {
	var rows []Row
	for _, r := range all {
		if r.Scenario == grpcProxyID {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return
	}
	w("\n## grpc-proxy beside the read tier (`--only grpc-proxy`: 3 primaries; in front of them etcd's `grpc-proxy start` (the stock v3.7.3 binary, the 3 voters as its endpoints), a learner replica and a cascaded replica fed by it, in one run, and for reads a follower too; watchers and reads through each front in turn, in rounds whose order rotates, beside windows with neither; puts at a fixed rate through the leader throughout; CPU from each process's threads' schedstat; details in docs/cascaded.md, \"Cascaded replica or grpc-proxy?\")\n\n")
	w("Watch delivery and the leader. Delivery from the put's acknowledgement to the event (mean of the windows' percentiles); the leader's CPU and peer bytes per put against the windows with no watchers (95 %% intervals over the rounds); the watchers grpc-proxy's watches made on the leader and on all voters:\n\n")
	w("| watchers | over | front | events | missing | p50 | p99 | leader CPU-s/10k puts | vs no watchers | leader peer B/put | vs no watchers | watchers held by the leader / all voters |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	eachWatchRow(byName, func(n int, s watchShape, f, name string, r Row) {
		none := noWatchersName(n)
		w("| %s | %s | %s | %d | %d | %v | %v | %.3f | %s | %.0f | %s | %.0f / %.0f |\n", thousands(n), s.name, f, r.Ops, r.Errors,
			r.P50.Round(100*time.Microsecond), r.P99.Round(100*time.Microsecond),
			byName[name+sfxLeaderCPU].CPUPer10k("leader"), ratioCell(byName, name+sfxLeaderCPU, none+sfxLeaderCPU, "leader CPU/10k"),
			value(byName[name+sfxPeer], metricPeerPerPut), ratioCell(byName, name+sfxPeer, none+sfxPeer, metricPeerPerPut),
			r.Figures[figAtLeader], r.Figures[figAtVoters])
	})
	w("\nWhat each front spends on its watchers: its CPU (%% of a core) with them and in the windows without (its share of the puts), the difference per 10,000 watchers (95 %% intervals), the learner replica's CPU where it feeds a cascaded replica, the front's RSS (highest) and its growth over its RSS before any watcher per 10,000 watchers; the time the watchers took to open; and whether the load generator or the host was the bottleneck (this process's CPU, the host's CPUs busy):\n\n")
	w("| watchers | over | front | front CPU %% | without watchers | per 10,000 watchers | feeder CPU %% | RSS MiB | per 10,000 watchers | opened in | this process CPU %% | host busy %% |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	eachWatchRow(byName, func(n int, s watchShape, f, name string, r Row) {
		feeder := "—"
		if f == frontCascaded {
			feeder = fmt.Sprintf("%.1f", r.Figures[figFeeder])
		}
		w("| %s | %s | %s | %.1f | %.1f | %s | %s | %.0f | %s | %.1f s | %.1f | %.0f |\n", thousands(n), s.name, f,
			r.Figures[figFront], r.Figures[figFrontIdle], meanCell(byName[name+sfxFrontCPU].Windows, 2), feeder,
			r.Figures[figRSS], meanCell(byName[name+sfxFrontRSS].Windows, 1), r.Figures[figOpened], r.Figures[figSelf], r.Figures[figBusy])
	})
	w("\nReads at a fixed rate through each front, puts through the leader beside them. Each answer's header revision is judged against the last put acknowledged when the read was sent: below it, the answer misses a write its client could know of; its staleness is how long before the read the first write it misses was acknowledged. The leader's CPU per read is its CPU less that of the window of puts alone in the same round, over as long (95 %% intervals over the rounds):\n\n")
	w("| mode | front | reads/s | errors | p50 | p99 | leader CPU-s/10k reads | answers behind the last acknowledged put | most revisions behind | staleness p99 | staleness max | front CPU %% | host busy %% |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, m := range proxyReadModes {
		for _, f := range proxyReadFronts {
			r, ok := byName[readName(m, f)]
			if !ok {
				continue
			}
			fg := r.Figures
			w("| %s | %s | %.0f | %d | %v | %v | %s | %.0f of %.0f | %.0f | %.0f ms | %.0f ms | %.1f | %.0f |\n", m.name, f, r.Throughput, r.Errors,
				r.P50.Round(10*time.Microsecond), r.P99.Round(10*time.Microsecond), meanCell(r.Windows, 3),
				fg[figBehind], fg[figAnswers], fg[figMaxBehind], fg[figStaleP99], fg[figStaleMax], fg[figFront], fg[figBusy])
		}
	}
	lin := proxyReadModes[1]
	if r, ok := byName[readName(lin, frontCascaded)]; ok && r.Figures[figProofs] > 0 {
		fg := r.Figures
		w("\nWhere a linearizable read through the cascaded replica spends its time (`understudy_cascade_proof_seconds` and its learner replica's `understudy_replica_freshness_round_seconds` over the windows, interpolated within their buckets, which double): the learner replica's answer to its proof p50 %.2f ms, p99 %.2f ms (the learner's rounds: p50 %.2f ms, p99 %.2f ms, %.2f rounds per read), then until the cascaded replica's store holds the answered revision p50 %.2f ms, p99 %.2f ms; %.0f proofs for %d reads.",
			fg[figProofUpstreamP50], fg[figProofUpstreamP99], fg[figFeederRoundP50], fg[figFeederRoundP99], fg[figFeederRounds], fg[figProofApplyP50], fg[figProofApplyP99], fg[figProofs], r.Ops)
		if l, ok := byName[readName(lin, frontLearner)]; ok {
			w(" Through the learner replica itself: its rounds p50 %.2f ms, p99 %.2f ms, %.2f rounds per read.", l.Figures[figFeederRoundP50], l.Figures[figFeederRoundP99], l.Figures[figFeederRounds])
		}
		w("\n")
	}
	w("\nWhere grpc-proxy differs from a voter, checked (`proxyChecks`: 1 primary with auth on, grpc-proxy in front of it, a cascaded replica fed by a learner replica):\n\n| check | %s |\n|---|---|---|---|\n", strings.Join(checkFronts, " | "))
	for _, name := range []string{checkProgress, checkFromKey, checkAuth} {
		r, ok := byName[name]
		if !ok {
			continue
		}
		w("| %s |", strings.TrimPrefix(name, "check: "))
		for _, f := range checkFronts {
			v, ok := r.Figures[f]
			switch {
			case !ok:
				w(" — |")
			case v == 1:
				w(" yes |")
			default:
				w(" **no** |")
			}
		}
		w("\n")
	}
	writeNotes(w, rows)
}

// ratioCell is the ratio of row to partner in metric with its 95 %
// interval where their windows give one, or "—".
func ratioCell(byName map[string]Row, row, partner, metric string) string {
	c := comparison{row: row, partner: partner, metric: metric}
	ratio, ok := c.ratio(byName)
	if !ok {
		return "—"
	}
	text, _ := c.cell(byName, ratio)
	return text
}

// meanCell is the mean of xs with the half-width of its 95 % interval.
func meanCell(xs []float64, prec int) string {
	if len(xs) == 0 {
		return "—"
	}
	m, se := meanSE(xs)
	if len(xs) < 2 {
		return fmt.Sprintf("%.*f", prec, m)
	}
	return fmt.Sprintf("%.*f ± %.*f", prec, m, prec, t975(len(xs)-1)*se)
}

// eachWatchRow calls row for every watchers row in byName, in the tables'
// order: by number of watchers, then shape, then front.
func eachWatchRow(byName map[string]Row, row func(n int, s watchShape, f, name string, r Row)) {
	for _, n := range proxyWatcherCounts() {
		for _, s := range proxyShapes {
			for _, f := range proxyFronts {
				name := watchName(n, s, f)
				if r, ok := byName[name]; ok {
					row(n, s, f, name, r)
				}
			}
		}
	}
}
