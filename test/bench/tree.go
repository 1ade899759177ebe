package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/understudy-kv/understudy/test/harness"
)

// treeID is the tree scenario's Row.Scenario.
const treeID = "tree"

// Kinds of the tree scenario's rows, named treeName(kind).
const (
	treePutsRunning = "puts at the leader, the tree's cascaded replicas running (a decoy cluster's stopped)"
	treePutsStopped = "puts at the leader, the same cascaded replicas stopped (SIGSTOP; a decoy cluster's running)"
	treeFeeders     = "the feeders' CPU per put: the learner replica and the cascaded replicas of tier 2"
	treeReaders     = "every cascaded replica's CPU per put, together"
	treeRSS         = "RSS per idle reader, the cascaded replicas"
	treeRSSLearner  = "RSS, the learner replica"
)

// Rows of the tree's watch delivery, by tier.
var treeTiers = []string{
	"delivery at tier 0, the leader",
	"delivery at tier 1, the learner replica",
	"delivery at tier 2, the cascaded replicas it feeds",
	"delivery at tier 3, the cascaded replicas those feed",
}

// Metrics of the tree's CPU rows beside the leader's.
const (
	metricFeederCPU = "feeder CPU/10k"
	metricReaderCPU = "reader CPU/10k"
)

func treeName(kind string) string { return "tree: " + kind }

// treeRate is the tree scenario's puts a second: a rate this host
// carries with 64 readers beside 3 primaries, the leader alone on one CPU
// and everything else on the other. A reader spends about 0.7 ms of CPU
// a put at this rate (its upkeep spread over the puts): at 20 puts/s
// the 64 wanted most of that CPU, and delivery p99 reached 125 ms at the
// learner replica and 1.8 s at the slowest reader; at 100, as
// fanout-paired, they would want more than it has.
const treeRate = 10

// treeAnnounceTTL is the cascaded replicas' --resolver-ttl in the tree:
// longer than they are ever stopped (two windows in a row, as rounds
// alternate AB BA) and a keep-alive period (a third of it). With the
// default 10 s, and then 60 s, leases ended while they were stopped, and
// their announcing again (a lease, a put, the old lease's revoke, each
// forwarded to the leader and applied by every reader) landed in the
// running arm: 1.14× the leader's peer bytes per put, in the windows after
// two stopped ones.
const treeAnnounceTTL = "180"

