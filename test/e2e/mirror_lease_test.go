package e2e

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"

	"github.com/understudy-kv/understudy/test/harness"
)

var mirrorLong = flag.Bool("mirror.long", false, "run the mirror tests at full length: leases kept alive through a 100 ms proxy for 2 minutes, a 200,000-key resync under compaction (CI runs shorter variants)")

// leasedKeys puts n keys prefix0000… each on its own source lease of ttl
// seconds, and keeps the leases alive until the test ends.
func leasedKeys(t *testing.T, cli *clientv3.Client, prefix string, n int, ttl int64) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i := range n {
		g.Go(func() error {
			l, err := cli.Grant(gctx, ttl)
			if err != nil {
				return err
			}
			if _, err := cli.Put(gctx, fmt.Sprintf("%s%04d", prefix, i), fmt.Sprintf("v%d", i), clientv3.WithLease(l.ID)); err != nil {
				return err
			}
			ch, err := cli.KeepAlive(ctx, l.ID)
			if err != nil {
				return err
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range ch {
				}
			}()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("leased keys: %v", err)
	}
}

// leasedCount is how many destination keys under prefix are on a lease.
func (p *mirrorPair) leasedCount(prefix string) (int, error) {
	r, err := p.d.Get(context.Background(), prefix, clientv3.WithPrefix()) // keys-only answers carry no lease
	if err != nil {
		return 0, err
	}
	n := 0
	for _, kv := range r.Kvs {
		if kv.Lease != 0 {
			n++
		}
	}
	return n, nil
}

// TestMirrorRestoresLeasedKeys: 1,000 keys on 10-second source leases
// that their owner keeps alive; the mirror is killed for 30 s, so their
// destination leases expire and the destination deletes them. Restarted,
// the mirror writes every one again within 5 s, on new leases.
func TestMirrorRestoresLeasedKeys(t *testing.T) {
	timed(t)
	const n = 1000
	p := startMirrorPair(t)
	leasedKeys(t, p.s, "l/", n, 10)
	proc := p.start(t, "--prefix", "l/")
	p.waitCaughtUp(t, "default")
	harness.WaitFor(t, time.Minute, "every key on a destination lease", func() (bool, error) {
		c, err := p.leasedCount("l/")
		return c == n, err
	})
	proc.Kill()
	killed := time.Now()
	harness.WaitFor(t, 30*time.Second, "the destination leases expired", func() (bool, error) {
		return p.count(t, "l/") == 0, nil
	})
	t.Logf("destination keys gone %v after the kill", time.Since(killed).Round(time.Millisecond))
	// The mirror stays down 30 s: a fault's length, not a wait for a
	// condition.
	time.Sleep(time.Until(killed.Add(30 * time.Second)))
	proc.Restart(t)
	restarted := time.Now()
	harness.WaitFor(t, 5*time.Second, "every key back on a destination lease within 5 s of the restart", func() (bool, error) {
		c, err := p.leasedCount("l/")
		return c == n, err
	})
	t.Logf("all %d keys back %v after the restart", n, time.Since(restarted).Round(time.Millisecond))
	p.waitCaughtUp(t, "default")
	mustVerify(t, p, "--prefix", "l/")
}

// TestMirrorKeepsLeasesAliveThroughDelay: 1,000 keys on 10-second source
// leases, the destination 100 ms away each way (harness proxy): not one
// destination key expires while the source keeps its leases alive (20 s,
// or 2 minutes with -mirror.long).
func TestMirrorKeepsLeasesAliveThroughDelay(t *testing.T) {
	timed(t)
	const n = 1000
	hold := 20 * time.Second
	if *mirrorLong {
		hold = 2 * time.Minute
	}
	p := startMirrorPair(t)
	px := p.proxyDest(t)
	px.Delay(100 * time.Millisecond)
	leasedKeys(t, p.s, "l/", n, 10)
	metrics := harness.URL(harness.FreePort(t))
	start := time.Now()
	p.start(t, "--prefix", "l/", "--listen-metrics-urls", metrics)
	harness.WaitFor(t, 2*time.Minute, "every key on a destination lease", func() (bool, error) {
		c, err := p.leasedCount("l/")
		return c == n, err
	})
	t.Logf("%d leased keys mirrored through the delay in %v", n, time.Since(start).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), hold)
	defer cancel()
	deletes := 0
	for resp := range p.d.Watch(ctx, "l/", clientv3.WithPrefix()) {
		for _, ev := range resp.Events {
			if ev.Type == clientv3.EventTypeDelete {
				deletes++
				t.Errorf("destination key %q deleted while its source lease lives", ev.Kv.Key)
			}
		}
	}
	if c := p.count(t, "l/"); c != n || deletes > 0 {
		t.Fatalf("after %v: %d destination keys, %d deletes; want %d and 0", hold, c, deletes, n)
	}
	if lost := metric(t, metrics, "understudy_mirror_dest_leases_lost_total"); lost != 0 {
		t.Fatalf("understudy_mirror_dest_leases_lost_total %v, want 0", lost)
	}
	t.Logf("%d keys kept for %v, no delete", n, hold)
	mustVerify(t, p, "--prefix", "l/")
}

// TestMirrorRestoresALostLeaseWhileBusy: a destination lease ends (revoked
// on the destination) while its source lease lives and the mirror is never
// idle: the destination is 50 ms away each way and the source takes a put
// every 20 ms, so every pass of the mirror's loop finds revisions waiting.
// The lost lease's keys must be written again while that goes on, not once
// the source goes quiet.
func TestMirrorRestoresALostLeaseWhileBusy(t *testing.T) {
	timed(t)
	const n = 20
	p := startMirrorPair(t)
	px := p.proxyDest(t)
	px.Delay(50 * time.Millisecond)
	leasedKeys(t, p.s, "l/", n, 10)
	p.start(t, "--prefix", "l/")
	harness.WaitFor(t, time.Minute, "every key on a destination lease", func() (bool, error) {
		c, err := p.leasedCount("l/")
		return c == n, err
	})
	stop := sourceWriter(t, p, "l/w/")
	defer stop()
	ctx := context.Background()
	r, err := p.d.Get(ctx, "l/0000")
	if err != nil || len(r.Kvs) != 1 || r.Kvs[0].Lease == 0 {
		t.Fatalf("destination l/0000 before the revoke: %v %v", r, err)
	}
	lost := clientv3.LeaseID(r.Kvs[0].Lease)
	if _, err := p.d.Revoke(ctx, lost); err != nil {
		t.Fatalf("revoking destination lease %x: %v", lost, err)
	}
	revoked := time.Now()
	harness.WaitFor(t, 10*time.Second, "l/0000 back on a new destination lease while the source keeps writing", func() (bool, error) {
		r, err := p.d.Get(ctx, "l/0000")
		if err != nil {
			return false, err
		}
		return len(r.Kvs) == 1 && r.Kvs[0].Lease != 0 && clientv3.LeaseID(r.Kvs[0].Lease) != lost, nil
	})
	t.Logf("l/0000 back %v after its destination lease was revoked; %d puts meanwhile", time.Since(revoked).Round(time.Millisecond), stop())
	p.waitCaughtUp(t, "default")
	mustVerify(t, p, "--prefix", "l/")
}
