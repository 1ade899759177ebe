package readindex

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/zap/zaptest"
)

// quietFreshness is a loop with rounds every 50ms while bounded reads come,
// every second while requests come, and every 10s once none has come for
// 10s.
func quietFreshness(t *testing.T) (*Freshness, *clockwork.FakeClock, *fakeRounds, context.Context) {
	return freshnessLoop(t, 10*time.Second)
}

// freshnessLoop is quietFreshness with quiet as the quiet interval (0:
// never quiet).
func freshnessLoop(t *testing.T, quiet time.Duration) (*Freshness, *clockwork.FakeClock, *fakeRounds, context.Context) {
	clock := clockwork.NewFakeClock()
	fr := newFakeRounds()
	f := NewFreshness(zaptest.NewLogger(t), clock, 50*time.Millisecond, 0, time.Minute, ProverFunc(fr.round), nil)
	f.idleInterval, f.quietInterval = time.Second, quiet
	return f, clock, fr, runLoop(t, f)
}

// idleRound lets the loop's next timer fire after d, and completes the
// round it starts.
func idleRound(t *testing.T, ctx context.Context, clock *clockwork.FakeClock, fr *fakeRounds, d time.Duration) {
	t.Helper()
	touchedRound(t, ctx, clock, fr, d, nil)
}

// touchedRound is idleRound with touch called while the loop waits for
// its timer, so that the loop sees it when the timer fires.
func touchedRound(t *testing.T, ctx context.Context, clock *clockwork.FakeClock, fr *fakeRounds, d time.Duration, touch func()) {
	t.Helper()
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if touch != nil {
		touch()
	}
	clock.Advance(d)
	recv(t, fr.started)
	send(t, fr.results, nil)
}

// noRoundWithin fails if the loop starts a round when the clock moves d.
func noRoundWithin(t *testing.T, ctx context.Context, clock *clockwork.FakeClock, fr *fakeRounds, d time.Duration, why string) {
	t.Helper()
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(d)
	select {
	case <-fr.started:
		t.Fatal(why)
	case <-time.After(50 * time.Millisecond):
	}
}

func TestRoundsGoQuietWhileNoRequestComes(t *testing.T) {
	f, clock, fr, ctx := quietFreshness(t)

	// Requests come: rounds every second, however long.
	for range 15 {
		touchedRound(t, ctx, clock, fr, time.Second, f.Touch)
	}
	if f.Quiet() {
		t.Fatal("quiet while requests came every second")
	}
	// None for 10s (the loop last saw one at the 15th round): rounds for
	// 9 more seconds, then quiet, rounds 10s apart.
	for range 9 {
		idleRound(t, ctx, clock, fr, time.Second)
	}
	noRoundWithin(t, ctx, clock, fr, time.Second, "a replica with no request for 10s ran a round a second after the last")
	waitUntil(t, func() bool { return f.Quiet() && f.Period() == 10*time.Second })
	noRoundWithin(t, ctx, clock, fr, 5*time.Second, "a quiet replica ran a round 6s after the last")
	clock.Advance(4 * time.Second)
	recv(t, fr.started)
	send(t, fr.results, nil)
	if age := f.Age(); age > 10*time.Second {
		t.Fatalf("a quiet replica's freshness is %v old after its round", age)
	}

	// The first request after the quiet spell starts a round at once (the
	// last one was more than a second ago), with no timer firing.
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(3 * time.Second)
	f.Touch()
	recv(t, fr.started)
	send(t, fr.results, nil)
	waitUntil(t, func() bool { return !f.Quiet() && f.Period() == time.Second })
}

func TestBoundedReadsKeepFullRateEvenWhenQuiet(t *testing.T) {
	f, clock, fr, ctx := quietFreshness(t)
	for range 9 {
		idleRound(t, ctx, clock, fr, time.Second)
	}
	noRoundWithin(t, ctx, clock, fr, time.Second, "a replica with no request for 10s ran a round a second after the last")
	waitUntil(t, f.Quiet)
	// A bounded read (Demand; its RPC also touches): rounds every 50ms.
	f.Touch()
	f.Demand(100 * time.Millisecond)
	recv(t, fr.started)
	send(t, fr.results, nil)
	idleRound(t, ctx, clock, fr, 50*time.Millisecond)
	if f.Quiet() || f.Period() != 50*time.Millisecond {
		t.Fatalf("after a bounded read: quiet %v, period %v; want not quiet, 50ms", f.Quiet(), f.Period())
	}
}

func TestNeverQuietWithoutAQuietInterval(t *testing.T) {
	f, clock, fr, ctx := freshnessLoop(t, 0)
	for range 40 {
		idleRound(t, ctx, clock, fr, time.Second)
	}
	if f.Quiet() || f.Period() != time.Second {
		t.Fatalf("no quiet interval, 40s without requests: quiet %v, period %v; want not quiet, 1s", f.Quiet(), f.Period())
	}
}

func TestLooseBoundsNeedNoFastRounds(t *testing.T) {
	f, clock, fr, ctx := quietFreshness(t)
	// A balancer's probe: a bounded read of 5s, every second. Idle rounds
	// (every 1s) serve it: no round 50ms later.
	for range 3 {
		f.Touch()
		f.Demand(5 * time.Second)
		idleRound(t, ctx, clock, fr, time.Second)
	}
	noRoundWithin(t, ctx, clock, fr, 50*time.Millisecond, "a 5s bound brought rounds every 50ms")
	if p := f.Period(); p != time.Second {
		t.Fatalf("period %v with bounds of 5s coming; want the idle 1s", p)
	}
	// A 1.5s bound is tighter than two idle intervals: full rate, from
	// now (the last round ended 50ms ago), not once the idle wait is over.
	f.Demand(1500 * time.Millisecond)
	recv(t, fr.started)
	send(t, fr.results, nil)
	idleRound(t, ctx, clock, fr, 50*time.Millisecond)
}

func TestProvedMovesFreshnessForward(t *testing.T) {
	f, clock, _, _ := quietFreshness(t)
	t0 := clock.Now()
	clock.Advance(3 * time.Second)
	f.Proved(t0.Add(2 * time.Second))
	if got := f.AsOf(); !got.Equal(t0.Add(2 * time.Second)) {
		t.Fatalf("AsOf %v after a proof as of t0+2s, want it", got.Sub(t0))
	}
	f.Proved(t0.Add(time.Second)) // older: no effect
	if got := f.AsOf(); !got.Equal(t0.Add(2 * time.Second)) {
		t.Fatalf("an older proof moved AsOf back to t0+%v", got.Sub(t0))
	}
	// A reader waiting for freshness as of t0+2.5s is woken by a proof.
	done := make(chan error, 1)
	go func() { done <- f.WaitFresh(context.Background(), t0.Add(2500*time.Millisecond)) }()
	waitUntil(t, func() bool { return f.Waiting() == 1 })
	f.Proved(t0.Add(3 * time.Second))
	if err := recv(t, done); err != nil {
		t.Fatal(err)
	}
}
