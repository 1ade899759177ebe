package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/test/harness"
)

// Rows of the mirror-source scenario, shared with the report.
const (
	mirrorSrcNone     = "source leader, no mirror"
	mirrorSrcLeader   = "source leader, a mirror watching the leader"
	mirrorSrcFollower = "source leader, a mirror watching a follower"
	mirrorSrcReplica  = "source leader, a mirror watching a replica"
)

// mirrorSourceArm is one configuration of the mirror-source scenario and
// what its windows measured: the mirror's --source-endpoints, or none for
// no mirror.
type mirrorSourceArm struct {
	row, endpoint, how string
	windows, puts      int
	// leaderEvents are the watch events the leader sent over the
	// windows: about one per put when the mirror's watch is on it.
	leaderEvents float64
	// rounds are the ReadIndex rounds the replica asked the leader for
	// over the windows (its freshness rounds).
	rounds float64
	// perWindow is the leader's CPU-s per 10,000 puts in each window.
	perWindow []float64
	// servingWindow is, by the leader's CPU profile, its CPU-s per 10,000
	// puts serving watches and gRPC frames in each window; prof sums the
	// profiles.
	servingWindow []float64
	// replicationWindow is, likewise, its CPU-s per 10,000 puts in raft
	// and its peer transport.
	replicationWindow []float64
	prof              cpuProfile
	lag               []Result
	cpu               map[string]float64
	seconds           float64
}

// mirrorSourceScenario measures what a mirror costs its source's leader,
// watching the leader or a replica (issue 25). A source of 3 voters and a
// replica takes puts at a fixed rate through its leader, in windows of
// p.dur with no mirror, with `replica mirror` given only the leader's client
// URL (so that its watch is on the leader: given every voter's, the watch
// lands on one of them), and with it given only the replica's. The arms
// alternate, p.mirrorSourceWindows windows each, so that a drift in the
// machine's load weighs on all alike; the mirror starts before each of its
// windows and is measured once a probe has come through it. The report
// compares the leader's CPU per put each mirror adds to no mirror's.
//
// On one machine, a mirror and its destination cluster take CPU from the
// source's members, and a leader with less CPU batches more and spends less
// per put: next to no mirror, any mirror lowers the leader's CPU per put.
// A fourth arm, the mirror watching a follower, has that load with no
// watch on the leader or the replica: the report compares against it too.
func mirrorSourceScenario(p params) ([]Row, error) {
	var rows []Row
	err := scenario("mirror-source", func(r *runner) {
		// --enable-pprof: the leader's CPU profile tells its watch
		// serving apart from the puts' cost (see profileCPU).
		tp := understudyTopologyWith(r, []string{"--enable-pprof"}, p.replicaArgs...)
		dst := harness.StartCluster(r, harness.ClusterConfig{N: 1, Token: "bench-dest"})
		dc := dst.Client(r)
		defer isolateSourceLeader(r, tp, dst)()
		// The puts go to the leader; the bench's own source watch (for the
		// lag from the source's watch event) is on a follower, off the
		// leader, in the mirror arms only.
		put := clients(r, tp.leader.ClientURL, 1)[0]
		srcWatch := clients(r, tp.follower.ClientURL, 1)[0]
		arms := []*mirrorSourceArm{
			{row: mirrorSrcNone},
			{row: mirrorSrcLeader, endpoint: tp.leader.ClientURL, how: "--source-endpoints the leader's client URL only, so that its watch is on the leader"},
			{row: mirrorSrcFollower, endpoint: tp.follower.ClientURL, how: "--source-endpoints a follower's client URL only"},
			{row: mirrorSrcReplica, endpoint: tp.extraURL, how: "--source-endpoints the replica's client URL"},
		}
		// A window not counted first: the leader's first seconds after
		// the cluster's start and the joins cost it more.
		mirrorSourceWindow(r, tp, p, &mirrorSourceArm{row: "warm-up, no mirror"}, put, srcWatch, dc, dst.Endpoints()[0])
		var order []string
		for w := range p.mirrorSourceWindows {
			for i := range arms {
				// none, leader, follower, replica; then the other way; …
				a := arms[i]
				if w%2 == 1 {
					a = arms[len(arms)-1-i]
				}
				mirrorSourceWindow(r, tp, p, a, put, srcWatch, dc, dst.Endpoints()[0])
				if w < 2 {
					order = append(order, strings.TrimPrefix(a.row, "source leader, "))
				}
			}
			if leader := tp.cluster.Leader(r); leader != tp.leader {
				r.Fatalf("the source's leader moved from %s to %s: its CPU is no longer one process's", tp.leader.Name, leader.Name)
			}
			// Each round writes about 250 MB of values: 8 would pass etcd's
			// default quota of 2 GiB.
			reclaim(r, tp, dst)
		}
		for _, a := range arms {
			rows = append(rows, a.result(p, order), a.servingResult())
		}
		rows = append(rows, mirrorSyncRows(r, tp, p, dst, p.mirrorSyncKeys, p.mirrorSourceWindows)...)
	})
	return rows, err
}

