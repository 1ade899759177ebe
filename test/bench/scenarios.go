package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"

	"github.com/understudy-kv/understudy/test/harness"
	"github.com/understudy-kv/understudy/wire"
)

// Row is one measured configuration.
type Row struct {
	Scenario string `json:"scenario"`
	Name     string `json:"name"`
	// Note says how the row was measured where its name does not (windows,
	// endpoints); written under its section's table.
	Note string `json:"note,omitempty"`
	// Windows are the row's figure in each of the windows it adds up, where
	// it adds up several, in the report's metric WindowsMetric; rows of a
	// scenario with as many windows measured window i in the same round.
	// A ratio in that metric is given with its error, or less a base whose
	// difference is not above their noise, as not resolved.
	Windows       []float64 `json:"windows,omitempty"`
	WindowsMetric string    `json:"windows_metric,omitempty"`
	// Figures are what a row measured beyond Result and its windows, by
	// name, for its scenario's own tables.
	Figures map[string]float64 `json:"figures,omitempty"`
	Result
}

// params are the sizes of a run.
type params struct {
	dur         time.Duration
	workers     int
	conns       int
	keys        int
	watchers    []int
	watchRate   int
	catchupKeys int
	mirrorKeys  int
	mirrorRate  int
	// sharedRate is the fixed rate of strong reads (reads/s) in the rows
	// that spread them over 1, 2 and 4 replicas: the same total load in
	// each, so that the leader's CPU per read compares rounds only.
	sharedRate int
	// mirrorSourceRate is the puts/s into the source in the mirror-source
	// scenario, of values of mirrorSourceValue bytes, over
	// mirrorSourceWindows windows of dur per arm. Large values at a low
	// rate: a mirror's watch costs the leader per byte it sends, the puts
	// cost it per put besides, and with small values the watch's share was
	// below the noise of the leader's CPU per put (4 KiB at 1,000/s: the
	// mirror on the leader added −0.1 ± 0.7 CPU-s per 10k puts, 2 SE).
	// mirrorSyncValue is the value size of the initial-sync rows.
	mirrorSourceRate, mirrorSourceValue, mirrorSourceWindows, mirrorSyncValue int
	// mirrorSyncKeys are the keys each initial sync of the mirror-source
	// scenario copies.
	mirrorSyncKeys int
	// headersWindows is the windows of headersWindow per arm in the
	// headers scenario: short ones, alternating often, so that the
	// machine's drift falls alike on both arms of a pair.
	headersWindows int
	headersWindow  time.Duration
	// scaleWriteRate and scaleReadRate are the fixed puts/s and strong
	// reads/s of the scale scenario's windows of scaleWindow (idle ones
	// twice as long), scaleRounds the windows per arm and fleet size.
	scaleWriteRate, scaleReadRate, scaleRounds int
	scaleWindow                                time.Duration
	// fanoutBytes is the data the fanout scenario's bootstraps copy.
	fanoutBytes int
	// pairedRounds are the fanout-paired scenario's rounds: in each, the
	// leader idle for pairedWindow and under pairedPutRate puts/s for
	// pairedPutWindow, with the cascaded replicas running and stopped.
	pairedRounds, pairedPutRate   int
	pairedWindow, pairedPutWindow time.Duration
	// proxyWatchers are the numbers of watchers the grpc-proxy scenario
	// opens on each front (multiples of 1,000), in proxyRounds rounds of
	// windows of proxyWindow at proxyPutRate puts/s; its reads run at
	// proxyReadRate reads/s in proxyReadRounds rounds of such windows.
	proxyWatchers                                             []int
	proxyRounds, proxyReadRounds, proxyPutRate, proxyReadRate int
	proxyWindow                                               time.Duration
	// tierRounds are the tiers scenario's rounds of tierPuts puts at
	// tierRate a second.
	tierRounds, tierPuts, tierRate int
	// treeMid and treeLeaves shape the tree scenario's readers (a learner
	// replica feeding treeMid cascaded replicas, each feeding treeLeaves);
	// its put windows last treeWindow, pairedRounds of each arm; its watch
	// delivery runs treeDeliveryRounds rounds of treeDeliveryPuts puts.
	treeMid, treeLeaves, treeDeliveryRounds, treeDeliveryPuts int
	treeWindow                                                time.Duration
	replicaArgs                                               []string
}

