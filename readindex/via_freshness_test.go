package readindex

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/zap/zaptest"
)

// fakeViaRounds lets a test decide how each round through a hub ends: own
// tells that the round fell back to an own round.
type fakeViaRounds struct {
	started chan struct{}
	results chan viaResult
}

type viaResult struct {
	own bool
	err error
}

func newFakeViaRounds() *fakeViaRounds {
	return &fakeViaRounds{started: make(chan struct{}, 16), results: make(chan viaResult)}
}

func (f *fakeViaRounds) round(ctx context.Context) (bool, error) {
	f.started <- struct{}{}
	select {
	case r := <-f.results:
		return r.own, r.err
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// roundObservation is what Freshness tells its observer of one round.
type roundObservation struct {
	own bool
	err error
}

// viaFreshness is a Freshness whose rounds may go through a hub.
func viaFreshness(t *testing.T, clock clockwork.Clock) (*Freshness, *fakeRounds, *fakeViaRounds, chan roundObservation) {
	fr, via := newFakeRounds(), newFakeViaRounds()
	seen := make(chan roundObservation, 16)
	f := NewFreshness(zaptest.NewLogger(t), clock, time.Hour, 0, time.Minute, ProverFunc(fr.round),
		func(_ time.Duration, own bool, err error) { seen <- roundObservation{own, err} })
	f.via, f.shared = via.round, func() bool { return true }
	return f, fr, via, seen
}

// A hub's round serves strong reads but proves no freshness and no leader
// contact: a hub is another process's word.
func TestAHubRoundServesStrongReadsButMovesNoFreshness(t *testing.T) {
	clock := clockwork.NewFakeClock()
	f, _, via, seen := viaFreshness(t, clock)
	runLoop(t, f)

	waited := make(chan error, 1)
	go func() { waited <- f.WaitRound(context.Background()) }()
	recv(t, via.started) // a strong read's round goes through the hub
	send(t, via.results, viaResult{})
	if err := recv(t, waited); err != nil {
		t.Fatal(err)
	}
	if o := recv(t, seen); o.own || o.err != nil {
		t.Fatalf("observed %+v, want a successful round that was not own", o)
	}
	if !f.AsOf().IsZero() {
		t.Fatalf("a hub's round made the store fresh as of %v", f.AsOf())
	}

	// A round through the hub that fell back to an own round proves.
	start := clock.Now()
	go func() { waited <- f.WaitRound(context.Background()) }()
	recv(t, via.started)
	send(t, via.results, viaResult{own: true})
	if err := recv(t, waited); err != nil {
		t.Fatal(err)
	}
	if o := recv(t, seen); !o.own || !f.AsOf().Equal(start) {
		t.Fatalf("observed %+v, AsOf %v: want an own round, fresh as of %v", o, f.AsOf(), start)
	}
}

// A bounded read needs its bound proved by an own round, even while
// strong reads share the hub's: it starts one at once, beside the hub's
// round in flight, and the hub's round does not serve it.
func TestABoundedReadGetsAnOwnRound(t *testing.T) {
	clock := clockwork.NewFakeClock()
	f, fr, via, _ := viaFreshness(t, clock)
	runLoop(t, f)

	strong := make(chan error, 1)
	go func() { strong <- f.WaitRound(context.Background()) }()
	recv(t, via.started) // round 1, through the hub, in flight

	// The bounded read arrives while the hub's round is in flight: that
	// round would not prove its bound, so it gets an own one.
	bounded := make(chan error, 1)
	need := clock.Now()
	go func() { bounded <- f.WaitFresh(context.Background(), need) }()
	recv(t, fr.started) // round 2 is own, beside round 1
	send(t, via.results, viaResult{})
	if err := recv(t, strong); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-bounded:
		t.Fatalf("the bounded read returned (%v) before an own round proved its bound", err)
	default:
	}
	send(t, fr.results, nil)
	if err := recv(t, bounded); err != nil {
		t.Fatal(err)
	}
	if len(via.started) != 0 {
		t.Fatal("the bounded read's round went through the hub")
	}
}

// Background rounds keep freshness: they are own rounds.
func TestBackgroundRoundsAreOwn(t *testing.T) {
	clock := clockwork.NewFakeClock()
	fr, via := newFakeRounds(), newFakeViaRounds()
	f := NewFreshness(zaptest.NewLogger(t), clock, 50*time.Millisecond, 0, time.Minute, ProverFunc(fr.round), nil)
	f.via, f.shared = via.round, func() bool { return true }
	ctx := runLoop(t, f)
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(50 * time.Millisecond)
	recv(t, fr.started)
	send(t, fr.results, nil)
	waitUntil(t, func() bool { return !f.AsOf().IsZero() })
	if len(via.started) != 0 {
		t.Fatalf("%d background rounds through the hub", len(via.started))
	}
}
