package main

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/version"
)

type report struct {
	Mode     string            `json:"mode"`
	Params   string            `json:"params"`
	Started  string            `json:"started"`
	Seconds  float64           `json:"seconds"`
	Machine  map[string]string `json:"machine"`
	Rows     []Row             `json:"rows"`
	Failures []string          `json:"failures,omitempty"`
	// Reruns are the runs whose rows are kept beside this run's.
	Reruns []rerun `json:"reruns,omitempty"`
	// Earlier are the goal ratios of rows a --merge run replaced.
	Earlier []earlierFigure `json:"earlier,omitempty"`
}

func (p params) describe() string {
	s := fmt.Sprintf("%v per row, %d concurrent workers over %d connections, %d keys of 256 B (rows of strong reads shared by several replicas: a fixed %d reads/s); watchers %v at %d puts/s; catch-up over %d keys of 1 KiB; mirror of %d keys of 256 B, lag at %d puts/s; scale: %d puts/s, %d strong reads/s",
		p.dur, p.workers, p.conns, p.keys, p.sharedRate, p.watchers, p.watchRate, p.catchupKeys, p.mirrorKeys, p.mirrorRate, p.scaleWriteRate, p.scaleReadRate)
	if len(p.replicaArgs) > 0 {
		s += "; replicas run with `" + strings.Join(p.replicaArgs, " ") + "`"
	} else {
		s += "; replicas run with their defaults"
	}
	return s
}

func machine() map[string]string {
	m := map[string]string{
		"go":      runtime.Version(),
		"etcd":    version.Version,
		"cpus":    fmt.Sprint(runtime.NumCPU()),
		"os/arch": runtime.GOOS + "/" + runtime.GOARCH,
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m["cpu"] = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if l, _, ok := strings.Cut(string(b), "\n"); ok {
			m["memory"] = strings.Join(strings.Fields(l)[1:], " ")
		}
	}
	return m
}

// comparison is a ratio between two rows, named by what it shows.
type comparison struct {
	what, row, partner string
	metric             string // "throughput", "leader CPU/10k", "leader CPU", "replica CPU/10k", "p99"
	goal               string
	// base, if set, is subtracted from both sides: the ratio is of what
	// row and partner add to it.
	base string
}

