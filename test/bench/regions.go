package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/understudy-kv/understudy/test/harness"
	"github.com/understudy-kv/understudy/wire"
)

// askedOnly are the scenarios a run without --only leaves out: they take
// longer than the full run's budget allows, and run with --only.
var askedOnly = map[string]bool{"regions": true, "regions-ready": true, "scale": true, "fanout": true, "fanout-paired": true, "backup": true, grpcProxyID: true, tiersID: true, treeID: true, storageSuiteID: true}

const (
	// regionsID is the Row.Scenario of the regions scenario's rows.
	regionsID = "regions"
	// regionJitter is the most each chunk crossing the WAN waits beyond
	// half the RTT.
	regionJitter = 2 * time.Millisecond
	// regionBound is the bounded reads' budget (understudy-max-staleness);
	// regionBoundBelow one below what a replica can prove at 150 ms RTT.
	regionBound      = "1s"
	regionBoundBelow = "100ms"
	// regionPutRate is the puts/s under the watchers of the WAN-bytes rows.
	regionPutRate = 200
)

// regionRTTs are the round-trip times between the regions measured; 0 is
// the one-region reference.
var regionRTTs = []time.Duration{0, 50 * time.Millisecond, 150 * time.Millisecond}

// regionClients are the concurrent clients in region B each path is
// measured with.
var regionClients = []int{1, 32}

// regionPath is one way a client in region B is served.
type regionPath struct {
	name string
	// only1: measured at 1 client only.
	only1 bool
	op    func(ctx context.Context, cli *clientv3.Client, w int) error
	// on picks the clients of the path's endpoint.
	on func(ep regionEndpoints) []*clientv3.Client
	// rounds: count the replica's ReadIndex rounds during the row.
	rounds bool
	// tally, if set, is told the answer headers of each read (bounded
	// reads), and says in the row's note what bounds they carried.
	tally *boundTally
}

// regionEndpoints are region B's clients of each endpoint.
type regionEndpoints struct {
	replica, learner, remote []*clientv3.Client
	// via are the clients of the replica that asks a hub in region A.
	via []*clientv3.Client
}

func regionGet(opts ...clientv3.OpOption) func(context.Context, *clientv3.Client, int) error {
	return func(ctx context.Context, cli *clientv3.Client, w int) error {
		_, err := cli.Get(ctx, "bench/key/"+strconv.Itoa(w*7919%1000), opts...)
		return err
	}
}

// regionBounded is a serializable read with the bound (a Go duration) in
// its metadata, whose answer headers go to t.
func regionBounded(bound string, t *boundTally) func(context.Context, *clientv3.Client, int) error {
	return func(ctx context.Context, cli *clientv3.Client, w int) error {
		ctx = metadata.AppendToOutgoingContext(ctx, wire.MaxStalenessKey, bound, wire.FreshnessKey, "1")
		var md metadata.MD
		_, err := pb.NewKVClient(cli.ActiveConnection()).Range(ctx,
			&pb.RangeRequest{Key: []byte("bench/key/" + strconv.Itoa(w*7919%1000)), Serializable: true}, grpc.Header(&md))
		if err == nil {
			t.add(md)
		}
		return err
	}
}

func regionPut(ctx context.Context, cli *clientv3.Client, w int) error {
	_, err := cli.Put(ctx, "bench/regions/w/"+strconv.Itoa(w), value256)
	return err
}

func onReplica(ep regionEndpoints) []*clientv3.Client { return ep.replica }
func onLearner(ep regionEndpoints) []*clientv3.Client { return ep.learner }
func onRemote(ep regionEndpoints) []*clientv3.Client  { return ep.remote }

// Path names, shared with the plots and the notes.
const (
	pathReplicaStrong  = "replica strong"
	pathAfterBounded   = "replica strong, right after bounded reads"
	pathReplicaBounded = "replica bounded 1s"
	pathBoundedBelow   = "replica bounded 100ms"
	pathReplicaWeak    = "replica weak"
	pathLearner        = "stock learner serializable"
	pathRemoteStrong   = "remote voter linearizable"
	pathPutReplica     = "put via replica (forwarded)"
	pathPutRemote      = "put @ remote voter"
)

// regionPaths are measured in this order at each RTT and concurrency. The
// strong reads come first, while the replica's background rounds run at
// their idle period; right after the bounded reads, which keep them at
// --freshness-interval for 5 s, strong reads are measured again (1 client).
var (
	tally1s    = &boundTally{bound: time.Second}
	tally100ms = &boundTally{bound: 100 * time.Millisecond}
)

