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
	if !bs.used(200*time.Millisecond, t0) || !bs.used(time.Second, t0.Add(10*time.Second)) || bs.used(time.Second, t0.Add(10*time.Second)) {
		t.Fatal("a budget not remembered must tell it, once")
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
	// Used again: remembered again, and new again.
	if !bs.used(200*time.Millisecond, t0.Add(time.Hour)) {
		t.Fatal("a forgotten budget used again must tell it")
	}
	if d, ok := bs.tightest(t0.Add(time.Hour)); !ok || d != 200*time.Millisecond {
		t.Fatalf("tightest %v, %v; want 200ms", d, ok)
	}
}
