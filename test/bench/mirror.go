package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/test/harness"
)

// mirrorTool is one way of mirroring: a command line that copies the
// source prefix "mirror/" into the destination under the same names.
type mirrorTool struct {
	name string
	cmd  func(bins *harness.Bins, src, dst string) (bin string, args []string)
}

var mirrorTools = []mirrorTool{
	{"understudy mirror", func(b *harness.Bins, src, dst string) (string, []string) {
		return b.Replica, []string{"mirror", "--source-endpoints", src, "--dest-endpoints", dst, "--prefix", "mirror/", "--log-level", "warn"}
	}},
	{"etcdctl make-mirror", func(b *harness.Bins, src, dst string) (string, []string) {
		return b.Etcdctl, []string{"--endpoints", src, "make-mirror", "--prefix", "mirror/", dst}
	}},
}

// mirrorScenario copies the same data with understudy's mirror and with
// etcdctl make-mirror, each into a fresh destination cluster: the time of
// the initial sync, then the lag of each event at a steady write rate.
func mirrorScenario(p params) ([]Row, error) {
	var rows []Row
	err := scenario("mirror", func(r *runner) {
		src := harness.StartCluster(r, harness.ClusterConfig{N: 1, Token: "bench-source"})
		sc := src.Client(r)
		harness.Fill(r, sc, p.mirrorKeys, func(i int) (string, string) { return fmt.Sprintf("mirror/k/%07d", i), value256 })
		for _, tool := range mirrorTools {
			dst := harness.StartCluster(r, harness.ClusterConfig{N: 1, Token: "bench-dest"})
			dc := dst.Client(r)
			bin, args := tool.cmd(src.Bins, src.Endpoints()[0], dst.Endpoints()[0])
			start := time.Now()
			proc := harness.Start(r, harness.ProcConfig{Name: "mirror", Bin: bin, Args: args})
			harness.WaitFor(r, 20*time.Minute, tool.name+" initial sync", func() (bool, error) {
				resp, err := dc.Get(context.Background(), "mirror/k/", clientv3.WithPrefix(), clientv3.WithCountOnly())
				return err == nil && resp.Count >= int64(p.mirrorKeys), err
			})
			took := time.Since(start)
			rows = append(rows, Row{Scenario: "mirror", Name: fmt.Sprintf("%s: initial sync of %d keys", tool.name, p.mirrorKeys),
				Result: Result{Ops: p.mirrorKeys, Seconds: took.Seconds(), Throughput: float64(p.mirrorKeys) / took.Seconds()}})
			r.Logf("%-24s synced %d keys in %v", tool.name, p.mirrorKeys, took.Round(time.Millisecond))
			// Every key has landed, but a tool may still be finishing its
			// sync: lag is measured once a change made now comes through.
			probe := strconv.FormatInt(time.Now().UnixNano(), 10)
			if _, err := sc.Put(context.Background(), "mirror/probe", probe); err != nil {
				r.Fatalf("probe: %v", err)
			}
			harness.WaitFor(r, 5*time.Minute, tool.name+" streaming", func() (bool, error) {
				resp, err := dc.Get(context.Background(), "mirror/probe")
				return err == nil && len(resp.Kvs) == 1 && string(resp.Kvs[0].Value) == probe, err
			})
			r.Logf("%-24s streaming %v after the start", tool.name, time.Since(start).Round(time.Millisecond))

			for _, rate := range []int{p.mirrorRate, 2 * p.mirrorRate} {
				lag, own := mirrorLag(r, sc, dc, p, rate)
				rows = append(rows, Row{Scenario: "mirror", Name: fmt.Sprintf("%s: lag at %d puts/s", tool.name, rate), Result: lag},
					Row{Scenario: "mirror", Name: fmt.Sprintf("%s: lag at %d puts/s, from the source's watch event", tool.name, rate), Result: own})
				r.Logf("%-24s lag at %d puts/s: p50 %v p99 %v (%d of %d events); from the source's watch event: p50 %v p99 %v",
					tool.name, rate, lag.P50, lag.P99, lag.Ops, lag.Ops+lag.Errors, own.P50, own.P99)
			}
			proc.Stop()
		}
	})
	return rows, err
}

