package e2e

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestMirrorResyncUnderCompaction: the source compacts to its newest
// revision every 2 s while a writer changes it and the mirror resyncs
// 200,000 keys (-mirror.long); in CI, 20,000 keys resync in about a
// second, so the source compacts every 200 ms. A resync pinned at one
// revision would start over at every compaction; this one completes, and
// verify passes.
func TestMirrorResyncUnderCompaction(t *testing.T) {
	beside(t)
	keys, every := 20000, 200*time.Millisecond
	if *mirrorLong {
		keys, every = 200000, 2*time.Second
	}
	p := startMirrorPair(t)
	fill(t, p.s, "c/", keys)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The mirror starts from revision 2, compacted away now: it must
	// resync in full.
	if _, err := p.s.Compact(ctx, p.head(t)); err != nil {
		t.Fatal(err)
	}
	// Compaction every so often, and a writer, for the whole resync.
	compactions := 0
	compactDone := make(chan struct{})
	go func() {
		defer close(compactDone)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			r, err := p.s.Get(ctx, "\x00", clientv3.WithCountOnly())
			if err != nil {
				continue
			}
			if _, err := p.s.Compact(ctx, r.Header.Revision); err == nil {
				compactions++
			}
		}
	}()
	writerDone := make(chan int)
	go func() {
		rng := rand.New(rand.NewPCG(5, 6))
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		n := 0
		for {
			select {
			case <-ctx.Done():
				writerDone <- n
				return
			case <-tick.C:
			}
			k := "c/" + leftPad(rng.IntN(keys+keys/10))
			var err error
			if rng.IntN(3) == 0 {
				_, err = p.s.Delete(ctx, k)
			} else {
				_, err = p.s.Put(ctx, k, "w"+strconv.Itoa(n))
			}
			if err == nil {
				n++
			}
		}
	}()
	start := time.Now()
	proc := p.start(t, "--prefix", "c/", "--rev", "2")
	lctx, lcancel := context.WithTimeout(ctx, time.Minute)
	defer lcancel()
	if err := proc.WaitLog(lctx, "compacted past the checkpoint"); err != nil {
		t.Fatalf("the mirror did not resync: %v", err)
	}
	dctx, dcancel := context.WithTimeout(ctx, 20*time.Minute)
	defer dcancel()
	if err := proc.WaitLog(dctx, "full sync done"); err != nil {
		t.Fatalf("the resync did not complete: %v", err)
	}
	took := time.Since(start)
	cancel()
	<-compactDone
	writes := <-writerDone
	p.waitCaughtUp(t, "default")
	mustVerify(t, p, "--prefix", "c/")
	cp := p.checkpoint(t, "default")
	t.Logf("resynced %d keys in %v under %d compactions (one every %v) and %d writes; %d resync(s) in the checkpoint", keys, took.Round(time.Millisecond), compactions, every, writes, cp.Resyncs)
	if compactions < 2 {
		t.Fatalf("only %d compactions during the resync: the test did not test", compactions)
	}
}

func leftPad(i int) string {
	s := strconv.Itoa(i)
	for len(s) < 6 {
		s = "0" + s
	}
	return s
}
