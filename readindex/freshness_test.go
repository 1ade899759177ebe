package readindex

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
	f := NewFreshness(zaptest.NewLogger(t), clock, time.Hour, 0, time.Minute, ProverFunc(fr.round), nil)

	if !f.AsOf().IsZero() {
		t.Fatal("fresh before any round")
	}
	start := clock.Now()
	done := make(chan struct{})
	go func() { f.Round(context.Background()); close(done) }()
	recv(t, fr.started)
	clock.Advance(30 * time.Millisecond) // the round takes 30ms
	send(t, fr.results, nil)
	recv(t, done)
	if got := f.AsOf(); !got.Equal(start) {
		t.Fatalf("AsOf = %v, want the round's start %v, not its end", got, start)
	}
	if got := f.Age(); got != 30*time.Millisecond {
		t.Fatalf("Age = %v, want 30ms", got)
	}

	// A failed round proves nothing.
	clock.Advance(time.Second)
	go func() { f.Round(context.Background()) }()
	recv(t, fr.started)
	send(t, fr.results, errors.New("leader unreachable"))
	if got := f.AsOf(); !got.Equal(start) {
		t.Fatalf("AsOf moved to %v after a failed round", got)
	}
}

func TestWaitFreshAsksForARoundAndWaitsForIt(t *testing.T) {
	clock := clockwork.NewFakeClock()
	fr := newFakeRounds()
	// The periodic tick never fires on its own here: only a waiter's ask
	// can start a round.
	f := NewFreshness(zaptest.NewLogger(t), clock, time.Hour, 0, time.Minute, ProverFunc(fr.round), nil)
	runLoop(t, f)

	need := clock.Now()
	waited := make(chan error, 1)
	go func() { waited <- f.WaitFresh(context.Background(), need) }()
	recv(t, fr.started) // the wait asked for a round
	select {
	case err := <-waited:
		t.Fatalf("WaitFresh returned %v before the round completed", err)
	default:
	}
	send(t, fr.results, nil)
	if err := recv(t, waited); err != nil {
		t.Fatal(err)
	}
}

func TestWaitFreshFailsAtTheDeadlineWhileRoundsFail(t *testing.T) {
	clock := clockwork.NewFakeClock()
	fr := newFakeRounds()
	f := NewFreshness(zaptest.NewLogger(t), clock, time.Hour, 0, time.Minute, ProverFunc(fr.round), nil)
	runLoop(t, f)

	wctx, wcancel := context.WithCancel(context.Background())
	waited := make(chan error, 1)
	go func() { waited <- f.WaitFresh(wctx, clock.Now()) }()
	recv(t, fr.started)
	send(t, fr.results, errors.New("no leader"))
	wcancel() // the request's deadline
	if err := recv(t, waited); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitFresh = %v, want the context's error", err)
	}
	if !f.AsOf().IsZero() {
		t.Fatal("a failed round made the store fresh")
	}
}

func TestWaitRoundNeedsARoundThatStartedAfterTheCall(t *testing.T) {
	clock := clockwork.NewFakeClock()
	fr := newFakeRounds()
	f := NewFreshness(zaptest.NewLogger(t), clock, time.Hour, 0, time.Minute, ProverFunc(fr.round), nil)
	runLoop(t, f)

	first := make(chan error, 1)
	go func() { first <- f.WaitRound(context.Background()) }()
	recv(t, fr.started) // round 1 is under way

	second := make(chan error, 1)
	go func() { second <- f.WaitRound(context.Background()) }()
	// The second read arrived during round 1: it must not be answered by it,
	// whose read index may predate it.
	waitUntil(t, func() bool { return pendingReads(f) == 1 })
	send(t, fr.results, nil) // round 1 completes
	if err := recv(t, first); err != nil {
		t.Fatal(err)
	}
	recv(t, fr.started) // round 2, asked for by the second read
	select {
	case err := <-second:
		t.Fatalf("the second read returned (%v) on a round that began before it", err)
	default:
	}
	send(t, fr.results, nil)
	if err := recv(t, second); err != nil {
		t.Fatal(err)
	}
}

func TestRoundsAreSpacedByTheBatchInterval(t *testing.T) {
	clock := clockwork.NewFakeClock()
	fr := newFakeRounds()
	f := NewFreshness(zaptest.NewLogger(t), clock, time.Hour, 5*time.Millisecond, time.Minute, ProverFunc(fr.round), nil)
	ctx := runLoop(t, f)

	first := make(chan error, 1)
	go func() { first <- f.WaitRound(context.Background()) }()
	recv(t, fr.started)
	send(t, fr.results, nil)
	if err := recv(t, first); err != nil {
		t.Fatal(err)
	}

	// Several reads arrive right after: they share one round, which waits
	// out the batch interval.
	done := make(chan error, 3)
	for range 3 {
		go func() { done <- f.WaitRound(context.Background()) }()
	}
	// All three must be counted before the round is let go, or a late one
	// would rightly wait for the round after.
	waitUntil(t, func() bool { return f.Waiting() == 3 })
	// the gap's timer (the period's timer stopped when the reads asked)
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-fr.started:
		t.Fatal("a round started before the batch interval passed")
	default:
	}
	clock.Advance(5 * time.Millisecond)
	recv(t, fr.started)
	send(t, fr.results, nil)
	for range 3 {
		if err := recv(t, done); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-fr.started:
		t.Fatal("the three reads took more than one round")
	default:
	}
}

// runLoop runs f's loop until the test ends, and returns its context.
func runLoop(t *testing.T, f *Freshness) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return ctx
}

// recv receives from ch, failing the test if nothing comes within 10s.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("nothing received within 10s")
		panic("unreachable")
	}
}

// send sends v on ch, failing the test if nobody takes it within 10s.
func send[T any](t *testing.T, ch chan<- T, v T) {
	t.Helper()
	select {
	case ch <- v:
	case <-time.After(10 * time.Second):
		t.Fatal("nobody received within 10s")
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

func TestRoundsSlowDownWhileNoBoundedReadComes(t *testing.T) {
	clock := clockwork.NewFakeClock()
	fr := newFakeRounds()
	f := NewFreshness(zaptest.NewLogger(t), clock, 50*time.Millisecond, 0, time.Minute, ProverFunc(fr.round), nil)
	f.idleInterval = time.Second
	ctx := runLoop(t, f)

	// Idle: the next round is a second away, not 50ms.
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(50 * time.Millisecond)
	select {
	case <-fr.started:
		t.Fatal("an idle replica ran a round after 50ms")
	default:
	}
	clock.Advance(950 * time.Millisecond)
	recv(t, fr.started)
	// A bounded read comes during the round: from its end, rounds go back
	// to every 50ms.
	f.Demand(100 * time.Millisecond)
	send(t, fr.results, nil)
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(50 * time.Millisecond)
	recv(t, fr.started)
	send(t, fr.results, nil)

	// idleAfter without one: idle again.
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(idleAfter)
	recv(t, fr.started) // the 50ms timer that was pending
	send(t, fr.results, nil)
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(50 * time.Millisecond)
	select {
	case <-fr.started:
		t.Fatal("rounds stayed fast after bounded reads stopped")
	default:
	}
}

// pendingReads is the number of reads registered for the next round.
func pendingReads(f *Freshness) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.pending
}