func comparisons(rows []Row) []comparison {
	cs := []comparison{
		{"the project's load generator vs etcd's benchmark tool, serializable reads at a stock etcd leader", "generator: serializable range @ etcd leader", "etcd benchmark " + benchToolVersion + ": serializable range @ etcd leader", "throughput", "± 10 %", ""},
		{"the project's load generator vs etcd's benchmark tool, linearizable reads at a stock etcd leader", "generator: linearizable range @ etcd leader", "etcd benchmark " + benchToolVersion + ": linearizable range @ etcd leader", "throughput", "± 10 %", ""},
		{"weak reads through a replica vs serializable reads at a stock etcd learner", "replica weak", "etcd serializable @ stock learner", "throughput", "≥ 0.97", ""},
		{"weak reads through a replica vs serializable reads at a stock etcd follower", "replica weak", "etcd serializable @ follower", "throughput", "≥ 0.95", ""},
		{"leader cost of strong reads through a replica vs linearizable reads at the leader", "replica strong", "primary linearizable @ leader", "leader CPU/10k", "≤ 0.10", ""},
		{"leader cost of strong reads through a replica vs linearizable reads at a stock etcd leader", "replica strong", "etcd linearizable @ leader", "leader CPU/10k", "≤ 0.10", ""},
		{"strong reads through a replica vs linearizable reads at the leader", "replica strong", "primary linearizable @ leader", "throughput", "", ""},
		{"leader cost of bounded (100 ms) reads through a replica vs linearizable reads at the leader", "replica bounded 100ms", "primary linearizable @ leader", "leader CPU/10k", "", ""},
		{"bounded (100 ms) vs weak reads through a replica", "replica bounded 100ms", "replica weak", "throughput", "", ""},
		{"writes through a replica (forwarded) vs writes at the leader", "put via replica (forwarded)", "put @ leader", "throughput", "", ""},
		{"write latency through a replica vs at the leader", "put via replica (forwarded)", "put @ leader", "p99", "", ""},
		{"leader write throughput while a replica catches up vs with none joining", catchUpReplica, catchUpNone, "throughput", "≥ 0.9", ""},
		{"leader write throughput while a stock etcd learner catches up vs with none joining (its own cluster, the same data)", catchUpStock, catchUpNoneStock, "throughput", "", ""},
		{"weak reads through a replica with the answer headers on every answer vs none (--freshness-headers=always vs off)", headersOn, headersOff, "throughput", "", ""},
		{"the replica's CPU per weak read, --freshness-headers=always vs off", headersOn, headersOff, "replica CPU/10k", "", ""},
		{"weak reads through a replica (default on-request) asking for the answer headers vs not asking", headersAsked, headersNotAsked, "throughput", "", ""},
		{"the replica's CPU per weak read, asking for the answer headers vs not asking", headersAsked, headersNotAsked, "replica CPU/10k", "", ""},
		{"source leader CPU per put added by a mirror watching a replica vs by the same mirror watching the leader (each less the leader's with no mirror)", mirrorSrcReplica, mirrorSrcLeader, "leader CPU/10k", "≤ 0.2", mirrorSrcNone},
		{"source leader CPU per put added by a mirror watching a replica vs by the same mirror watching the leader (each less the leader's with the mirror watching a follower: the same mirror and destination load on the machine, no watch on the leader)", mirrorSrcReplica, mirrorSrcLeader, "leader CPU/10k", "≤ 0.2", mirrorSrcFollower},
		{"source leader CPU serving watches and writing gRPC frames, by its CPU profile, for a mirror watching a replica vs for the same mirror watching the leader (each less the leader's with no mirror)", servingRow(mirrorSrcReplica), servingRow(mirrorSrcLeader), "leader CPU/10k", "≤ 0.2", servingRow(mirrorSrcNone)},
		{"source leader CPU serving watches and writing gRPC frames, by its CPU profile, for a mirror watching a replica vs for the same mirror watching the leader (each less the leader's with the mirror watching a follower)", servingRow(mirrorSrcReplica), servingRow(mirrorSrcLeader), "leader CPU/10k", "≤ 0.2", servingRow(mirrorSrcFollower)},
		{"mirror lag p99, watching a replica vs watching the leader", mirrorSrcReplica, mirrorSrcLeader, "p99", "", ""},
		{"source leader CPU for a mirror's initial sync read from a replica vs read from the leader (each less the leader's idle CPU over as long)", mirrorSyncReplica, mirrorSyncLeader, "leader CPU/10k", "≤ 0.2", ""},
		{"source leader CPU for a mirror's watch catching up on a replica vs on the leader (each less the leader's idle CPU over as long)", mirrorCatchUpReplica, mirrorCatchUpLeader, "leader CPU/10k", "≤ 0.2", ""},
	}
	cs = append(cs, fanoutComparisons()...)
	cs = append(cs, fanoutPairedComparisons()...)
	cs = append(cs, treeComparisons()...)
	cs = append(cs, backupComparisons()...)
	cs = append(cs, grpcProxyComparisons()...)
	for _, r := range rows {
		if rest, ok := strings.CutPrefix(r.Name, "understudy mirror: "); ok {
			goal := ""
			metric := "p99"
			if strings.HasPrefix(rest, "initial sync") {
				goal, metric = "≥ 2", "throughput"
			}
			cs = append(cs, comparison{"mirror " + rest + ", understudy vs etcdctl make-mirror", r.Name, "etcdctl make-mirror: " + rest, metric, goal, ""})
		}
		if rest, ok := strings.CutPrefix(r.Name, "replica strong, "); ok && strings.HasSuffix(rest, " workers") {
			cs = append(cs, comparison{"leader cost of strong reads through a replica vs linearizable reads at the leader, " + rest, r.Name, "primary linearizable @ leader, " + rest, "leader CPU/10k", "≤ 0.10", ""})
		}
		if r.Name == "replica strong" || strings.HasPrefix(r.Name, "replica strong, ") && strings.HasSuffix(r.Name, " workers") {
			rest := strings.TrimPrefix(r.Name, "replica strong")
			cs = append(cs,
				comparison{"leader cost of strong reads through a replica vs linearizable reads at a stock etcd follower" + rest, r.Name, "etcd linearizable @ follower" + rest, "leader CPU/10k", "≤ 0.5", ""},
				comparison{"strong-read p99 through a replica vs linearizable reads at the leader" + rest, r.Name, "primary linearizable @ leader" + rest, "p99", "≤ 1.2", ""},
			)
		}
		for _, n := range []int{2, 4} {
			if r.Name == sharedName(n, false) {
				cs = append(cs, comparison{"leader cost of the same strong reads (a fixed rate) spread over several replicas, each with its own rounds, vs through one (4 replicas joined)", r.Name, sharedName(1, false), "leader CPU/10k", "", ""})
			}
			if r.Name == sharedName(n, true) {
				cs = append(cs, comparison{"leader cost of the same strong reads (a fixed rate) spread over several replicas sharing one's rounds vs through one (4 replicas joined)", r.Name, sharedName(1, false), "leader CPU/10k", "≤ 1.1", ""})
			}
		}
		if c, ok := scaleFleetComparison(r); ok {
			cs = append(cs, c)
		}
		if r.Scenario == "watch" && strings.HasSuffix(r.Name, "@ replica") {
			onLeader := strings.TrimSuffix(r.Name, "replica") + "leader"
			cs = append(cs,
				comparison{"leader CPU with " + strings.TrimSuffix(r.Name, " @ replica") + " on a replica vs on the leader", r.Name, onLeader, "leader CPU", "", ""},
				comparison{"event delivery p99 with " + strings.TrimSuffix(r.Name, " @ replica") + " on a replica vs on the leader", r.Name, onLeader, "p99", "", ""},
			)
		}
	}
	return cs
}