// mirrorCatchUpScenario is the mirror-source scenario's catch-ups (see
// mirrorCatchUpRows), in a topology of their own: what a mirror's watch
// costs the source's leader, with no puts beside it.
func mirrorCatchUpScenario(p params) ([]Row, error) {
	var rows []Row
	err := scenario("mirror-catchup", func(r *runner) {
		tp := understudyTopology(r, p.replicaArgs...)
		dst := harness.StartCluster(r, harness.ClusterConfig{N: 1, Token: "bench-dest"})
		defer isolateSourceLeader(r, tp, dst)()
		rows = mirrorCatchUpRows(r, tp, p, dst, p.mirrorSyncKeys, p.mirrorSourceWindows)
	})
	return rows, err
}

// isolateSourceLeader puts the source's leader alone on one CPU and every
// other process of tp and dst on the others; the returned function undoes
// it.
func isolateSourceLeader(r *runner, tp *topology, dst *harness.Cluster) func() {
	others := []int{}
	for _, m := range append(append([]*harness.Member{}, tp.cluster.Members...), dst.Members...) {
		if m != tp.leader {
			others = append(others, m.Proc.PID())
		}
	}
	for role, pid := range tp.pids() {
		if role != "leader" && pid > 0 {
			others = append(others, pid)
		}
	}
	pinned, undo, err := isolateLeader(tp.leader.Proc.PID(), others...)
	if err != nil {
		r.Fatalf("%v", err)
	}
	r.Logf("CPUs: %s", pinned)
	return undo
}