var regionPaths = []regionPath{
	{name: pathReplicaStrong, op: regionGet(), on: onReplica, rounds: true},
	{name: pathViaStrong, op: regionGet(), on: onVia, rounds: true},
	{name: pathReplicaWeak, op: regionGet(clientv3.WithSerializable()), on: onReplica},
	{name: pathReplicaBounded, op: regionBounded(regionBound, tally1s), on: onReplica, tally: tally1s},
	{name: pathBoundedBelow, op: regionBounded(regionBoundBelow, tally100ms), on: onReplica, tally: tally100ms},
	{name: pathAfterBounded, only1: true, op: regionGet(), on: onReplica, rounds: true},
	{name: pathLearner, op: regionGet(clientv3.WithSerializable()), on: onLearner},
	{name: pathRemoteStrong, op: regionGet(), on: onRemote},
	{name: pathPutReplica, op: regionPut, on: onReplica},
	{name: pathPutRemote, op: regionPut, on: onRemote},
}

// rttName names an RTT in rows and plots.
func rttName(rtt time.Duration) string {
	if rtt == 0 {
		return "RTT 0 (one region)"
	}
	return "RTT " + rtt.String()
}

// regionRowName names the row of path at rtt with n clients.
func regionRowName(path string, rtt time.Duration, n int) string {
	return fmt.Sprintf("%s, %s, %d client%s", path, rttName(rtt), n, map[bool]string{true: "", false: "s"}[n == 1])
}

// regionSamples are one row's latencies, for the plots.
type regionSamples struct {
	path    string
	rtt     time.Duration
	clients int
	lat     []time.Duration
}

// regionsScenario measures what clients in region B get from each path
// at each RTT (issue 29): see regionPaths, and regionWatch for the WAN
// bytes of watchers. Plots go to plotDir ("" for none).
func regionsScenario(p params, quick bool, plotDir string) ([]Row, error) {
	var rows []Row
	var samples []regionSamples
	err := scenario("regions", func(r *runner) {
		g := harness.StartRegions(r, harness.RegionsConfig{ReplicaArgs: p.replicaArgs, Hub: true})
		// The leader's rounds are counted over every replica: the via
		// replica's strong reads cost the hub's rounds.
		tp := &topology{cluster: g.Cluster, extraURL: g.Replica.ClientURL, extraPID: g.Replica.PID(),
			extraPIDs: []int{g.Learner.PID(), g.Hub.PID(), g.ViaReplica.PID()}, replicaURLs: []string{g.Replica.ClientURL, g.Hub.ClientURL, g.ViaReplica.ClientURL}}
		tp.roles(r)
		populate(r, g.Cluster.Client(r), 1000, value256)
		conns := max(1, p.conns)
		ep := regionEndpoints{
			replica: clients(r, g.Replica.ClientURL, conns),
			learner: clients(r, g.LearnerURL, conns),
			remote:  clients(r, g.RemoteClientURL(tp.leader), conns),
			via:     clients(r, g.ViaReplica.ClientURL, conns),
		}
		ready := watchReady(g.Replica.ClientURL, g.Cluster)
		for _, rtt := range regionRTTs {
			g.SetRTT(rtt, jitterAt(rtt))
			ready.begin(rtt)
			// One op on every path first, not counted: connections opened
			// and warmed at this RTT.
			for _, path := range regionPaths {
				for _, cli := range path.on(ep) {
					if err := path.op(context.Background(), cli, 0); err != nil {
						r.Fatalf("%s at %s: warm-up: %v", path.name, rttName(rtt), err)
					}
				}
			}
			for _, n := range regionClients {
				for _, path := range regionPaths {
					if path.only1 && n != 1 {
						continue
					}
					row, lat := regionRun(r, tp, p, path, ep, rtt, n)
					rows = append(rows, row)
					samples = append(samples, regionSamples{path: path.name, rtt: rtt, clients: n, lat: lat})
				}
			}
		}
		last := regionRTTs[len(regionRTTs)-1]
		rows = append(rows, regionKnee(r, g, tp, p, ep, last, regionClients[len(regionClients)-1])...)
		rows = append(rows, regionLargeRows(r, g, tp, p, ep, last)...)
		rows = append(rows, regionMirrorRows(r, g, p, last)...)
		watchers := 1000
		if quick {
			watchers = 200
		}
		rtt := regionRTTs[len(regionRTTs)-1]
		watchRows := regionWatchRows(r, g, tp, p, rtt, watchers)
		rows = append(rows, ready.finish()...)
		rows = append(rows, watchRows...)
		// Last, with no /readyz polls: they would land in one arm's
		// windows and not the other's.
		rows = append(rows, regionPairedRows(r, g, ep, rtt, quick)...)
	})
	regionNotes(rows)
	if plotDir != "" && len(samples) > 0 {
		if perr := regionPlots(plotDir, samples); perr != nil && err == nil {
			err = perr
		}
	}
	return rows, err
}