func value(r Row, metric string) float64 {
	switch metric {
	case "throughput":
		return r.Throughput
	case "leader CPU/10k":
		return r.CPUPer10k("leader")
	case "leader CPU":
		return r.CPU["leader"]
	case "replica CPU/10k":
		return r.CPUPer10k("extra")
	case "p99":
		return r.P99.Seconds()
	case "p50":
		return r.P50.Seconds()
	case metricLeaderPct:
		if r.Seconds > 0 {
			return 100 * r.CPU["leader"] / r.Seconds
		}
	}
	// A metric of the row's windows alone (a work counter): their mean.
	if r.WindowsMetric == metric && len(r.Windows) > 0 {
		m, _ := meanVar(r.Windows)
		return m
	}
	return 0
}

func (rep report) markdown() string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("# Benchmarks\n\n")
	w("Written by `go run ./test/bench")
	if rep.Mode == "quick" {
		w(" --quick")
	}
	w("` on %s in %s; nothing here is edited by hand.\n\n", rep.Started, (time.Duration(rep.Seconds) * time.Second).String())
	writeReruns(w, rep)
	w("Machine: %s, %s CPUs, %s memory, %s. etcd %s (stock etcd and primary built from this module), %s.\n\n",
		rep.Machine["cpu"], rep.Machine["cpus"], rep.Machine["memory"], rep.Machine["os/arch"], rep.Machine["etcd"], rep.Machine["go"])
	if len(rep.Reruns) > 0 {
		w("Every row ran on this machine, in the run above or a re-run listed above, with the same load generator (`test/bench/load.go`): %s. ", rep.Params)
	} else {
		w("Every row ran on this machine in this run, with the same load generator (`test/bench/load.go`): %s. ", rep.Params)
	}
	w("CPU-seconds are read from /proc for every process; \"leader CPU/10k\" is the leader's CPU-seconds per 10,000 operations.\n\n")
	if len(rep.Failures) > 0 {
		w("**Scenarios that failed in this run:**\n\n")
		for _, f := range rep.Failures {
			w("- %s\n", f)
		}
		w("\n")
	}

	byName := map[string]Row{}
	for _, r := range rep.Rows {
		byName[r.Name] = r
	}
	w("## Ratios\n\n| comparison | row | partner | metric | ratio | goal |\n|---|---|---|---|---|---|\n")
	for _, c := range comparisons(rep.Rows) {
		ratio, ok := c.ratio(byName)
		if !ok {
			continue
		}
		text, goal := c.cell(byName, ratio)
		row, partner := c.row, c.partner
		if c.base != "" {
			row, partner = row+" − "+c.base, partner+" − "+c.base
		}
		w("| %s | %s | %s | %s | %s | %s |\n", c.what, row, partner, c.metric, text, goal)
	}
	writeEarlier(w, rep)

	if _, ok := byName[idleBase]; ok {
		w("\n## Idle cost\n\nWhat each idle member adds to the leader's CPU, against the same cluster without it. The first two rows are for reference: a replica whose rounds never slow down (the behaviour before --freshness-idle-interval), and one that never goes quiet (rounds every --freshness-idle-interval, the behaviour before --freshness-quiet-interval). The others are measured once the replicas have gone quiet (no client request for --freshness-quiet-interval). A stock etcd learner's row is the floor: the leader's heartbeats to any member it replicates to.\n\n| members | leader CPU added per idle member | goal |\n|---|---|---|\n")
		for _, c := range []struct {
			row, base string
			n         int
			goal      bool
		}{{idleFastReplica, idleBase, 1, false}, {idleNoisyOne, idleBase, 1, false}, {idleOneReplica, idleBase, 1, true}, {idleFourReplica, idleBase, 4, true}, {idleStockOne, idleStockBase, 1, false}} {
			r, ok := byName[c.row]
			b, okB := byName[c.base]
			if !ok || !okB {
				continue
			}
			cost := idleCost(b, r, c.n)
			goal := "—"
			if c.goal {
				goal = "≤ 0.3 % ✗"
				if cost <= 0.3 {
					goal = "≤ 0.3 % ✓"
				}
			}
			w("| %s | %.2f %% of a core | %s |\n", c.row, cost, goal)
		}
	}

	writeScale(w, rep.Rows, byName)

	for _, sc := range []struct{ id, title string }{
		{"generator", "Load generator check (the same reads by the project's generator and by etcd's benchmark tool, run generator, tool, tool, generator; each row is its two runs together)"}, {"reads", "Reads"}, {"headers", "Answer headers (weak reads through replicas with --freshness-headers=always and off, and through one with the default on-request, asking and not asking)"}, {"writes", "Writes"}, {"watch", "Watch fan-out (events delivered under a steady write load)"}, {"catch-up", "Learner catch-up"}, {"mirror", "Mirror (initial sync: ops = keys, ops/s = keys per second; lag: ops = events timed)"},
		{"mirror-source", "Mirror source cost (the source leader's CPU under the same fixed put rate with no mirror and with a mirror watching the leader, a follower or a replica; ops = puts, errors = puts whose event the destination's watch did not deliver, p50 and p99 = mirror lag from the put to the destination's watch event)"}, {"mirror-catchup", "Mirror source cost, catch-ups (a mirror stopped while 10,000 events are written, then started: its watch delivers the backlog with no puts beside it; ops = events)"}, {"idle", "Idle replicas (leader CPU-s over a quiet window; nothing is served)"},
		{"compare", "Consistency per read path (`replica compare`: ops = successful reads, errors = failed reads, p50 and p99 = staleness at read time, not latency; details in CONSISTENCY.md)"},
		{regionsID, "Two regions (`--only regions`: voters in region A; a replica, a stock etcd learner and the clients in region B; p50 and p99 = latency seen in region B; in the WAN-bytes rows, ops = watch events delivered and p50/p99 = put to event; details in docs/multi-region.md)"},
		{fanoutID, "Fan-out (`--only fanout`: 3 primaries, 2 learner replicas and E cascaded replicas fed by them, beside 3 stock etcd voters and 2 + E stock learners; leader CPU idle (and idle with the cascaded replicas stopped by SIGSTOP, in windows alternating with it), per put at a fixed rate, per strong read at a fixed rate over the cascaded replicas beside the same rate over 2 stock followers; RSS of a cascaded replica; in the cascaded rig's put rows the last column is the CPU-s of the 2 learner replicas that feed the cascaded ones)"},
		{backupID, "Backups (`--only backup`: `etcdctl snapshot save` from the leader, a follower and a learner replica of 3 primaries, in rounds, the sources in rotating order; the leader's CPU meanwhile)"},
		{fanoutPairedID, "Fan-out, paired windows (`--only fanout-paired`: 3 primaries, 2 learner replicas and 16 cascaded replicas fed by them, no stock rig; the leader idle, and under 100 puts/s, with the cascaded replicas running and stopped by SIGSTOP, in rounds of windows AB AB then BA BA; beside it a decoy cluster — 1 primary, 2 learner replicas, 16 cascaded replicas — whose 16 run whenever the measured ones are stopped and which takes the same puts, so that both arms carry the same load beside the leader; leader CPU from its threads' schedstat, and the bytes it sends its peers)"},
		{tiersID, "Watch delivery per tier (`--only tiers`: 3 primaries, a learner replica, a cascaded replica fed by it and one fed by that one, nothing else on the host; a watch on each; p50 and p99 of the delay from the leader's acknowledgement of a put to its event, and, put by put, of what each tier adds to the one above; ops = events, errors = events that never came)"},
		{treeID, "A tree of readers (`--only tree`: 3 primaries; a learner replica feeding 4 cascaded replicas, each feeding 15; the leader alone on CPU 0, everything else on CPU 1; the cascaded replicas announce on 180 s leases; under 10 puts/s, the 64 cascaded replicas running and stopped by SIGSTOP in rounds of windows AB AB then BA BA, a decoy cluster with the same readers running whenever these are stopped; the leader's CPU from its threads' schedstat and the bytes it sends its peers; the feeders' and the readers' CPU per put; then each reader's watch delivery, the decoy stopped; first, each idle reader's RSS)"},
		{regionsSoakID, "Two regions held (`--only regions-ready`: the replica in region B a standby, ten minutes at each RTT under a light load; ops = /readyz answers ready or ops done, errors = not ready or failed)"},
	} {
		var rows []Row
		for _, r := range rep.Rows {
			if r.Scenario == sc.id {
				rows = append(rows, r)
			}
		}
		if len(rows) == 0 {
			continue
		}
		w("\n## %s\n\n| row | ops | errors | ops/s | p50 | p99 | leader CPU-s | leader CPU/10k | replica or learner CPU-s |\n|---|---|---|---|---|---|---|---|---|\n", sc.title)
		for _, r := range rows {
			if r.Ops == 0 && r.Seconds > 0 && r.Throughput == 0 {
				leader := ""
				if cpu, ok := r.CPU["leader"]; ok {
					leader = fmt.Sprintf("%.2f (%.2f %% of a core)", cpu, 100*cpu/r.Seconds)
				}
				w("| %s | | | | | | %s | | took %.1f s |\n", r.Name, leader, r.Seconds)
				continue
			}
			w("| %s | %d | %d | %.0f | %v | %v | %.2f | %.3f | %.2f |\n", r.Name, r.Ops, r.Errors, r.Throughput,
				r.P50.Round(time.Microsecond), r.P99.Round(time.Microsecond), r.CPU["leader"], r.CPUPer10k("leader"), r.CPU["extra"])
		}
		writeRounds(w, rows)
		writeNotes(w, rows)
	}
	writeGRPCProxy(w, rep.Rows, byName)
	writeStorageSuite(w, rep.Rows)
	return b.String()
}