// treeScenario measures issue 58's 64 readers: one learner replica
// feeding p.treeMid cascaded replicas, each feeding p.treeLeaves more, on
// this host beside 3 primaries, at treeRate puts/s (a rate the host
// carries: a put applied by every reader, one CPU for them all). As in
// fanout-paired, the leader has CPU 0 alone and a decoy cluster with the
// same readers runs whenever the measured ones are stopped (SIGSTOP), in
// rounds of put windows AB AB then BA BA: the leader's CPU and the bytes
// it sends its peers per put, running vs stopped; beside it, the CPU of
// the feeders (the learner replica and tier 2) and of every reader, per
// put. Then, with the decoy stopped, each reader's watch delivery from the
// put's acknowledgement, by tier, and every reader's p99 against the
// learner replica's; first, idle, each reader's RSS and where it goes.
func treeScenario(p params) ([]Row, error) {
	var rows []Row
	p.pairedPutRate, p.pairedPutWindow = treeRate, p.treeWindow
	err := scenario(treeID, func(r *runner) {
		g := startPairedRigWith(r, p, treeLayout)
		defer g.undo()
		rows = append(rows, g.rss(r, g.settle(r))...)
		arms := map[string]*scaleArm{}
		for _, k := range []string{treePutsRunning, treePutsStopped} {
			arms[k] = newScaleArm(0, k, "leader CPU/10k")
			arms[k+pairedSentSuffix] = newScaleArm(0, k+pairedSentSuffix, metricPeerPerPut)
		}
		feeders, readers := newScaleArm(0, treeFeeders, metricFeederCPU), newScaleArm(0, treeReaders, metricReaderCPU)
		feederPIDs := append(g.fan.pids(g.fan.replicas), g.fan.pids(g.fan.cascaded[:p.treeMid])...)
		puts := [2]func(){
			func() {
				f0, c0 := schedAll(r, feederPIDs), schedAll(r, g.fan.pids(g.fan.cascaded))
				g.putWindow(r, arms, treePutsRunning, false)
				res := arms[treePutsRunning].results[len(arms[treePutsRunning].results)-1]
				if res.Ops > 0 {
					// Their own puts and window; the leader's CPU is not theirs.
					res := Result{Ops: res.Ops, Seconds: res.Seconds}
					feeders.add(res, (schedAll(r, feederPIDs)-f0)*1e4/float64(res.Ops))
					readers.add(res, (schedAll(r, g.fan.pids(g.fan.cascaded))-c0)*1e4/float64(res.Ops))
				}
			},
			func() { g.putWindow(r, arms, treePutsStopped, true) },
		}
		for k := range p.pairedRounds {
			a, b := k%2, 1-k%2
			puts[a]()
			puts[b]()
		}
		if l := g.c.Leader(r); l != g.leader {
			r.Fatalf("the leader moved from %s to %s: its CPU is no longer one process's", g.leader.Name, l.Name)
		}
		for _, k := range []string{treePutsRunning, treePutsStopped} {
			for _, name := range []string{k, k + pairedSentSuffix} {
				a := arms[name]
				row := a.row(p)
				row.Scenario, row.Name = treeID, treeName(name)
				row.Note = fmt.Sprintf("per window of %v at %d puts/s (the decoy at the same rate), %s: %s", p.pairedPutWindow, p.pairedPutRate, a.metric, windowsText(a.windows, 3))
				rows = append(rows, row)
			}
		}
		for _, a := range []*scaleArm{feeders, readers} {
			row := a.row(p)
			row.Scenario, row.Name = treeID, treeName(a.kind)
			row.Note = fmt.Sprintf("CPU-s (schedstat) per 10,000 puts in the running arm's windows: %s", windowsText(a.windows, 3))
			rows = append(rows, row)
		}
		rows = append(rows, g.treeDelivery(r, p)...)
	})
	return rows, err
}

// treeLayout is the tree scenario's readers: a learner replica, p.treeMid
// cascaded replicas fed by it, and p.treeLeaves fed by each of those.
// fanoutRig.cascaded holds tier 2, then tier 3 by feeder.
func treeLayout(r *runner, c *harness.Cluster, p params, prefix string) *fanoutRig {
	f := &fanoutRig{}
	f.replicas = []*harness.Replica{harness.StartReplica(r, c, harness.ReplicaConfig{Name: prefix + "r1", Extra: p.replicaArgs})}
	extra := append(slices.Clone(p.replicaArgs), "--resolver-ttl", treeAnnounceTTL)
	for i := range p.treeMid {
		f.cascaded = append(f.cascaded, harness.StartReplica(r, c, harness.ReplicaConfig{Name: fmt.Sprintf("%sm%d", prefix, i+1), Upstream: []string{f.replicas[0].ClientURL}, Extra: extra}))
	}
	for i := range p.treeMid {
		for j := range p.treeLeaves {
			f.cascaded = append(f.cascaded, harness.StartReplica(r, c, harness.ReplicaConfig{Name: fmt.Sprintf("%sl%d-%d", prefix, i+1, j+1), Upstream: []string{f.cascaded[i].ClientURL}, Extra: extra}))
		}
	}
	return f
}

// settle waits, before the idle readers' RSS, until every reader of both
// clusters runs its background rounds at the quiet interval (as waitQuiet)
// or, if some do not within that interval and two minutes, logs which:
// RSS needs no quiet, and a feeder kept awake is a finding, not a failure.
func (g *pairedRig) settle(r *runner) (awake []string) {
	q := quietInterval(g.p.replicaArgs)
	if q <= 0 {
		return nil
	}
	names := map[string]string{}
	for _, f := range []*fanoutRig{g.fan, g.decoy.fan} {
		for _, rep := range append(slices.Clone(f.replicas), f.cascaded...) {
			names[rep.ClientURL] = rep.Name
		}
	}
	deadline := time.Now().Add(q + 2*time.Minute)
	for {
		awake = nil
		for u, name := range names {
			fams, err := scrape(u)
			if err != nil {
				r.Fatalf("tree: %s's metrics: %v", name, err)
			}
			var period float64
			if f := fams["understudy_replica_freshness_period_seconds"]; f != nil && len(f.Metric) > 0 {
				period = f.Metric[0].GetGauge().GetValue()
			}
			if time.Duration(period*float64(time.Second)) != q {
				awake = append(awake, fmt.Sprintf("%s (every %vs)", name, period))
			}
		}
		if len(awake) == 0 {
			r.Logf("every reader quiet")
			return nil
		}
		if time.Now().After(deadline) {
			slices.Sort(awake)
			r.Logf("not quiet after %v: %s", q+2*time.Minute, strings.Join(awake, ", "))
			return awake
		}
		<-time.After(2 * time.Second)
	}
}