// mirrorSourceWindow measures one window of arm a: the mirror started (if
// the arm has one) and streaming, then the puts and the CPU.
func mirrorSourceWindow(r *runner, tp *topology, p params, a *mirrorSourceArm, put, srcWatch, dc *clientv3.Client, dstEndpoint string) {
	lr := lagRun{put: put, srcWatch: srcWatch, rate: p.mirrorSourceRate, dur: p.dur, pad: p.mirrorSourceValue, cpu: tp.pids(), profile: tp.leader.ClientURL}
	if a.endpoint != "" {
		bin, args := understudyMirror().cmd(tp.cluster.Bins, a.endpoint, dstEndpoint)
		proc := harness.Start(r, harness.ProcConfig{Name: "mirror", Bin: bin, Args: args})
		defer proc.Stop()
		waitStreaming(r, put, dc, a.row)
		lr.dst = dc
		lr.cpu["mirror"] = proc.PID()
	}
	events0 := leaderWatchEvents(r, tp.leader.ClientURL)
	rounds0, err := leaderRounds(tp.replicaURLs)
	if err != nil {
		r.Fatalf("%s: rounds before: %v", a.row, err)
	}
	m := lr.measure()
	if m.profileErr != nil {
		r.Fatalf("%s: %v", a.row, m.profileErr)
	}
	// A profile that caught little of the CPU, or none of the watch the
	// leader serves, would make the serving rows say nothing: etcd's or
	// grpc-go's functions renamed (see profile.go), or the profiler off.
	if m.profile.total < 0.5*m.cpu["leader"] {
		r.Fatalf("%s: the leader's CPU profile caught %.2f CPU-s of the %.2f /proc counted", a.row, m.profile.total, m.cpu["leader"])
	}
	if a.row == mirrorSrcLeader && m.profile.watch == 0 {
		r.Fatalf("%s: the leader's CPU profile shows no sample in etcd's watch code (watchCode in profile.go matches none of its functions?)", a.row)
	}
	events := leaderWatchEvents(r, tp.leader.ClientURL) - events0
	rounds1, err := leaderRounds(tp.replicaURLs)
	if err != nil {
		r.Fatalf("%s: rounds after: %v", a.row, err)
	}
	a.rounds += rounds1 - rounds0
	if a.row == mirrorSrcLeader && events < float64(m.puts)/2 {
		r.Fatalf("%s: the leader sent %.0f watch events for %d puts: the mirror's watch is not on it", a.row, events, m.puts)
	}
	a.leaderEvents += events
	a.perWindow = append(a.perWindow, m.cpu["leader"]*10000/float64(max(m.puts, 1)))
	a.servingWindow = append(a.servingWindow, m.profile.serving()*10000/float64(max(m.puts, 1)))
	a.prof.add(m.profile)
	a.replicationWindow = append(a.replicationWindow, m.profile.replication*10000/float64(max(m.puts, 1)))
	a.windows++
	a.puts += m.puts
	a.seconds += m.window.Seconds()
	if a.cpu == nil {
		a.cpu = map[string]float64{}
	}
	for role, s := range m.cpu {
		a.cpu[role] += s
	}
	if a.endpoint != "" {
		a.lag = append(a.lag, m.lag)
	}
	r.Logf("%-46s %d puts in %v, leader %.3f CPU-s (%.1f %% of a core, %.3f CPU-s/10k puts); lag p50 %v p99 %v (%d of %d); the leader sent %.0f watch events; the replica's rounds: %.0f", a.row, m.puts, m.window.Round(time.Millisecond),
		m.cpu["leader"], 100*m.cpu["leader"]/m.window.Seconds(), m.cpu["leader"]*10000/float64(max(m.puts, 1)), m.lag.P50, m.lag.P99, m.lag.Ops, m.puts, events, rounds1-rounds0)
	r.Logf("%-46s by profile: %.2f CPU-s in all, %.2f serving watches, %.2f writing gRPC frames, %.2f replicating (%.3f CPU-s/10k puts serving)", a.row, m.profile.total, m.profile.watch, m.profile.writer, m.profile.replication, m.profile.serving()*10000/float64(max(m.puts, 1)))
}

// result is the arm's row: its windows added up. Ops are the puts (the
// leader's CPU/10k is per 10,000 puts, whatever rate the pacer held on a
// busy machine); with a mirror, errors are puts whose event was not timed
// at the destination, and p50 and p99 are the windows' lag percentiles
// from the put, averaged.
func (a *mirrorSourceArm) result(p params, order []string) Row {
	res := Result{}
	if len(a.lag) > 0 {
		res = combineAll(a.lag)
		res.Errors = max(a.puts-res.Ops, 0)
	}
	// The CPU was measured over the puts' windows, not the wait for the
	// last events after them: so are the row's seconds.
	res.Ops, res.Seconds, res.CPU = a.puts, a.seconds, a.cpu
	if res.Seconds > 0 {
		res.Throughput = float64(res.Ops) / res.Seconds
	}
	var note string
	if a.endpoint == "" {
		note = fmt.Sprintf("every row: %d windows of %v at %d puts/s of %d B through the leader, the arms in the order %s, …; the leader alone on one CPU, every other process (the mirror and both clusters' other members included) on the others; ", a.windows, p.dur, p.mirrorSourceRate, p.mirrorSourceValue, strings.Join(order, ", "))
	} else {
		note = "`replica mirror` with " + a.how + ", started before each window and measured once a probe came through; "
	}
	note += fmt.Sprintf("the leader sent %.0f watch events (etcd_debugging_mvcc_events_total) for the %d puts; the replica asked it for %.0f ReadIndex rounds (%.1f/s); leader CPU-s/10k puts per window: %s",
		a.leaderEvents, a.puts, a.rounds, a.rounds/max(a.seconds, 1e-9), windowsText(a.perWindow, 3))
	return Row{Scenario: "mirror-source", Name: a.row, Note: note, Windows: a.perWindow, WindowsMetric: "leader CPU/10k", Result: res}
}