// ratio is c's ratio among rows, and whether every row it needs is there
// with a partner (less the base) that is not 0.
func (c comparison) ratio(rows map[string]Row) (float64, bool) {
	a, okA := rows[c.row]
	p, okP := rows[c.partner]
	if !okA || !okP {
		return 0, false
	}
	va, vp := value(a, c.metric), value(p, c.metric)
	if c.base != "" {
		b, ok := rows[c.base]
		if !ok {
			return 0, false
		}
		va, vp = va-value(b, c.metric), vp-value(b, c.metric)
	}
	if vp == 0 {
		return 0, false
	}
	return va / vp, true
}

// cell is what the ratios table says of c's ratio: the ratio, with its
// error or as not resolved where the rows' windows tell, and the goal met
// or missed.
func (c comparison) cell(rows map[string]Row, ratio float64) (text, goal string) {
	if d, se, ok := c.unresolved(rows); ok {
		// What is divided by is not above this run's noise: the ratio
		// says nothing, and no goal is met or missed by it.
		goal = c.goal
		if goal == "" {
			goal = "—"
		}
		return ratioText(ratio) + "×, not resolved", fmt.Sprintf("%s: partner − base = %.3f ± %.3f (95 %% interval over the windows), not above noise", goal, d, se)
	}
	text = "**" + ratioText(ratio) + "×**"
	lo, hi := ratio, ratio
	if hw, ok := c.ratioError(rows, ratio); ok {
		text += " ± " + ratioText(hw)
		lo, hi = ratio-hw, ratio+hw
	}
	return text, goalMark(lo, hi, c.goal)
}

