package readpath

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/zap/zaptest"
)

// fakeRounds lets a test decide when each ReadIndex round completes and how.
type fakeRounds struct {
	started chan struct{}
	results chan error
}

func newFakeRounds() *fakeRounds {
	return &fakeRounds{started: make(chan struct{}, 16), results: make(chan error)}
}

func (f *fakeRounds) round(ctx context.Context) error {
	f.started <- struct{}{}
	select {
	case err := <-f.results:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func TestFreshnessMovesToTheStartOfTheLastCompletedRound(t *testing.T) {
	clock := clockwork.NewFakeClock()
	fr := newFakeRounds()
	f := NewFreshness(zaptest.NewLogger(t), clock, time.Hour, 0, time.Minute, fr.round, nil)

	if !f.AsOf().IsZero() {
		t.Fatal("fresh before any round")
	}
	start := clock.Now()
	done := make(chan struct{})
	go func() { f.Round(context.Background()); close(done) }()
	<-fr.started
	clock.Advance(30 * time.Millisecond) // the round takes 30ms
	fr.results <- nil
	<-done
	if got := f.AsOf(); !got.Equal(start) {
		t.Fatalf("AsOf = %v, want the round's start %v, not its end", got, start)
	}
	if got := f.Age(); got != 30*time.Millisecond {
		t.Fatalf("Age = %v, want 30ms", got)
	}

	// A failed round proves nothing.
	clock.Advance(time.Second)
	go func() { f.Round(context.Background()) }()
	<-fr.started
	fr.results <- errors.New("leader unreachable")
	if got := f.AsOf(); !got.Equal(start) {
		t.Fatalf("AsOf moved to %v after a failed round", got)
	}
}

func TestWaitFreshAsksForARoundAndWaitsForIt(t *testing.T) {
	clock := clockwork.NewFakeClock()
	fr := newFakeRounds()
	// The periodic tick never fires on its own here: only a waiter's ask
	// can start a round.
	f := NewFreshness(zaptest.NewLogger(t), clock, time.Hour, 0, time.Minute, fr.round, nil)
	ctx, cancel := context.WithCancel(context.Background())
	loopDone := make(chan struct{})
	go func() { f.Run(ctx); close(loopDone) }()
	defer func() { cancel(); <-loopDone }()

	need := clock.Now()
	waited := make(chan error, 1)
	go func() { waited <- f.WaitFresh(context.Background(), need) }()
	<-fr.started // the wait asked for a round
	select {
	case err := <-waited:
		t.Fatalf("WaitFresh returned %v before the round completed", err)
	default:
	}
	fr.results <- nil
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
}

func TestWaitFreshFailsAtTheDeadlineWhileRoundsFail(t *testing.T) {
	clock := clockwork.NewFakeClock()
	fr := newFakeRounds()
	f := NewFreshness(zaptest.NewLogger(t), clock, time.Hour, 0, time.Minute, fr.round, nil)
	ctx, cancel := context.WithCancel(context.Background())
	loopDone := make(chan struct{})
	go func() { f.Run(ctx); close(loopDone) }()
	defer func() { cancel(); <-loopDone }()

	wctx, wcancel := context.WithCancel(context.Background())
	waited := make(chan error, 1)
	go func() { waited <- f.WaitFresh(wctx, clock.Now()) }()
	<-fr.started
	fr.results <- errors.New("no leader")
	wcancel() // the request's deadline
	if err := <-waited; !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitFresh = %v, want the context's error", err)
	}
	if !f.AsOf().IsZero() {
		t.Fatal("a failed round made the store fresh")
	}
}

func TestWaitRoundNeedsARoundThatStartedAfterTheCall(t *testing.T) {
	clock := clockwork.NewFakeClock()
	fr := newFakeRounds()
	f := NewFreshness(zaptest.NewLogger(t), clock, time.Hour, 0, time.Minute, fr.round, nil)
	ctx, cancel := context.WithCancel(context.Background())
	loopDone := make(chan struct{})
	go func() { f.Run(ctx); close(loopDone) }()
	defer func() { cancel(); <-loopDone }()

	first := make(chan error, 1)
	go func() { first <- f.WaitRound(context.Background()) }()
	<-fr.started // round 1 is under way

	second := make(chan error, 1)
	go func() { second <- f.WaitRound(context.Background()) }()
	// The second read arrived during round 1: it must not be answered by it,
	// whose read index may predate it.
	waitUntil(t, func() bool { return len(f.kick) == 1 })
	fr.results <- nil // round 1 completes
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	<-fr.started // round 2, asked for by the second read
	select {
	case err := <-second:
		t.Fatalf("the second read returned (%v) on a round that began before it", err)
	default:
	}
	fr.results <- nil
	if err := <-second; err != nil {
		t.Fatal(err)
	}
}

func TestRoundsAreSpacedByTheBatchInterval(t *testing.T) {
	clock := clockwork.NewFakeClock()
	fr := newFakeRounds()
	f := NewFreshness(zaptest.NewLogger(t), clock, time.Hour, 5*time.Millisecond, time.Minute, fr.round, nil)
	ctx, cancel := context.WithCancel(context.Background())
	loopDone := make(chan struct{})
	go func() { f.Run(ctx); close(loopDone) }()
	defer func() { cancel(); <-loopDone }()

	go func() { _ = f.WaitRound(context.Background()) }()
	<-fr.started
	fr.results <- nil

	// Several reads arrive right after: they share one round, which waits
	// out the batch interval.
	done := make(chan error, 3)
	for range 3 {
		go func() { done <- f.WaitRound(context.Background()) }()
	}
	// ticker plus the gap's timer
	if err := clock.BlockUntilContext(ctx, 2); err != nil {
		t.Fatal(err)
	}
	select {
	case <-fr.started:
		t.Fatal("a round started before the batch interval passed")
	default:
	}
	clock.Advance(5 * time.Millisecond)
	<-fr.started
	fr.results <- nil
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-fr.started:
		t.Fatal("the three reads took more than one round")
	default:
	}
}

// waitUntil polls a condition on in-memory state, with a deadline.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}
