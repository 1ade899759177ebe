package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/understudy-kv/understudy/test/harness"
)

// sourceWriter puts a key under prefix every 20ms until stop is called,
// which returns how many puts went through (again if called again).
func sourceWriter(t *testing.T, p *mirrorPair, prefix string) (stop func() int) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		n := 0
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				done <- n
				return
			case <-tick.C:
			}
			if _, err := p.s.Put(ctx, fmt.Sprintf("%s%04d", prefix, i%500), strconv.Itoa(i)); err == nil {
				n++
			}
		}
	}()
	var once sync.Once
	puts := 0
	return func() int {
		once.Do(func() { cancel(); puts = <-done })
		return puts
	}
}

// TestMirrorDestinationBlackholed: the destination cut off for 30 s while
// the source keeps changing. The mirror neither exits nor hangs: it
// reports itself stalled (metric and log), and once the link heals it
// catches up and verify passes.
func TestMirrorDestinationBlackholed(t *testing.T) {
	beside(t)
	p := startMirrorPair(t)
	px := p.proxyDest(t)
	fill(t, p.s, "b/", 1000)
	metrics := harness.URL(harness.FreePort(t))
	proc := p.start(t, "--prefix", "b/", "--stall-timeout", "5s", "--command-timeout", "2s", "--listen-metrics-urls", metrics)
	p.waitCaughtUp(t, "default")
	if v := metric(t, metrics, "understudy_mirror_stalled"); v != 0 {
		t.Fatalf("understudy_mirror_stalled %v before the cut, want 0", v)
	}
	stop := sourceWriter(t, p, "b/w")
	px.Blackhole()
	cut := time.Now()
	harness.WaitFor(t, 25*time.Second, "understudy_mirror_stalled 1", func() (bool, error) {
		return metric(t, metrics, "understudy_mirror_stalled") == 1, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := proc.WaitLog(ctx, "mirror stalled"); err != nil {
		t.Fatalf("no stall in the log: %v", err)
	}
	t.Logf("stalled reported %v after the cut", time.Since(cut).Round(time.Millisecond))
	// The cut lasts 30 s: a fault's length, not a wait for a condition.
	time.Sleep(time.Until(cut.Add(30 * time.Second)))
	if proc.Exited() {
		t.Fatal("the mirror exited while the destination was cut off")
	}
	px.Heal()
	healed := time.Now()
	puts := stop()
	p.waitCaughtUp(t, "default")
	t.Logf("caught up %v after the heal (%d source puts during the test)", time.Since(healed).Round(time.Millisecond), puts)
	harness.WaitFor(t, 10*time.Second, "understudy_mirror_stalled 0", func() (bool, error) {
		return metric(t, metrics, "understudy_mirror_stalled") == 0, nil
	})
	mustVerify(t, p, "--prefix", "b/")
	if proc.Exited() {
		t.Fatal("the mirror exited")
	}
}

// TestMirrorOwnAmbiguousCommit: the destination's answers arrive later
// than --command-timeout, so the mirror's transactions time out and land
// after all. Reading the checkpoint back, the mirror must recognise its
// own write (its token) rather than stop with "another mirror writes
// here"; then it catches up and verify passes.
func TestMirrorOwnAmbiguousCommit(t *testing.T) {
	beside(t)
	p := startMirrorPair(t)
	px := p.proxyDest(t)
	fill(t, p.s, "a/", 100)
	proc := p.start(t, "--prefix", "a/", "--command-timeout", "1s")
	p.waitCaughtUp(t, "default")
	stop := sourceWriter(t, p, "a/w")
	px.Delay(1500 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := proc.WaitLog(ctx, "destination transaction"); err != nil {
		t.Fatalf("no transaction timed out: %v", err)
	}
	// Let a few more time out, and land.
	harness.WaitFor(t, time.Minute, "three timed-out transactions", func() (bool, error) {
		return strings.Count(proc.Log(), "destination transaction") >= 3, nil
	})
	px.Heal()
	if err := proc.WaitLog(ctx, "had landed"); err != nil {
		t.Fatalf("the mirror never found a timed-out write of its own landed: %v\n%s", err, proc.Log())
	}
	puts := stop()
	p.waitCaughtUp(t, "default")
	if proc.Exited() {
		t.Fatalf("the mirror exited:\n%s", proc.Log())
	}
	mustVerify(t, p, "--prefix", "a/")
	t.Logf("%d source puts", puts)
}

// TestMirrorFencesAnotherWithTheSameName: two mirrors with one name into
// one destination: the one whose checkpoint is overwritten stops, saying
// another mirror writes here.
func TestMirrorFencesAnotherWithTheSameName(t *testing.T) {
	beside(t)
	p := startMirrorPair(t)
	fill(t, p.s, "f/", 100)
	first := p.start(t, "--prefix", "f/")
	p.waitCaughtUp(t, "default")
	stop := sourceWriter(t, p, "f/w")
	defer stop()
	second := harness.Start(t, harness.ProcConfig{Name: "mirror-2", Bin: p.bins.Replica, Args: p.args("--prefix", "f/")})
	harness.WaitFor(t, time.Minute, "one of the two mirrors stopped", func() (bool, error) {
		return first.Exited() || second.Exited(), nil
	})
	stopped, running := first, second
	if second.Exited() {
		stopped, running = second, first
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := stopped.WaitLog(ctx, "another mirror with the same --name"); err != nil {
		t.Fatalf("%s stopped without naming another mirror:\n%s", stopped.Name(), stopped.Log())
	}
	if running.Exited() {
		t.Fatalf("both mirrors stopped:\n%s", running.Log())
	}
	if _, err := p.s.Put(context.Background(), "f/after", "x"); err != nil {
		t.Fatal(err)
	}
	p.waitCaughtUp(t, "default")
}

// TestMirrorAppliesABacklogInFewTransactions: the destination is paused
// (SIGSTOP) while the source takes n puts, each its own revision and its
// own watch response. Once the destination is back, the mirror must apply
// that backlog in a few transactions of many revisions, not one or two
// revisions a transaction as the responses come off the watch: a mirror
// that does so never catches up while the source writes at the pace of
// its commits (BENCHMARKS.md, lag at 2,000 puts/s).
func TestMirrorAppliesABacklogInFewTransactions(t *testing.T) {
	beside(t)
	const n = 400
	p := startMirrorPair(t)
	metrics := harness.URL(harness.FreePort(t))
	// The pause must not end in a timeout: a new watch would deliver the
	// backlog in large responses whatever the mirror does.
	p.start(t, "--prefix", "q/", "--command-timeout", "1m", "--listen-metrics-urls", metrics)
	if _, err := p.s.Put(context.Background(), "q/first", "x"); err != nil {
		t.Fatal(err)
	}
	p.waitCaughtUp(t, "default")
	before := metric(t, metrics, "understudy_mirror_transactions_total")

	dest := p.dst.Members[0].Proc
	signal(t, dest, syscall.SIGSTOP)
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			signal(t, dest, syscall.SIGCONT)
		}
	})
	for i := range n {
		if _, err := p.s.Put(context.Background(), fmt.Sprintf("q/%04d", i), strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	signal(t, dest, syscall.SIGCONT)
	resumed = true
	p.waitCaughtUp(t, "default")
	txns := metric(t, metrics, "understudy_mirror_transactions_total") - before
	t.Logf("%d source revisions applied in %v destination transactions", n, txns)
	// 123 changes fit in one transaction (etcd's 128 operations, less the
	// checkpoint and the ownership checks): about 4 for the backlog, one
	// in flight when the destination stopped, and a few for responses
	// still on their way when it resumed.
	if txns > n/20 {
		t.Fatalf("%d source revisions applied in %v destination transactions; want at most %d", n, txns, n/20)
	}
	mustVerify(t, p, "--prefix", "q/")
}