// goalMark is goal met (✓) or missed (✗) by a ratio within [lo, hi], or
// not told if the goal lies within; "—" for no goal.
func goalMark(lo, hi float64, goal string) string {
	switch {
	case goal == "":
		return "—"
	case met(lo, goal) && met(hi, goal):
		return goal + " ✓"
	case !met(lo, goal) && !met(hi, goal):
		return goal + " ✗"
	default:
		// The goal lies within the error: this run does not tell.
		return goal + " ? (within the error)"
	}
}

// windows are r's per-window figures if they are in metric.
func windows(r Row, metric string) []float64 {
	if r.WindowsMetric != metric {
		return nil
	}
	return r.Windows
}

// unresolved tells, for a ratio less a base whose partner and base rows
// hold per-window figures (Row.Windows, in c's metric), whether partner −
// base, what the ratio divides by (paired window by window if they have as
// many), is not above 0 by more than the half-width of its 95 % interval
// (a negative one included: the base then costs more than the partner, and
// is no base); it returns that difference and that half-width.
func (c comparison) unresolved(rows map[string]Row) (diff, hw float64, ok bool) {
	pw, bw := windows(rows[c.partner], c.metric), windows(rows[c.base], c.metric)
	if c.base == "" || len(pw) < 2 || len(bw) < 2 {
		return 0, 0, false
	}
	var se float64
	if len(pw) == len(bw) {
		diff, se = pairedMean(pw, bw, func(p, b float64) float64 { return p - b })
	} else {
		mp, vp := meanVar(pw)
		mb, vb := meanVar(bw)
		diff, se = mp-mb, math.Sqrt(vp/float64(len(pw))+vb/float64(len(bw)))
	}
	hw = t975(min(len(pw), len(bw))-1) * se
	return diff, hw, diff <= hw
}