// schedAll is the CPU-seconds the processes pids have run (schedSeconds).
func schedAll(r *runner, pids []int) float64 {
	var s float64
	for _, pid := range pids {
		s += mustSched(r, pid)
	}
	return s
}

// treeDelivery measures each reader's watch delivery with the decoy's
// readers stopped: rows by tier (every reader of a tier pooled), the
// worst reader's p99 and how far it is from the learner replica's.
func (g *pairedRig) treeDelivery(r *runner, p params) []Row {
	defer g.swap(r, false)()
	mid := g.fan.cascaded[:p.treeMid]
	leaves := g.fan.cascaded[p.treeMid:]
	tiers := [][]string{{g.leader.ClientURL}, g.fan.urls(g.fan.replicas), g.fan.urls(mid), g.fan.urls(leaves)}
	var urls []string
	for _, t := range tiers {
		urls = append(urls, t...)
	}
	// Resumed, a reader knows no leader until its upstream is heard again:
	// a watch that requires one is refused meanwhile.
	for _, u := range urls {
		cli := clients(r, u, 1)[0]
		harness.WaitFor(r, time.Minute, u+" serves strong reads", func() (bool, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := cli.Get(ctx, "bench/tree/ready")
			return err == nil, err
		})
		cli.Close()
	}
	var runs []delivered
	for k := range p.treeDeliveryRounds {
		runs = append(runs, deliveries(r, g.put, urls, fmt.Sprintf("bench/tree/%d/", k), p.treeDeliveryPuts, treeRate))
	}
	// Each reader's p99 over every run.
	p99 := make([]time.Duration, len(urls))
	for i := range urls {
		var all []time.Duration
		for _, d := range runs {
			ds, _ := d.delays(i)
			all = append(all, ds...)
		}
		slices.Sort(all)
		p99[i] = percentile(all, 0.99)
	}
	learner := p99[1]
	var rows []Row
	first := 0
	for t, us := range tiers {
		var all []time.Duration
		missed := 0
		for i := first; i < first+len(us); i++ {
			for _, d := range runs {
				ds, m := d.delays(i)
				all = append(all, ds...)
				missed += m
			}
		}
		slices.Sort(all)
		own := p99[first : first+len(us)]
		worst := slices.Max(own)
		var each []float64
		for _, d := range own {
			each = append(each, ms(d))
		}
		row := Row{Scenario: treeID, Name: treeName(treeTiers[t]), Result: Result{Ops: len(all), Errors: missed, Seconds: float64(len(runs)*p.treeDeliveryPuts) / treeRate, P50: percentile(all, 0.5), P99: percentile(all, 0.99)},
			Figures: map[string]float64{"worst reader p99 ms": ms(worst), "worst reader p99 less the learner replica's ms": ms(worst - learner)},
			Note: fmt.Sprintf("%d readers, %d rounds of %d puts at %d/s through the leader, the decoy stopped; the delay from the put's acknowledgement to its event, every reader's pooled; each reader's p99, ms: %s; the worst %.1f ms, %.1f ms past the learner replica's (goal: within 50 ms)",
				len(us), len(runs), p.treeDeliveryPuts, treeRate, windowsText(each, 1), ms(worst), ms(worst-learner))}
		rows = append(rows, row)
		r.Logf("%-70s p50 %v p99 %v, worst reader's p99 %v", row.Name, row.P50, row.P99, worst)
		first += len(us)
	}
	return rows
}

