package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/understudy-kv/understudy/mirror"
	"github.com/understudy-kv/understudy/test/harness"
)

// TestMirrorWatchingAReplica: the mirror's only source endpoint is a
// replica of a cluster of three voters, so its sync and its watch are the
// replica's to serve. A writer churns the prefix through the voters while
// the replica is stopped (SIGSTOP) for a while and later killed and
// restarted. The copy ends exact (verify) and exactly once (the
// checkpoints chain), and no voter ever sent a watch event: the mirror
// waited for its replica rather than moving its watch onto the voters.
func TestMirrorWatchingAReplica(t *testing.T) {
	beside(t)
	p := startMirrorPairOf(t, 3)
	rep := startReplica(t, p.bins, p.src, "replica", replicaOpts{})
	p.sourceURL = rep.ClientURL
	fill(t, p.s, "r/", 20000)

	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	writerDone := make(chan int)
	go func() {
		wr := rand.New(rand.NewPCG(uint64(seed), 9))
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		n := 0
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				writerDone <- n
				return
			case <-tick.C:
			}
			k := fmt.Sprintf("r/%06d", wr.IntN(21000))
			var err error
			if wr.IntN(3) == 0 {
				_, err = p.s.Delete(ctx, k)
			} else {
				_, err = p.s.Put(ctx, k, "w"+strconv.Itoa(i))
			}
			if err == nil {
				n++
			}
		}
	}()

	p.start(t, "--prefix", "r/")
	progress := func(what string) {
		t.Helper()
		before := p.checkpoint(t, "default")
		harness.WaitFor(t, 2*time.Minute, what, func() (bool, error) {
			cp := p.checkpoint(t, "default")
			return cp != nil && cp.Phase == mirror.PhaseStream && (before == nil || cp.Revision > before.Revision), nil
		})
	}
	progress("the mirror streaming from the replica")

	if err := syscall.Kill(rep.PID(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := p.checkpoint(t, "default").Revision
	// The source moves on while the replica is stopped; the mirror's
	// copy cannot.
	harness.WaitFor(t, time.Minute, "the source 200 revisions past the paused mirror", func() (bool, error) {
		return head(t, p.s) > paused+200, nil
	})
	if err := syscall.Kill(rep.PID(), syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	progress("the mirror moving again after the replica's pause")

	rep.Proc.Kill()
	rep.Proc.Restart(t)
	rep.WaitServing(t, 2*time.Minute)
	progress("the mirror moving again after the replica's restart")

	cancel()
	t.Logf("%d changes written", <-writerDone)
	p.waitCaughtUp(t, "default")
	mustVerify(t, p, "--prefix", "r/")
	checkChain(t, p)
	for _, m := range p.src.Members {
		if n := harness.MustScrape(t, m.ClientURL+"/metrics").Sum("etcd_debugging_mvcc_events_total"); n != 0 {
			t.Fatalf("voter %s sent %v watch events: the mirror's watch was on it, not on the replica", m.Name, n)
		}
	}
}