// mirrorLag writes timestamps to the source at rate puts/s for p.dur and
// measures, for each, when the destination's watch delivers it: from the
// put (what a user sees: the source's commit included) and from when the
// source's own watch delivered it (the mirror's share).
func mirrorLag(r *runner, src, dst *clientv3.Client, p params, rate int) (Result, Result) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu      sync.Mutex
		lats    []time.Duration
		atDest  = map[string]time.Time{}
		atSrc   = map[string]time.Time{}
		wdone   sync.WaitGroup
		started sync.WaitGroup
	)
	watch := func(cli *clientv3.Client, f func(now time.Time, ev *clientv3.Event)) {
		started.Add(1)
		wdone.Add(1)
		go func() {
			defer wdone.Done()
			wch := cli.Watch(ctx, "mirror/lag/", clientv3.WithPrefix())
			started.Done()
			for resp := range wch {
				now := time.Now()
				mu.Lock()
				for _, ev := range resp.Events {
					if ev.Type == clientv3.EventTypePut {
						f(now, ev)
					}
				}
				mu.Unlock()
			}
		}()
	}
	watch(dst, func(now time.Time, ev *clientv3.Event) {
		if ns, err := strconv.ParseInt(string(ev.Kv.Value), 10, 64); err == nil {
			lats = append(lats, now.Sub(time.Unix(0, ns)))
			atDest[string(ev.Kv.Value)] = now
		}
	})
	watch(src, func(now time.Time, ev *clientv3.Event) { atSrc[string(ev.Kv.Value)] = now })
	started.Wait()
	// Puts go out in bursts every 10ms, from goroutines, so that the rate
	// holds whatever one put's latency.
	perTick := max(rate/100, 1)
	tick := time.NewTicker(10 * time.Millisecond)
	var wg sync.WaitGroup
	var putsMu sync.Mutex
	puts := 0
	start := time.Now()
	for i := 0; time.Since(start) < p.dur; i++ {
		<-tick.C
		for j := range perTick {
			wg.Add(1)
			go func() {
				defer wg.Done()
				key := "mirror/lag/" + strconv.Itoa((i*perTick+j)%1000)
				if _, err := src.Put(ctx, key, strconv.FormatInt(time.Now().UnixNano(), 10)); err == nil {
					putsMu.Lock()
					puts++
					putsMu.Unlock()
				}
			}()
		}
	}
	tick.Stop()
	wg.Wait()
	// Let the last events arrive: until all have, or for 30 seconds;
	// what is missing then is reported as errors.
	deadline := time.Now().Add(30 * time.Second)
	poll := time.NewTicker(10 * time.Millisecond)
	for time.Now().Before(deadline) {
		mu.Lock()
		got := len(lats)
		mu.Unlock()
		if got >= puts {
			break
		}
		<-poll.C
	}
	poll.Stop()
	cancel()
	wdone.Wait()
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(lats)
	res := Result{Ops: len(lats), Errors: max(puts-len(lats), 0), Seconds: time.Since(start).Seconds()}
	res.Throughput = float64(len(lats)) / p.dur.Seconds()
	res.P50, res.P99 = percentile(lats, 0.5), percentile(lats, 0.99)
	var own []time.Duration
	for v, d := range atDest {
		if s, ok := atSrc[v]; ok {
			own = append(own, d.Sub(s))
		}
	}
	slices.Sort(own)
	ownRes := Result{Ops: len(own), Errors: max(puts-len(own), 0), Seconds: res.Seconds, Throughput: float64(len(own)) / p.dur.Seconds()}
	ownRes.P50, ownRes.P99 = percentile(own, 0.5), percentile(own, 0.99)
	return res, ownRes
}