// jitterAt is the jitter at rtt: none in one region.
func jitterAt(rtt time.Duration) time.Duration {
	if rtt == 0 {
		return 0
	}
	return regionJitter
}

// regionRun measures path with n clients at rtt for p.dur.
func regionRun(r *runner, tp *topology, p params, path regionPath, ep regionEndpoints, rtt time.Duration, n int) (Row, []time.Duration) {
	name := regionRowName(path.name, rtt, n)
	cs := path.on(ep)
	var rounds0 float64
	if path.rounds {
		var err error
		if rounds0, err = leaderRounds(tp.replicaURLs); err != nil {
			r.Fatalf("%s: rounds before: %v", name, err)
		}
	}
	lat := make([][]time.Duration, n)
	if path.tally != nil {
		path.tally.reset()
	}
	cpu := startCPU(tp.pids())
	res := load(context.Background(), n, p.dur, func(ctx context.Context, w int) error {
		t0 := time.Now()
		err := path.op(ctx, cs[w%len(cs)], w)
		if err == nil && ctx.Err() == nil {
			lat[w] = append(lat[w], time.Since(t0))
		}
		return err
	})
	res.CPU = cpu.stop()
	if path.rounds {
		rounds1, err := leaderRounds(tp.replicaURLs)
		if err != nil {
			r.Fatalf("%s: rounds after: %v", name, err)
		}
		res.LeaderRounds = rounds1 - rounds0
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	r.Logf("%-62s %7.0f ops/s  p50 %v  p99 %v  leader %.3f CPU-s/10k", name, res.Throughput, res.P50.Round(time.Microsecond), res.P99.Round(time.Microsecond), res.CPUPer10k("leader"))
	row := Row{Scenario: regionsID, Name: name, Result: res}
	if path.tally != nil {
		row.Note = path.tally.note()
	}
	return row, all
}

// regionNotes writes, on the rows they concern, how the scenario was run
// and the acceptance ratios.
func regionNotes(rows []Row) {
	byName := map[string]int{}
	for i, r := range rows {
		byName[r.Name] = i
	}
	note := func(name, text string) {
		if i, ok := byName[name]; ok {
			rows[i].Note = strings.TrimPrefix(rows[i].Note+"; "+text, "; ")
		}
	}
	first := regionRowName(pathReplicaStrong, 0, regionClients[0])
	note(first, fmt.Sprintf("3 voters (primaries) and a hub replica in region A; the replica, a second replica that asks the hub for its strong reads' read indexes (--read-index-via its client URL across the WAN, the default --read-index-via-timeout, --read-index-via-in-flight %d unless a row says), a stock etcd learner and the clients (this load generator) in region B; every link between the regions through the harness's proxies, delayed by RTT/2 each way plus up to %v of jitter per chunk (none at RTT 0); links inside a region direct. Per RTT, in this order, each path at 1 then 32 clients (over %s connections), closed loop; remote voter = the leader, through the delayed client proxy. Reads: 1000 keys of 256 B; bounded reads carry %s: %s, or %s (below what the replica can prove at 150 ms RTT); the replica's /readyz asked every %v throughout, except in the paired rows, measured last", regionHubInFlight, regionJitter, "the run's", wire.MaxStalenessKey, regionBound, regionBoundBelow, readyPollEvery))
	last := regionRTTs[len(regionRTTs)-1]
	regionKneeNotes(rows, note, byName)
	for _, n := range regionClients {
		for _, path := range []string{pathReplicaWeak, pathReplicaBounded} {
			a, okA := byName[regionRowName(path, last, n)]
			b, okB := byName[regionRowName(path, 0, n)]
			if okA && okB && rows[b].P99 > 0 {
				ratio := rows[a].P99.Seconds() / rows[b].P99.Seconds()
				note(rows[a].Name, fmt.Sprintf("p99 vs the same path at RTT 0, measured minutes apart: %s× (the goal, ≤ 1.2, is judged on the paired rows)", ratioText(ratio)))
			}
		}
		for _, rtt := range regionRTTs[1:] {
			for _, path := range []string{pathReplicaStrong, pathAfterBounded, pathViaStrong} {
				a, okA := byName[regionRowName(path, rtt, n)]
				b, okB := byName[regionRowName(pathRemoteStrong, rtt, n)]
				if okA && okB && rows[b].P50 > 0 {
					ratio := rows[a].P50.Seconds() / rows[b].P50.Seconds()
					note(rows[a].Name, fmt.Sprintf("p50 vs linearizable reads at the remote voter: %s× (goal ≤ 1.1 %s); p50 %s RTT", ratioText(ratio), tick(ratio <= 1.1), ratioText(rows[a].P50.Seconds()/rtt.Seconds())))
				}
			}
		}
	}
}

func tick(ok bool) string {
	if ok {
		return "✓"
	}
	return "✗"
}
