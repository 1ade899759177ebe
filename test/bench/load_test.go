package main

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// loadAt issues no more ops than were due, and counts as errors the ops it
// could not hand to a worker because every worker was busy a second long.
func TestLoadAtIssuesWhatIsDueAndCountsWhatItCannot(t *testing.T) {
	const rate, d = 1000, 200 * time.Millisecond
	var calls atomic.Int64
	res := loadAt(context.Background(), rate, 4, d, func(context.Context, int) error { calls.Add(1); return nil })
	if due := int(rate*d/time.Second) + 1; res.Ops > due || res.Ops == 0 || res.Errors != 0 || int64(res.Ops) != calls.Load() {
		t.Fatalf("fast ops: %d ops (%d calls), %d errors; want 1..%d ops, no errors", res.Ops, calls.Load(), res.Errors, due)
	}

	// One worker, stuck on its first op for the whole run: a second's
	// worth (rate) queue up, the rest are dropped and counted.
	release := make(chan struct{})
	stuck := time.AfterFunc(1500*time.Millisecond, func() { close(release) })
	defer stuck.Stop()
	var first atomic.Bool
	res = loadAt(context.Background(), rate, 1, 1200*time.Millisecond, func(context.Context, int) error {
		if first.CompareAndSwap(false, true) {
			<-release
		}
		return nil
	})
	if res.Errors == 0 || res.Ops > rate+1 {
		t.Fatalf("stuck worker: %d ops, %d errors; want at most %d ops and the rest counted as errors", res.Ops, res.Errors, rate+1)
	}
}
