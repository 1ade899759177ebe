package readindex

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/zap/zaptest"
)

func TestBatchPolicy(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := time.Millisecond
	p := batchPolicy{minGap: 2 * ms, maxWait: 5 * ms}
	for _, tc := range []struct {
		name string
		s    batchState
		want batchDecision
	}{
		{"nothing waits, nothing due", batchState{now: t0, peak: 10}, batchDecision{}},
		{"a background round is due", batchState{now: t0, due: true}, batchDecision{start: true}},
		{"a due round still keeps the gap", batchState{now: t0, lastStart: t0.Add(-ms), due: true}, batchDecision{at: t0.Add(ms)}},
		{"a lone reader starts at once", batchState{now: t0, pending: 1, oldest: t0, peak: 1}, batchDecision{start: true}},
		{"the population is back", batchState{now: t0, lastStart: t0.Add(-3 * ms), pending: 60, oldest: t0.Add(-ms), peak: 64}, batchDecision{start: true}},
		{"half the population waits for the rest", batchState{now: t0, lastStart: t0.Add(-3 * ms), pending: 32, oldest: t0.Add(-ms), peak: 64}, batchDecision{at: t0.Add(4 * ms)}},
		{"the oldest read has waited enough", batchState{now: t0, lastStart: t0.Add(-9 * ms), pending: 32, oldest: t0.Add(-5 * ms), peak: 64}, batchDecision{start: true}},
		{"the gap comes first", batchState{now: t0, lastStart: t0.Add(-ms), pending: 64, oldest: t0, peak: 64}, batchDecision{at: t0.Add(ms)}},
		{"a hub's round is not held here", batchState{now: t0, lastStart: t0.Add(-3 * ms), shared: true, pending: 1, oldest: t0, peak: 64}, batchDecision{start: true}},
		{"a hub's round keeps the gap", batchState{now: t0, lastStart: t0.Add(-ms), shared: true, pending: 1, oldest: t0, peak: 64}, batchDecision{at: t0.Add(ms)}},
		{"an own round waits for the own round in flight", batchState{now: t0, lastStart: t0.Add(-9 * ms), pending: 1, oldest: t0, peak: 1, ownInFlight: true}, batchDecision{}},
		{"a due round waits for the own round in flight", batchState{now: t0, lastStart: t0.Add(-9 * ms), due: true, ownInFlight: true}, batchDecision{}},
		{"a hub's round starts beside an own round", batchState{now: t0, lastStart: t0.Add(-9 * ms), shared: true, pending: 1, oldest: t0, peak: 1, ownInFlight: true, hubMax: 4}, batchDecision{start: true}},
		{"hub rounds overlap, spaced by the last one's duration over the cap", batchState{now: t0, lastStart: t0.Add(-10 * ms), shared: true, pending: 1, oldest: t0, peak: 1, hubInFlight: 1, hubMax: 4, hubTook: 100 * ms}, batchDecision{at: t0.Add(15 * ms)}},
		{"an overlapping hub round keeps at least the gap", batchState{now: t0, lastStart: t0.Add(-ms), shared: true, pending: 1, oldest: t0, peak: 1, hubInFlight: 1, hubMax: 4, hubTook: 4 * ms}, batchDecision{at: t0.Add(ms)}},
		{"hub rounds in flight up to the cap", batchState{now: t0, lastStart: t0.Add(-90 * ms), shared: true, pending: 1, oldest: t0, peak: 1, hubInFlight: 4, hubMax: 4, hubTook: 100 * ms}, batchDecision{}},
		{"a cap of 0 is 1", batchState{now: t0, lastStart: t0.Add(-90 * ms), shared: true, pending: 1, oldest: t0, peak: 1, hubInFlight: 1, hubTook: 100 * ms}, batchDecision{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := p.next(tc.s); got != tc.want {
				t.Fatalf("next(%+v) = %+v, want %+v", tc.s, got, tc.want)
			}
		})
	}
	// Without a max wait, any waiting read starts a round once the gap allows.
	if got := (batchPolicy{minGap: 2 * ms}).next(batchState{now: t0, pending: 1, oldest: t0, peak: 64}); !got.start {
		t.Fatalf("maxWait 0: %+v, want a round at once", got)
	}
}

// Readers in a closed loop (each reads again as soon as it is served) are
// served by one round per cycle: a round waits for the readers that are
// coming back rather than splitting them across two rounds, and stops
// waiting for readers that left after maxWait.
func TestRoundsWaitForTheReadersThatAreComingBack(t *testing.T) {
	clock := clockwork.NewFakeClock()
	fr := newFakeRounds()
	f := NewFreshness(zaptest.NewLogger(t), clock, time.Hour, 0, time.Minute, ProverFunc(fr.round), nil)
	f.batch.maxWait = 5 * time.Millisecond
	runLoop(t, f)

	read := func() chan error {
		ch := make(chan error, 1)
		go func() { ch <- f.WaitRound(context.Background()) }()
		return ch
	}
	served := func(chs ...chan error) {
		t.Helper()
		for _, ch := range chs {
			if err := recv(t, ch); err != nil {
				t.Fatal(err)
			}
		}
	}
	a := read()
	recv(t, fr.started) // round 1, for a alone
	b, c, d := read(), read(), read()
	waitUntil(t, func() bool { return f.pendingReads() == 3 })
	send(t, fr.results, nil)
	served(a)
	// Four readers waited at once: round 2 waits for a to come back. Had
	// it started with b, c and d, a would wait for a round 3 that waits
	// maxWait for the four (the clock does not move): the test would hang.
	a = read()
	recv(t, fr.started)
	send(t, fr.results, nil)
	served(a, b, c, d)
	if got := f.roundsStarted(); got != 2 {
		t.Fatalf("%d rounds for two cycles of four readers, want 2", got)
	}

	// c and d leave for good: a and b wait maxWait, no more.
	a, b = read(), read()
	waitUntil(t, func() bool { return f.pendingReads() == 2 })
	select {
	case <-fr.started:
		t.Fatal("a round started with half the readers still to come back")
	default:
	}
	clock.Advance(5 * time.Millisecond)
	recv(t, fr.started)
	send(t, fr.results, nil)
	served(a, b)
	// From then on the population is two: no more waiting.
	a, b = read(), read()
	recv(t, fr.started)
	send(t, fr.results, nil)
	served(a, b)
}

func (f *Freshness) pendingReads() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.pending
}

func (f *Freshness) roundsStarted() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.started
}

// A failed round wakes the reads it would have served: they register for
// the next round, which starts without waiting for a background round.
func TestAFailedRoundIsRetriedForItsReads(t *testing.T) {
	clock := clockwork.NewFakeClock()
	fr := newFakeRounds()
	f := NewFreshness(zaptest.NewLogger(t), clock, time.Hour, 0, time.Minute, ProverFunc(fr.round), nil)
	ctx := runLoop(t, f)

	done := make(chan error, 1)
	go func() { done <- f.WaitRound(context.Background()) }()
	recv(t, fr.started)
	send(t, fr.results, context.DeadlineExceeded)
	// the retry gap's timer, not the hour-long period
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(roundRetryGap)
	recv(t, fr.started)
	send(t, fr.results, nil)
	if err := recv(t, done); err != nil {
		t.Fatal(err)
	}
}