// t975 is Student's t distribution's 97.5th percentile for df degrees of
// freedom: a 95 % interval is a mean ± t975(n − 1) standard errors over n
// windows (with 6 windows, 2.57 of them, not 2). Beyond 30, t975(30),
// slightly wide.
func t975(df int) float64 {
	table := [...]float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
		2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
		2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}
	switch {
	case df < 1:
		return math.Inf(1)
	case df <= len(table):
		return table[df-1]
	}
	return table[len(table)-1]
}

// ratioError is, for a ratio of two rows that both hold per-window
// figures in c's metric, the ratio's standard error: of the ratios of
// paired windows if they have as many, else from the windows' spread (to
// first order); less a base, from the paired differences of the three
// rows. It returns the half-width of the ratio's 95 % interval: t975 of
// the windows' degrees of freedom (the fewer's, where they differ) times
// that error.
func (c comparison) ratioError(rows map[string]Row, ratio float64) (float64, bool) {
	aw, pw := windows(rows[c.row], c.metric), windows(rows[c.partner], c.metric)
	if len(aw) < 2 || len(pw) < 2 {
		return 0, false
	}
	t := t975(min(len(aw), len(pw)) - 1)
	if c.base != "" {
		bw := windows(rows[c.base], c.metric)
		if len(aw) != len(pw) || len(bw) != len(pw) {
			return 0, false
		}
		return t * baseRatioError(aw, pw, bw, ratio), true
	}
	if slices.Contains(pw, 0) {
		return 0, false
	}
	if len(aw) == len(pw) {
		return t * pairedRatioError(aw, pw, ratio), true
	}
	ma, va := meanVar(aw)
	mp, vp := meanVar(pw)
	if ma == 0 {
		return 0, false
	}
	return t * math.Abs(ratio) * math.Sqrt(va/float64(len(aw))/(ma*ma)+vp/float64(len(pw))/(mp*mp)), true
}

