package main

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/understudy-kv/understudy/test/harness"
	"github.com/understudy-kv/understudy/wire"
)

// Large reads from region B (issue 29): regionLargeClients clients each
// read a range of regionLargeKeys values of regionLargeValue bytes (10 MiB)
// once a second. Through the replica, whatever the read mode, the data
// comes from its own copy, which crossed the WAN once through raft: a read
// adds to the WAN only its ReadIndex round (strong) or nothing (weak,
// bounded); at a remote voter, every read crosses it.
const (
	regionLargePrefix  = "bench/regions/large/"
	regionLargeKeys    = 40
	regionLargeValue   = 256 << 10
	regionLargeClients = 10
)

// regionLargeName names a large-read row.
func regionLargeName(how string, rtt time.Duration) string {
	return fmt.Sprintf("10 MiB reads, %d clients × 1/s, %s, %s", regionLargeClients, how, rttName(rtt))
}

// regionLargeRows writes the range, then measures the WAN bytes per second
// with no reads and with the large reads on each path at rtt.
func regionLargeRows(r *runner, g *harness.Regions, tp *topology, p params, ep regionEndpoints, rtt time.Duration) []Row {
	g.SetRTT(rtt, jitterAt(rtt))
	writer := g.Cluster.Client(r)
	val := strings.Repeat("x", regionLargeValue)
	for i := range regionLargeKeys {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err := writer.Put(ctx, fmt.Sprintf("%s%02d", regionLargePrefix, i), val)
		cancel()
		if err != nil {
			r.Fatalf("large reads: put: %v", err)
		}
	}
	var firstErr atomic.Pointer[string] // of the row being measured
	rangeOp := func(cs []*clientv3.Client, serializable bool, bound string) func(context.Context, int) error {
		return func(ctx context.Context, w int) (err error) {
			defer func() {
				if err != nil {
					msg := err.Error()
					firstErr.CompareAndSwap(nil, &msg)
				}
			}()
			if bound != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, wire.MaxStalenessKey, bound)
			}
			// The raw KV client does not get clientv3's call options: grpc's
			// own 4 MiB receive limit would refuse the 10 MiB answer.
			resp, err := pb.NewKVClient(cs[w%len(cs)].ActiveConnection()).Range(ctx, &pb.RangeRequest{
				Key: []byte(regionLargePrefix), RangeEnd: []byte(clientv3.GetPrefixRangeEnd(regionLargePrefix)), Serializable: serializable},
				grpc.MaxCallRecvMsgSize(math.MaxInt32))
			if err == nil && len(resp.Kvs) != regionLargeKeys {
				return fmt.Errorf("read %d keys of %d", len(resp.Kvs), regionLargeKeys)
			}
			return err
		}
	}
	paths := []struct {
		how string
		op  func(context.Context, int) error
	}{
		{"no reads", nil},
		{"replica weak", rangeOp(ep.replica, true, "")},
		{"replica bounded 1s", rangeOp(ep.replica, true, regionBound)},
		{"replica strong", rangeOp(ep.replica, false, "")},
		{"remote voter linearizable", rangeOp(ep.remote, false, "")},
	}
	var rows []Row
	var idle float64
	for _, path := range paths {
		name := regionLargeName(path.how, rtt)
		firstErr.Store(nil)
		rounds0, err := leaderRounds(tp.replicaURLs)
		if err != nil {
			r.Fatalf("%s: rounds: %v", name, err)
		}
		raft0, client0 := g.WANTraffic()
		cpu := startCPU(tp.pids())
		start := time.Now()
		var res Result
		if path.op != nil {
			res = loadAt(context.Background(), regionLargeClients, regionLargeClients, p.dur, path.op)
		} else {
			time.Sleep(p.dur) // the measurement window with no reads: the WAN's baseline
		}
		elapsed := time.Since(start)
		res.CPU, res.Seconds = cpu.stop(), elapsed.Seconds()
		raft1, client1 := g.WANTraffic()
		rounds1, _ := leaderRounds(tp.replicaURLs)
		raft, client := raft1.Sub(raft0), client1.Sub(client0)
		perS := float64(raft.Total()+client.Total()) / elapsed.Seconds()
		note := fmt.Sprintf("WAN %s/s (raft %s/s, client %s/s)", byteRate(perS), byteRate(float64(raft.Total())/elapsed.Seconds()), byteRate(float64(client.Total())/elapsed.Seconds()))
		if path.op == nil {
			idle = perS
		} else if res.Ops > 0 {
			added := (perS - idle) * elapsed.Seconds() / float64(res.Ops)
			note += fmt.Sprintf("; over no reads: %s per read of %d MiB (%.4f %% of it), the replicas' rounds %.1f/s",
				byteRate(added), regionLargeKeys*regionLargeValue>>20, 100*added/float64(regionLargeKeys*regionLargeValue), (rounds1-rounds0)/elapsed.Seconds())
		}
		if e := firstErr.Load(); e != nil {
			note += fmt.Sprintf("; %d reads failed, the first: %s", res.Errors, *e)
		}
		r.Logf("%-62s %d reads  p50 %v  p99 %v  %s", name, res.Ops, res.P50, res.P99, note)
		rows = append(rows, Row{Scenario: regionsID, Name: name, Note: note, Result: res})
	}
	return rows
}
