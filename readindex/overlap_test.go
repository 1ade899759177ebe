package readindex

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/zap/zaptest"
)

// hubCalls lets a test end each round through a hub on its own, in any
// order: calls receives one channel per round, which ends it.
type hubCalls struct {
	calls chan chan error
}

func (h *hubCalls) round(ctx context.Context) (bool, error) {
	done := make(chan error, 1)
	h.calls <- done
	select {
	case err := <-done:
		return false, err
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// overlapFreshness is a Freshness whose strong reads go through a hub,
// with at most hubMax hub rounds in flight.
func overlapFreshness(t *testing.T, clock clockwork.Clock, hubMax int) (*Freshness, *hubCalls) {
	h := &hubCalls{calls: make(chan chan error, 16)}
	f := NewFreshness(zaptest.NewLogger(t), clock, time.Hour, 0, time.Minute, ProverFunc(newFakeRounds().round), nil)
	f.via, f.shared, f.hubMax = h.round, func() bool { return true }, hubMax
	runLoop(t, f)
	return f, h
}

func strongRead(f *Freshness) chan error {
	ch := make(chan error, 1)
	go func() { ch <- f.WaitRound(context.Background()) }()
	return ch
}

func notYet(t *testing.T, ch chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("%s returned (%v) too soon", what, err)
	default:
	}
}

// A strong read that arrives while a hub round is in flight starts a round
// of its own at once rather than waiting for that one to come back (two
// round trips); it is served by its round, not by the earlier one, whose
// read index may predate it — nor by any round's end out of order.
func TestHubRoundsOverlap(t *testing.T) {
	f, h := overlapFreshness(t, clockwork.NewFakeClock(), 4)
	first := strongRead(f)
	r1 := recv(t, h.calls)
	second := strongRead(f)
	r2 := recv(t, h.calls) // round 2 starts with round 1 still in flight
	r1 <- nil
	if err := recv(t, first); err != nil {
		t.Fatal(err)
	}
	notYet(t, second, "a read served by a round that began before it")
	third := strongRead(f)
	r3 := recv(t, h.calls)
	r3 <- nil // round 3 ends before round 2: it began after both reads
	if err := recv(t, second); err != nil {
		t.Fatal(err)
	}
	if err := recv(t, third); err != nil {
		t.Fatal(err)
	}
	r2 <- nil
}

// At most hubMax hub rounds are in flight; a read past them waits for one
// to end, then gets a round that starts after it.
func TestHubRoundsInFlightAreCapped(t *testing.T) {
	f, h := overlapFreshness(t, clockwork.NewFakeClock(), 2)
	a := strongRead(f)
	ra := recv(t, h.calls)
	b := strongRead(f)
	rb := recv(t, h.calls)
	c := strongRead(f)
	waitUntil(t, func() bool { return pendingReads(f) == 1 })
	select {
	case <-h.calls:
		t.Fatal("a third hub round started with two in flight and a cap of 2")
	default:
	}
	ra <- nil
	recv(t, a)
	rc := recv(t, h.calls) // the slot freed: c's round
	rb <- nil
	recv(t, b)
	notYet(t, c, "the capped read")
	rc <- nil
	if err := recv(t, c); err != nil {
		t.Fatal(err)
	}
}

// With one hub round in flight at most, rounds run one at a time, as own
// rounds always do.
func TestOneHubRoundInFlightIsOneAtATime(t *testing.T) {
	f, h := overlapFreshness(t, clockwork.NewFakeClock(), 1)
	a := strongRead(f)
	ra := recv(t, h.calls)
	b := strongRead(f)
	waitUntil(t, func() bool { return pendingReads(f) == 1 })
	select {
	case <-h.calls:
		t.Fatal("a second hub round started with a cap of 1")
	default:
	}
	ra <- nil
	recv(t, a)
	rb := recv(t, h.calls)
	rb <- nil
	if err := recv(t, b); err != nil {
		t.Fatal(err)
	}
}

// Overlapping rounds are spaced by the last hub round's duration over the
// cap: a read waits at most that long for its round to start.
func TestOverlappingHubRoundsAreSpacedByTheirDuration(t *testing.T) {
	clock := clockwork.NewFakeClock()
	f, h := overlapFreshness(t, clock, 4)
	a := strongRead(f)
	ra := recv(t, h.calls)
	clock.Advance(100 * time.Millisecond)
	ra <- nil // took 100ms: overlapping rounds start 25ms apart
	recv(t, a)
	b := strongRead(f)
	rb := recv(t, h.calls) // nothing in flight: at once
	c := strongRead(f)
	waitUntil(t, func() bool { return pendingReads(f) == 1 })
	if err := clock.BlockUntilContext(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(24 * time.Millisecond)
	select {
	case <-h.calls:
		t.Fatal("an overlapping round started 24ms after the last, before 100ms/4")
	case <-time.After(20 * time.Millisecond):
	}
	clock.Advance(time.Millisecond)
	rc := recv(t, h.calls)
	rb <- nil
	rc <- nil
	recv(t, b)
	if err := recv(t, c); err != nil {
		t.Fatal(err)
	}
}

// A failed hub round leaves its reads to a later round.
func TestAFailedOverlappingRoundIsRetried(t *testing.T) {
	f, h := overlapFreshness(t, clockwork.NewRealClock(), 4)
	a := strongRead(f)
	ra := recv(t, h.calls)
	ra <- errors.New("hub gone")
	rb := recv(t, h.calls) // a's retry
	notYet(t, a, "a read whose round failed")
	rb <- nil
	if err := recv(t, a); err != nil {
		t.Fatal(err)
	}
}