// pairedRatioError is the standard error, to first order, of ratio, the
// ratio of a's mean to p's over paired windows: from the spread of the
// windows' residuals a − ratio·p, divided by p's mean. (The spread of the
// windows' own ratios a/p is not it: a window whose p is small by chance
// gives a large a/p that the ratio of the means does not have.)
func pairedRatioError(a, p []float64, ratio float64) float64 {
	res := make([]float64, len(a))
	for i := range a {
		res[i] = a[i] - ratio*p[i]
	}
	_, v := meanVar(res)
	mp, _ := meanVar(p)
	return math.Sqrt(v/float64(len(a))) / math.Abs(mp)
}

// baseRatioError is the standard error, to first order, of the ratio of
// mean(a − b) to mean(p − b) over paired windows: n and d, the rows'
// differences from the base window by window, move together through the
// base's windows, and their covariance counts.
func baseRatioError(a, p, b []float64, ratio float64) float64 {
	k := float64(len(b))
	n, d := make([]float64, len(b)), make([]float64, len(b))
	for i := range b {
		n[i], d[i] = a[i]-b[i], p[i]-b[i]
	}
	mn, vn := meanVar(n)
	md, vd := meanVar(d)
	var cov float64
	for i := range b {
		cov += (n[i] - mn) * (d[i] - md)
	}
	cov /= k - 1
	v := (vn + ratio*ratio*vd - 2*ratio*cov) / (k * md * md)
	return math.Sqrt(max(v, 0))
}

// pairedMean is the mean of f over the pairs (xs[i], ys[i]), windows of
// the same round, and its standard error: a drift in the machine's load
// from round to round weighs on both of a pair alike and drops out.
func pairedMean(xs, ys []float64, f func(x, y float64) float64) (mean, se float64) {
	ds := make([]float64, len(xs))
	for i := range xs {
		ds[i] = f(xs[i], ys[i])
	}
	m, v := meanVar(ds)
	return m, math.Sqrt(v / float64(len(ds)))
}

// meanVar is the mean and the sample variance of xs (two or more).
func meanVar(xs []float64) (mean, variance float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		variance += (x - mean) * (x - mean)
	}
	return mean, variance / float64(len(xs)-1)
}

func met(ratio float64, goal string) bool {
	var v float64
	switch {
	case strings.HasPrefix(goal, "≥"):
		fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(goal, "≥")), "%g", &v)
		return ratio >= v
	case strings.HasPrefix(goal, "≤"):
		fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(goal, "≤")), "%g", &v)
		return ratio <= v
	case strings.HasPrefix(goal, "±"):
		fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(goal, "±")), "%g", &v)
		return ratio >= 1-v/100 && ratio <= 1+v/100
	}
	return false
}

// writeRounds writes, for the rows that counted them, the ReadIndex rounds
// the replicas asked the leader for: what the leader's cost is per round
// and how many reads a round carried, the two factors of its cost per read.
func writeRounds(w func(string, ...any), rows []Row) {
	first := true
	for _, r := range rows {
		if r.LeaderRounds <= 0 {
			continue
		}
		if first {
			w("\nReadIndex rounds the replicas asked the leader for (from their `/metrics`: freshness rounds, less those obtained through another replica; background rounds included):\n\n| row | leader rounds | rounds/s | reads per round | leader CPU-ms per round |\n|---|---|---|---|---|\n")
			first = false
		}
		w("| %s | %.0f | %.0f | %.1f | %.3f |\n", r.Name, r.LeaderRounds, r.LeaderRounds/r.Seconds, float64(r.Ops)/r.LeaderRounds, 1000*r.CPU["leader"]/r.LeaderRounds)
	}
}

// writeNotes writes the notes of rows that have one.
func writeNotes(w func(string, ...any), rows []Row) {
	first := true
	for _, r := range rows {
		if r.Note == "" {
			continue
		}
		if first {
			w("\n")
			first = false
		}
		w("- %s: %s\n", r.Name, r.Note)
	}
}

// ratioText is a ratio with two decimals, or two significant digits
// below 0.1, so that a ratio of a few thousandths does not read as 0.
func ratioText(r float64) string {
	if r >= 0.1 {
		return strconv.FormatFloat(r, 'f', 2, 64)
	}
	return strconv.FormatFloat(r, 'g', 2, 64)
}
