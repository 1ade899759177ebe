package learner

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// A member whose last applied thing is a snapshot gets one nudge, then
// one every nudgeEvery while it stays so, none otherwise; WaitPublished
// says what it waits for once and returns once the member is published.
func TestWaitPublishedNudgesOnlyAfterASnapshot(t *testing.T) {
	clock := clockwork.NewFakeClock()
	published := make(chan struct{})
	var snapshotLast atomic.Bool
	nudges := make(chan struct{}, 10)
	core, logs := observer.New(zap.InfoLevel)
	done := make(chan error, 1)
	go func() {
		done <- WaitPublished(context.Background(), zap.New(core), Publishing{
			Published:    published,
			SnapshotLast: func() (bool, uint64) { return snapshotLast.Load(), 5012 },
			Nudge:        func(context.Context) error { nudges <- struct{}{}; return errors.New("no voter answers") },
			Clock:        clock,
		})
	}()
	tick := func(n int) {
		for range n {
			if err := clock.BlockUntilContext(context.Background(), 1); err != nil {
				t.Fatal(err)
			}
			clock.Advance(publishPoll)
		}
	}
	tick(10)
	if len(nudges) != 0 {
		t.Fatalf("%d nudges while entries were the last applied", len(nudges))
	}
	snapshotLast.Store(true)
	tick(1)
	<-nudges
	tick(int(nudgeEvery/publishPoll) - 2)
	if len(nudges) != 0 {
		t.Fatalf("nudged again within %v", nudgeEvery)
	}
	tick(2)
	<-nudges
	close(published)
	if err := <-done; err != nil {
		t.Fatalf("WaitPublished: %v", err)
	}
	if n := logs.FilterMessageSnippet("caught up by a snapshot").Len(); n != 1 {
		t.Errorf("said what it waits for %d times, want once", n)
	}
}

// The member's fatal error and ctx's end end the wait.
func TestWaitPublishedEndsOnTheMembersErrorOrCtx(t *testing.T) {
	failed := make(chan error, 1)
	failed <- errors.New("boom")
	p := Publishing{Published: make(chan struct{}), Failed: failed, SnapshotLast: func() (bool, uint64) { return false, 0 }}
	if err := WaitPublished(context.Background(), zap.NewNop(), p); err == nil || err.Error() != "learner failed: boom" {
		t.Errorf("with the member failed: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	p.Failed = nil
	if err := WaitPublished(ctx, zap.NewNop(), p); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("with ctx ended: %v", err)
	}
}
