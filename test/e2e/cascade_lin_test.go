package e2e

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/test/harness"
)

// Strong reads through a cascaded replica and through one fed by it are
// linearizable (porcupine) with writes made through the voters and
// through the cascaded replica, while its upstream replicas are paused and
// killed and the leader is killed; a write through it is read back from it
// at once (read-your-writes); its weak reads never go back in revision,
// across the switches of upstream.
func TestCascadedReplicaStrongReadsAreLinearizable(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	voters := client(t, c.Endpoints()...)
	r1 := startReplica(t, bins, c, "r1", replicaOpts{})
	r2 := startReplica(t, bins, c, "r2", replicaOpts{})
	c1 := cascaded(t, c, "c1", []string{r1.ClientURL, r2.ClientURL})
	c2 := cascaded(t, c, "c2", []string{c1.ClientURL})
	cc1, cc2 := client(t, c1.ClientURL), client(t, c2.ClientURL)

	start := time.Now()
	now := func() int64 { return int64(time.Since(start)) }
	var (
		mu      sync.Mutex
		ops     []porcupine.Operation
		ryw     atomic.Int64 // read-your-writes violations
		back    atomic.Int64 // weak reads that went back in revision
		reads   atomic.Int64
		stopped = make(chan struct{})
		wg      sync.WaitGroup
	)
	record := func(op porcupine.Operation) { mu.Lock(); ops = append(ops, op); mu.Unlock() }
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stopped:
					return
				default:
				}
				key := fmt.Sprintf("lin/k%d", (w+i)%4)
				val := fmt.Sprintf("w%d-%d", w, i)
				writer := voters
				if i%2 == 0 {
					writer = cc1
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				call := now()
				put, err := writer.Put(ctx, key, val)
				ret := now()
				cancel()
				if err != nil {
					ret = math.MaxInt64 // ambiguous: it may take effect later
				}
				record(porcupine.Operation{ClientId: w, Input: regInput{Put: true, Key: key, Value: val}, Call: call, Output: regOutput{}, Return: ret})
				if err == nil && writer == cc1 {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					resp, err := cc1.Get(ctx, key, clientv3.WithSerializable())
					cancel()
					if err == nil && (len(resp.Kvs) == 0 || resp.Kvs[0].ModRevision < put.Header.Revision) {
						ryw.Add(1)
					}
				}
				reader := cc1
				if w%2 == 1 {
					reader = cc2
				}
				ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
				call = now()
				resp, err := reader.Get(ctx, key)
				ret = now()
				cancel()
				if err != nil {
					continue
				}
				reads.Add(1)
				got := ""
				if len(resp.Kvs) > 0 {
					got = string(resp.Kvs[0].Value)
				}
				record(porcupine.Operation{ClientId: w, Input: regInput{Key: key}, Call: call, Output: regOutput{Value: got}, Return: ret})
			}
		}()
	}
	wg.Add(1)
	go func() { // weak reads through c1, revision never back
		defer wg.Done()
		var last int64
		for {
			select {
			case <-stopped:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			resp, err := cc1.Get(ctx, "lin/k0", clientv3.WithSerializable())
			cancel()
			if err != nil {
				continue
			}
			if resp.Header.Revision < last {
				back.Add(1)
			}
			last = max(last, resp.Header.Revision)
		}
	}()

	step := func(d time.Duration, what string, f func()) {
		time.Sleep(d) // the faults' schedule, not a synchronisation
		t.Logf("%v: %s", time.Since(start).Round(100*time.Millisecond), what)
		f()
	}
	step(2*time.Second, "pause r1", func() { signal(t, r1.Proc, syscall.SIGSTOP) })
	step(3*time.Second, "resume r1", func() { signal(t, r1.Proc, syscall.SIGCONT) })
	step(2*time.Second, "kill r2", func() { r2.Kill() })
	step(3*time.Second, "kill the leader", func() { c.Leader(t).Proc.Kill() })
	step(4*time.Second, "stop", func() {})
	close(stopped)
	wg.Wait()
	t.Logf("%d operations, %d strong reads served", len(ops), reads.Load())
	if reads.Load() < 100 {
		t.Fatalf("only %d strong reads served through the cascaded replicas; the check would say little", reads.Load())
	}
	if res := check(t, ops); res != porcupine.Ok {
		t.Fatalf("strong reads through cascaded replicas: porcupine says %s over %d operations, want Ok", res, len(ops))
	}
	if n := ryw.Load(); n != 0 {
		t.Errorf("%d writes through the cascaded replica not read back from it at once", n)
	}
	if n := back.Load(); n != 0 {
		t.Errorf("%d weak reads through the cascaded replica went back in revision", n)
	}
}