// rss are the idle readers' resident sets: each cascaded replica's, and
// where a cascaded replica's goes by its Go runtime's own account (the
// mean over them).
func (g *pairedRig) rss(r *runner, awake []string) []Row {
	learner := newScaleArm(0, treeRSSLearner, metricRSS)
	for _, rep := range g.fan.replicas {
		learner.windows = append(learner.windows, rssMiB(rep.PID()))
	}
	readers := newScaleArm(0, treeRSS, metricRSS)
	parts := map[string]float64{}
	names := []string{"process_resident_memory_bytes", "go_memstats_heap_inuse_bytes", "go_memstats_heap_idle_bytes", "go_memstats_heap_released_bytes", "go_memstats_stack_inuse_bytes", "go_memstats_sys_bytes", "go_memstats_next_gc_bytes", "etcd_mvcc_db_total_size_in_bytes"}
	// Resident pages by kind, and each process's share of those it shares
	// (the binary's, mapped by every reader on the host): the mean.
	kinds := []struct{ file, field string }{{"status", "RssAnon"}, {"status", "RssFile"}, {"smaps_rollup", "Pss"}, {"smaps_rollup", "Pss_Anon"}}
	byKind := make([]float64, len(kinds))
	for _, rep := range g.fan.cascaded {
		readers.windows = append(readers.windows, rssMiB(rep.PID()))
		for i, k := range kinds {
			byKind[i] += procMiB(rep.PID(), k.file, k.field) / float64(len(g.fan.cascaded))
		}
		fams, err := scrape(rep.ClientURL)
		if err != nil {
			r.Fatalf("tree: %s's metrics: %v", rep.Name, err)
		}
		for _, n := range names {
			if f := fams[n]; f != nil && len(f.Metric) > 0 {
				parts[n] += f.Metric[0].GetGauge().GetValue() / float64(len(g.fan.cascaded))
			}
		}
	}
	var where []string
	for i, k := range kinds {
		where = append(where, fmt.Sprintf("%s %.1f MiB", k.field, byKind[i]))
	}
	for _, n := range names {
		where = append(where, fmt.Sprintf("%s %.1f MiB", n, parts[n]/(1<<20)))
	}
	var rows []Row
	for _, a := range []*scaleArm{readers, learner} {
		row := a.row(g.p)
		row.Scenario, row.Name = treeID, treeName(a.kind)
		m, _ := meanVar(a.windows)
		row.Figures = map[string]float64{"mean MiB": m, "max MiB": slices.Max(a.windows)}
		quiet := "every reader of both clusters quiet"
		if len(awake) > 0 {
			quiet = "no puts; not quiet, of both clusters' readers: " + strings.Join(awake, ", ")
		}
		row.Note = fmt.Sprintf("VmRSS, MiB, per process, idle (%s): %s", quiet, windowsText(a.windows, 1))
		if a == readers {
			row.Note += "; the mean by kind (/proc: RssAnon and RssFile, the binary's pages among the latter, shared by every reader; Pss, each shared page divided among the processes that map it) and by the Go runtime's account: " + strings.Join(where, ", ")
			for i, k := range kinds {
				row.Figures["mean "+k.field+" MiB"] = byKind[i]
			}
		}
		rows = append(rows, row)
		r.Logf("%-60s mean %.1f MiB, max %.1f", row.Name, m, slices.Max(a.windows))
	}
	r.Logf("where a cascaded replica's memory goes (mean): %s", strings.Join(where, ", "))
	return rows
}

// treeComparisons are the report's ratios of the tree rows.
func treeComparisons() []comparison {
	how := fmt.Sprintf("%d puts/s, windows alternating, a decoy cluster's readers running whenever these are stopped", treeRate)
	return []comparison{
		{"leader CPU per put with a tree of 64 cascaded replicas running vs the same stopped (SIGSTOP), " + how, treeName(treePutsRunning), treeName(treePutsStopped), "leader CPU/10k", "≤ 1.1", ""},
		{"bytes the leader sends its peers per put with the tree's 64 cascaded replicas running vs stopped, " + how, treeName(treePutsRunning + pairedSentSuffix), treeName(treePutsStopped + pairedSentSuffix), metricPeerPerPut, "", ""},
		{"watch delivery p99, the tree's tier 3 vs its learner replica", treeName(treeTiers[3]), treeName(treeTiers[1]), "p99", "", ""},
	}
}