func quickParams() params {
	return params{dur: 3 * time.Second, workers: 32, conns: 8, keys: 1000, watchers: []int{200}, watchRate: 10, catchupKeys: 2000, mirrorKeys: 5000, mirrorRate: 1000, sharedRate: 2000,
		mirrorSourceRate: 100, mirrorSourceValue: 32768, mirrorSourceWindows: 2, mirrorSyncKeys: 2000, mirrorSyncValue: 4096, headersWindows: 4, headersWindow: 1500 * time.Millisecond,
		scaleWriteRate: 300, scaleReadRate: 1000, scaleRounds: 2, scaleWindow: 3 * time.Second, fanoutBytes: 64 << 20,
		pairedRounds: 2, pairedPutRate: 100, pairedWindow: 6 * time.Second, pairedPutWindow: 3 * time.Second,
		proxyWatchers: []int{2000}, proxyRounds: 1, proxyReadRounds: 2, proxyPutRate: 100, proxyReadRate: 300, proxyWindow: 3 * time.Second,
		tierRounds: 2, tierPuts: 200, tierRate: 100, treeMid: 2, treeLeaves: 3, treeDeliveryRounds: 1, treeDeliveryPuts: 100, treeWindow: 5 * time.Second}
}

func fullParams() params {
	return params{dur: 10 * time.Second, workers: 64, conns: 16, keys: 1000, watchers: []int{1000, 10000}, watchRate: 10, catchupKeys: 20000, mirrorKeys: 100000, mirrorRate: 1000, sharedRate: 8000,
		mirrorSourceRate: 200, mirrorSourceValue: 32768, mirrorSourceWindows: 8, mirrorSyncKeys: 10000, mirrorSyncValue: 4096, headersWindows: 16, headersWindow: 2500 * time.Millisecond,
		scaleWriteRate: 300, scaleReadRate: 1000, scaleRounds: 3, scaleWindow: 5 * time.Second, fanoutBytes: 1 << 30,
		pairedRounds: 6, pairedPutRate: 100, pairedWindow: 2 * time.Minute, pairedPutWindow: 20 * time.Second,
		proxyWatchers: []int{10000, 100000}, proxyRounds: 4, proxyReadRounds: 5, proxyPutRate: 100, proxyReadRate: 300, proxyWindow: 10 * time.Second,
		tierRounds: 5, tierPuts: 1000, tierRate: 100, treeMid: 4, treeLeaves: 15, treeDeliveryRounds: 2, treeDeliveryPuts: 300, treeWindow: 30 * time.Second}
}

var value256 = strings.Repeat("v", 256)

func populate(r *runner, cli *clientv3.Client, n int, val string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 16 {
				if _, err := cli.Put(ctx, fmt.Sprintf("bench/key/%d", i), val); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		r.Fatalf("populate: %v", err)
	}
}

// reads measures one kind of read against one endpoint.
func reads(r *runner, tp *topology, p params, name, endpoint string, serializable bool, bound string) Row {
	return readsN(r, tp, p, p.workers, name, []string{endpoint}, serializable, bound)
}

// readsN is reads with a given number of concurrent workers, spread over
// one or more endpoints (their connections taken in turn).
func readsN(r *runner, tp *topology, p params, workers int, name string, endpoints []string, serializable bool, bound string) Row {
	return readsAt(r, tp, p, 0, workers, name, endpoints, serializable, bound)
}

// readsAt is readsN at a fixed rate of reads per second (loadAt), or as
// fast as the workers go if rate is 0.
func readsAt(r *runner, tp *topology, p params, rate, workers int, name string, endpoints []string, serializable bool, bound string) Row {
	var cs []*clientv3.Client
	for _, ep := range endpoints {
		cs = append(cs, clients(r, ep, max(1, p.conns/len(endpoints)))...)
	}
	var md []string
	if bound != "" {
		md = []string{wire.MaxStalenessKey, bound}
	}
	return readsOn(r, tp, p, rate, workers, name, endpoints, cs, serializable, md)
}

// readsOn is readsAt over clients cs of endpoints, opened by the caller,
// each read sending the metadata md (key, value, …): a staleness bound
// (wire.MaxStalenessKey) makes weak reads bounded ones.
func readsOn(r *runner, tp *topology, p params, rate, workers int, name string, endpoints []string, cs []*clientv3.Client, serializable bool, md []string) Row {
	bound := ""
	for i := 0; i+1 < len(md); i += 2 {
		if md[i] == wire.MaxStalenessKey {
			bound = md[i+1]
		}
	}
	var opts []clientv3.OpOption
	if serializable {
		opts = append(opts, clientv3.WithSerializable())
	}
	// Strong reads served by replicas: count the rounds they cost the
	// leader.
	countRounds := !serializable && bound == "" && len(tp.replicaURLs) > 0 && subset(endpoints, tp.replicaURLs)
	var rounds0 float64
	if countRounds {
		var err error
		if rounds0, err = leaderRounds(tp.replicaURLs); err != nil {
			r.Fatalf("%s: rounds before: %v", name, err)
		}
	}
	cpu := startCPU(tp.pids())
	op := func(ctx context.Context, w int) error {
		if len(md) > 0 {
			ctx = metadata.AppendToOutgoingContext(ctx, md...)
		}
		_, err := cs[w%len(cs)].Get(ctx, "bench/key/"+strconv.Itoa(w*7919%p.keys), opts...)
		return err
	}
	var res Result
	if rate > 0 {
		res = loadAt(context.Background(), rate, workers, p.dur, op)
	} else {
		res = load(context.Background(), workers, p.dur, op)
	}
	res.CPU = cpu.stop()
	if countRounds {
		rounds1, err := leaderRounds(tp.replicaURLs)
		if err != nil {
			r.Fatalf("%s: rounds after: %v", name, err)
		}
		res.LeaderRounds = rounds1 - rounds0
	}
	r.Logf("%-40s %9.0f ops/s  p50 %v  p99 %v  leader %.3f CPU-s/10k", name, res.Throughput, res.P50, res.P99, res.CPUPer10k("leader"))
	return Row{Scenario: "reads", Name: name, Result: res}
}

