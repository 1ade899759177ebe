package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/test/harness"
)

// regionWatchPrefix is what the watchers of the WAN-bytes rows watch.
const regionWatchPrefix = "bench/regions/watch/"

// regionWatchName names a WAN-bytes row.
func regionWatchName(n int, where string, rtt time.Duration) string {
	switch n {
	case 0:
		return fmt.Sprintf("WAN bytes, no watcher, %s", rttName(rtt))
	case 1:
		return fmt.Sprintf("WAN bytes, 1 watcher @ %s, %s", where, rttName(rtt))
	}
	return fmt.Sprintf("WAN bytes, %d watchers @ %s, %s", n, where, rttName(rtt))
}

// regionWatchRows measures the bytes that cross the WAN per second while
// regionPutRate puts/s go to the leader from region A, with no watcher,
// then with 1 and with watchers watchers of the prefix in region B on the
// replica, then with watchers on the remote voter (the leader, through
// the WAN). The note of each says the bytes/s, raft and client.
func regionWatchRows(r *runner, g *harness.Regions, tp *topology, p params, rtt time.Duration, watchers int) []Row {
	g.SetRTT(rtt, jitterAt(rtt))
	writer := clients(r, tp.leader.ClientURL, 1)[0]
	remote := g.RemoteClientURL(tp.leader)
	var rows []Row
	var wan []float64
	for _, c := range []struct {
		n         int
		where, ep string
	}{{0, "", ""}, {1, "replica", g.Replica.ClientURL}, {watchers, "replica", g.Replica.ClientURL}, {watchers, "remote voter", remote}} {
		row, bytesPerS := regionWatch(r, g, tp, p, writer, regionWatchName(c.n, c.where, rtt), c.ep, c.n)
		rows, wan = append(rows, row), append(wan, bytesPerS)
	}
	// The goals: the watchers on the replica add (almost) nothing
	// to the WAN, and a small fraction of what they cost on the voter.
	if wan[1] > 0 {
		ratio := wan[2] / wan[1]
		rows[2].Note += fmt.Sprintf("; vs 1 watcher there: %s× (goal ≤ 1.1 %s)", ratioText(ratio), tick(ratio <= 1.1))
	}
	if wan[3] > 0 {
		ratio := wan[2] / wan[3]
		rows[2].Note += fmt.Sprintf("; vs the same watchers on the remote voter: %s× (goal ≤ 0.01 %s)", ratioText(ratio), tick(ratio <= 0.01))
	}
	return rows
}

// regionWatch is one WAN-bytes row: n watchers of the prefix on endpoint,
// puts at regionPutRate for p.dur, the WAN bytes counted over the puts.
func regionWatch(r *runner, g *harness.Regions, tp *topology, p params, writer *clientv3.Client, name, endpoint string, n int) (Row, float64) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu   sync.Mutex
		lats []time.Duration
		wg   sync.WaitGroup
	)
	if n > 0 {
		cs := clients(r, endpoint, 4)
		created := make(chan error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				wch := cs[i%len(cs)].Watch(ctx, regionWatchPrefix, clientv3.WithPrefix(), clientv3.WithCreatedNotify())
				first := true
				for resp := range wch {
					if first {
						created <- resp.Err()
						first = false
					}
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
			if err := <-created; err != nil {
				r.Fatalf("%s: watch: %v", name, err)
			}
		}
	}
	raft0, client0 := g.WANTraffic()
	cpu := startCPU(tp.pids())
	// An open loop at the rate, from enough writers that a slow fsync
	// does not lower it.
	var seq atomic.Int64
	start := time.Now()
	putRes := loadAt(ctx, regionPutRate, 16, p.dur, func(ctx context.Context, _ int) error {
		key := regionWatchPrefix + strconv.FormatInt(seq.Add(1)%100, 10)
		_, err := writer.Put(ctx, key, strconv.FormatInt(time.Now().UnixNano(), 10))
		return err
	})
	elapsed := time.Since(start)
	puts := putRes.Ops
	raft1, client1 := g.WANTraffic()
	res := Result{CPU: cpu.stop(), Seconds: elapsed.Seconds()}
	if putRes.Errors > 0 {
		r.Logf("%s: %d puts failed or could not keep the rate", name, putRes.Errors)
	}
	// The last events: until every watcher has seen every put, or for
	// at most 10 s; what is still missing then counts as errors.
	poll := time.NewTicker(10 * time.Millisecond)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); <-poll.C {
		mu.Lock()
		got := len(lats)
		mu.Unlock()
		if got >= puts*n {
			break
		}
	}
	poll.Stop()
	cancel()
	wg.Wait()
	slices.Sort(lats)
	res.Ops = len(lats)
	res.Errors = max(0, puts*n-len(lats))
	res.P50, res.P99 = percentile(lats, 0.5), percentile(lats, 0.99)
	res.Throughput = float64(len(lats)) / elapsed.Seconds()
	raft, client := raft1.Sub(raft0), client1.Sub(client0)
	perS := func(t harness.Traffic) float64 { return float64(t.Total()) / elapsed.Seconds() }
	note := fmt.Sprintf("WAN %s/s (raft %s/s, client %s/s) over %d puts (%.0f/s, of 19 B values, from region A to the leader) in %v; ops = events delivered, p50/p99 = put to event",
		byteRate(perS(raft)+perS(client)), byteRate(perS(raft)), byteRate(perS(client)), puts, float64(puts)/elapsed.Seconds(), elapsed.Round(time.Millisecond))
	r.Logf("%-62s %d events  p50 %v  p99 %v  WAN %s/s (raft %s/s, client %s/s)", name, len(lats), res.P50, res.P99,
		byteRate(perS(raft)+perS(client)), byteRate(perS(raft)), byteRate(perS(client)))
	return Row{Scenario: regionsID, Name: name, Note: note, Result: res}, perS(raft) + perS(client)
}

// byteRate writes bytes/s in B, kB or MB (decimal).
func byteRate(b float64) string {
	switch {
	case b >= 1e6:
		return fmt.Sprintf("%.2f MB", b/1e6)
	case b >= 1e3:
		return fmt.Sprintf("%.1f kB", b/1e3)
	}
	return fmt.Sprintf("%.0f B", b)
}