// servingRow is the name of row's figures by the leader's CPU profile.
func servingRow(row string) string {
	return strings.Replace(row, "source leader,", "source leader serving watches and writing gRPC frames (CPU profile),", 1)
}

// servingResult is the arm's row by the leader's CPU profiles: the CPU
// it spent serving watches and gRPC frames (see profileCPU), per window.
func (a *mirrorSourceArm) servingResult() Row {
	res := Result{Ops: a.puts, Seconds: a.seconds, CPU: map[string]float64{"leader": a.prof.serving()}}
	if res.Seconds > 0 {
		res.Throughput = float64(res.Ops) / res.Seconds
	}
	cpu := a.cpu["leader"]
	note := fmt.Sprintf("the leader's CPU profile over each window (100 samples a second; %.1f CPU-s in all, %.0f %% of what /proc counted): %.2f CPU-s in etcd's watch server and watchable store and %.2f in grpc-go's loopy writer otherwise (the frames written to every client: the puts' answers too, alike in every arm), not the garbage collector's share; serving CPU-s/10k puts per window: %s. Replicating (raft and rafthttp, the rounds' heartbeats included), for comparison: %.2f CPU-s, per 10k puts per window: %s",
		a.prof.total, 100*a.prof.total/max(cpu, 1e-9), a.prof.watch, a.prof.writer, windowsText(a.servingWindow, 3), a.prof.replication, windowsText(a.replicationWindow, 3))
	return Row{Scenario: "mirror-source", Name: servingRow(a.row), Note: note, Windows: a.servingWindow, WindowsMetric: "leader CPU/10k", Result: res}
}

// leaderWatchEvents is how many watch events the member at url has sent
// (etcd_debugging_mvcc_events_total in its /metrics).
func leaderWatchEvents(r *runner, url string) float64 {
	fams, err := scrape(url)
	if err != nil {
		r.Fatalf("watch events: %v", err)
	}
	var n float64
	if f := fams["etcd_debugging_mvcc_events_total"]; f != nil {
		for _, m := range f.Metric {
			n += m.GetCounter().GetValue()
		}
	}
	return n
}

// windowsText lists per-window figures with prec decimals.
func windowsText(xs []float64, prec int) string {
	var parts []string
	for _, x := range xs {
		parts = append(parts, strconv.FormatFloat(x, 'f', prec, 64))
	}
	return strings.Join(parts, ", ")
}

// wipe deletes every key of the destination c.
func wipe(r *runner, c *harness.Cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	resp, err := c.Client(r).Delete(ctx, "\x00", clientv3.WithFromKey())
	if err != nil {
		r.Fatalf("wipe the destination: %v", err)
	}
	r.Logf("deleted the destination's %d keys", resp.Deleted)
}

// compactDest compacts and defragments the destination c only: the
// source's history is what stopped mirrors resume from.
func compactDest(r *runner, c *harness.Cluster) {
	compactAll(r, c, nil)
}

// reclaim compacts the source and the destination at their newest
// revisions and defragments every member (the source's replica too), so
// that the put windows (4 × 10 s of 32 KiB values a round) and the rows
// after them stay well inside the backend quota.
func reclaim(r *runner, tp *topology, dst *harness.Cluster) {
	compactAll(r, tp.cluster, []string{tp.extraURL})
	compactAll(r, dst, nil)
}

// compactAll compacts c at its current revision and defragments its
// members and the extra endpoints (its replicas).
func compactAll(r *runner, c *harness.Cluster, extra []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cli := c.Client(r)
	resp, err := cli.Get(ctx, "reclaim")
	if err != nil {
		r.Fatalf("reclaim: %v", err)
	}
	// Nothing written since the last compaction: already compacted.
	if _, err := cli.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
		r.Fatalf("reclaim: compact at %d: %v", resp.Header.Revision, err)
	}
	eps := append(c.Endpoints(), extra...)
	for _, ep := range eps {
		if _, err := cli.Defragment(ctx, ep); err != nil {
			r.Fatalf("reclaim: defragment %s: %v", ep, err)
		}
	}
	r.Logf("compacted at revision %d and defragmented %v", resp.Header.Revision, eps)
}