// subset tells whether every one of xs is in of.
func subset(xs, of []string) bool {
	for _, x := range xs {
		if !slices.Contains(of, x) {
			return false
		}
	}
	return true
}

// workerCounts are the concurrencies strong reads are measured at: the
// run's own (rows named without a suffix) and a quarter and four times it.
func workerCounts(p params) []int { return []int{p.workers / 4, p.workers, 4 * p.workers} }

// atWorkers names a row measured with w workers.
func atWorkers(p params, name string, w int) string {
	if w == p.workers {
		return name
	}
	return fmt.Sprintf("%s, %d workers", name, w)
}

// sharedName names a row whose load is spread over n replicas; via: the
// replicas other than the first obtain read indexes through it.
func sharedName(n int, via bool) string {
	s := fmt.Sprintf("replica strong, shared by %d of 4 replicas", n)
	if via && n > 1 {
		s += ", rounds through the first (--read-index-via)"
	}
	return s
}

func readScenario(p params) ([]Row, error) {
	var rows []Row
	err := scenario("reads: stock etcd", func(r *runner) {
		tp := etcdTopology(r)
		populate(r, tp.cluster.Client(r), p.keys, value256)
		for _, w := range workerCounts(p) {
			rows = append(rows,
				readsN(r, tp, p, w, atWorkers(p, "etcd linearizable @ leader", w), []string{tp.leader.ClientURL}, false, ""),
				readsN(r, tp, p, w, atWorkers(p, "etcd linearizable @ follower", w), []string{tp.follower.ClientURL}, false, ""),
			)
		}
		rows = append(rows,
			reads(r, tp, p, "etcd serializable @ follower", tp.follower.ClientURL, true, ""),
			reads(r, tp, p, "etcd serializable @ stock learner", tp.extraURL, true, ""),
		)
	})
	if err != nil {
		return rows, err
	}
	err = scenario("reads: understudy", func(r *runner) {
		tp := understudyTopology(r, p.replicaArgs...)
		populate(r, tp.cluster.Client(r), p.keys, value256)
		for _, w := range workerCounts(p) {
			rows = append(rows,
				readsN(r, tp, p, w, atWorkers(p, "primary linearizable @ leader", w), []string{tp.leader.ClientURL}, false, ""),
				readsN(r, tp, p, w, atWorkers(p, "replica strong", w), []string{tp.extraURL}, false, ""),
			)
		}
		rows = append(rows,
			reads(r, tp, p, "replica weak", tp.extraURL, true, ""),
			reads(r, tp, p, "replica bounded 100ms", tp.extraURL, true, "100ms"),
		)
		// The same total load (p.sharedRate reads/s) through 1, 2 and 4 of
		// 4 replicas: what each added replica costs the leader when they
		// share the reads. A fixed rate, not a closed loop: on this
		// machine, more serving processes are slower ones, and a closed
		// loop's lower throughput would count against the leader's cost
		// per read.
		// First each replica with its own rounds, then replicas 2 to 4
		// obtaining their read indexes through replica 1
		// (--read-index-via), sharing its rounds.
		for _, via := range []bool{false, true} {
			eps := []string{tp.extraURL}
			var reps []*harness.Replica
			tp.extraPIDs = nil
			tp.replicaURLs = []string{tp.extraURL}
			for i := range 3 {
				name := fmt.Sprintf("replica%d", i+2)
				args := p.replicaArgs
				if via {
					name += "-via"
					args = append([]string{"--read-index-via", tp.extraURL}, args...)
				}
				rep := harness.StartReplica(r, tp.cluster, harness.ReplicaConfig{Name: name, Extra: args})
				reps = append(reps, rep)
				eps = append(eps, rep.ClientURL)
				tp.extraPIDs = append(tp.extraPIDs, rep.PID())
				tp.replicaURLs = append(tp.replicaURLs, rep.ClientURL)
			}
			for _, n := range []int{1, 2, 4} {
				if via && n == 1 { // the same as without: measured once
					continue
				}
				rows = append(rows, readsAt(r, tp, p, p.sharedRate, p.workers, sharedName(n, via), eps[:n], false, ""))
			}
			for _, rep := range reps {
				rep.Stop()
				leave(r, tp.cluster, rep.Name)
			}
			tp.replicaURLs = []string{tp.extraURL}
		}
	})
	return rows, err
}

