package balancer

import (
	"testing"
	"time"
)

// Probes ask for the tightest budget used lately: a looser one does not
// hide it, and it is forgotten after budgetMemory, the looser one then
// counting until it is forgotten too.
func TestProbesAskForTheTightestBudgetUsedLately(t *testing.T) {
	var bs budgets
	t0 := time.Unix(1000, 0)
	if d, ok := bs.tightest(t0); ok {
		t.Fatalf("no budget used, tightest %v", d)
	}
	if !bs.used(200*time.Millisecond, t0) {
		t.Fatal("the first budget must probe at once")
	}
	if bs.used(time.Second, t0.Add(10*time.Second)) || bs.used(200*time.Millisecond, t0) {
		t.Fatal("a looser budget, or one remembered, must not probe at once")
	}
	if d, ok := bs.tightest(t0.Add(20 * time.Second)); !ok || d != 200*time.Millisecond {
		t.Fatalf("tightest %v, %v; want 200ms", d, ok)
	}
	if d, ok := bs.tightest(t0.Add(budgetMemory + time.Second)); !ok || d != time.Second {
		t.Fatalf("200ms used %v ago: tightest %v, %v; want 1s", budgetMemory+time.Second, d, ok)
	}
	if d, ok := bs.tightest(t0.Add(10*time.Second + budgetMemory + time.Second)); ok {
		t.Fatalf("every budget older than %v: tightest %v", budgetMemory, d)
	}
	// Used again: remembered again, and the tightest again.
	if !bs.used(200*time.Millisecond, t0.Add(time.Hour)) {
		t.Fatal("a forgotten budget used again must probe at once")
	}
	if d, ok := bs.tightest(t0.Add(time.Hour)); !ok || d != 200*time.Millisecond {
		t.Fatalf("tightest %v, %v; want 200ms", d, ok)
	}
}

// A client whose budget varies from call to call (one computed per call)
// fills a few buckets, never looser than its budgets, and the map stays
// bounded: probes at once only for a tighter bucket.
func TestBudgetsComputedPerCallStayFew(t *testing.T) {
	var bs budgets
	t0 := time.Unix(1000, 0)
	kicks := 0
	for i := range 100000 {
		if bs.used(150*time.Millisecond+time.Duration(i)*97*time.Microsecond, t0) {
			kicks++
		}
	}
	if len(bs.seen) > maxBudgets || kicks != 1 {
		t.Fatalf("%d budgets remembered (most %d), %d probes at once; want 1", len(bs.seen), maxBudgets, kicks)
	}
	if d, _ := bs.tightest(t0); d != 150*time.Millisecond {
		t.Fatalf("tightest %v, want 150ms", d)
	}
	// Tighter ones still come in, each probing at once, and take the
	// loosest ones' places.
	for _, d := range []time.Duration{100 * time.Millisecond, 5*time.Millisecond + 500*time.Microsecond, 300 * time.Microsecond} {
		if !bs.used(d, t0) {
			t.Fatalf("%v, tighter than all, must probe at once", d)
		}
		if got, _ := bs.tightest(t0); got > d || got < bucket(d) {
			t.Fatalf("tightest %v after %v", got, d)
		}
	}
	if len(bs.seen) > maxBudgets {
		t.Fatalf("%d budgets remembered, most %d", len(bs.seen), maxBudgets)
	}
}