func writeScenario(p params) ([]Row, error) {
	var rows []Row
	err := scenario("writes", func(r *runner) {
		tp := understudyTopology(r, p.replicaArgs...)
		for _, side := range []struct{ name, ep string }{{"put @ leader", tp.leader.ClientURL}, {"put via replica (forwarded)", tp.extraURL}} {
			cs := clients(r, side.ep, p.conns)
			cpu := startCPU(tp.pids())
			res := load(context.Background(), p.workers, p.dur, func(ctx context.Context, w int) error {
				_, err := cs[w%len(cs)].Put(ctx, "bench/w/"+strconv.Itoa(w), value256)
				return err
			})
			res.CPU = cpu.stop()
			r.Logf("%-40s %9.0f ops/s  p50 %v  p99 %v", side.name, res.Throughput, res.P50, res.P99)
			rows = append(rows, Row{Scenario: "writes", Name: side.name, Result: res})
		}
	})
	return rows, err
}

// watchScenario puts watchers on the leader or on the replica, writes at a
// steady rate through the leader, and measures event delivery latency and
// the leader's CPU.
func watchScenario(p params) ([]Row, error) {
	var rows []Row
	err := scenario("watch fan-out", func(r *runner) {
		tp := understudyTopology(r, p.replicaArgs...)
		writer := clients(r, tp.leader.ClientURL, 1)[0]
		for _, n := range p.watchers {
			for _, side := range []struct{ name, ep string }{{"leader", tp.leader.ClientURL}, {"replica", tp.extraURL}} {
				name := fmt.Sprintf("%d watchers @ %s", n, side.name)
				rows = append(rows, watchRun(r, tp, p, writer, name, side.ep, n))
			}
		}
	})
	return rows, err
}

func watchRun(r *runner, tp *topology, p params, writer *clientv3.Client, name, endpoint string, n int) Row {
	cs := clients(r, endpoint, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	key := "bench/watch/" + strings.ReplaceAll(name, " ", "-")
	var (
		mu   sync.Mutex
		lats []time.Duration
		wg   sync.WaitGroup
	)
	ready := make(chan struct{}, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wch := cs[i%len(cs)].Watch(clientv3.WithRequireLeader(ctx), key, clientv3.WithCreatedNotify())
			ready <- struct{}{}
			for resp := range wch {
				now := time.Now()
				mu.Lock()
				for _, ev := range resp.Events {
					if ns, err := strconv.ParseInt(string(ev.Kv.Value), 10, 64); err == nil {
						lats = append(lats, now.Sub(time.Unix(0, ns)))
					}
				}
				mu.Unlock()
			}
		}()
	}
	for range n {
		<-ready
	}
	cpu := startCPU(tp.pids())
	tick := time.NewTicker(time.Second / time.Duration(p.watchRate))
	start := time.Now()
	puts := 0
	for time.Since(start) < p.dur {
		<-tick.C
		if _, err := writer.Put(ctx, key, strconv.FormatInt(time.Now().UnixNano(), 10)); err == nil {
			puts++
		}
	}
	tick.Stop()
	// Let the last events arrive: until every watcher has seen every put,
	// or for at most 10 seconds; what is still missing then is reported.
	deadline := time.Now().Add(10 * time.Second)
	poll := time.NewTicker(10 * time.Millisecond)
	for time.Now().Before(deadline) {
		mu.Lock()
		got := len(lats)
		mu.Unlock()
		if got >= puts*n {
			break
		}
		<-poll.C
	}
	poll.Stop()
	cancel()
	wg.Wait()
	res := Result{CPU: cpu.stop(), Seconds: time.Since(start).Seconds(), Ops: len(lats)}
	slices.Sort(lats)
	res.P50, res.P99 = percentile(lats, 0.5), percentile(lats, 0.99)
	res.Throughput = float64(len(lats)) / res.Seconds
	missing := puts*n - len(lats)
	if missing > 0 {
		res.Errors = missing
	}
	r.Logf("%-40s %d events  p50 %v  p99 %v  leader %.3f CPU-s", name, len(lats), res.P50, res.P99, res.CPU["leader"])
	return Row{Scenario: "watch", Name: name, Result: res}
}
