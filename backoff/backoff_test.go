package backoff

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine they started is still
// running when they end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const ms = time.Millisecond

// Each case calls Next len(want) times (Reset where resetAfter says) and
// expects exactly want.
func TestExponential(t *testing.T) {
	none := func(time.Duration) time.Duration { return 0 }
	full := func(n time.Duration) time.Duration { return n }
	for _, tc := range []struct {
		name       string
		e          Exponential
		resetAfter int // Reset after this many calls; 0: never
		want       []time.Duration
	}{
		{"doubles to Max and stays", Exponential{Initial: 100 * ms, Max: 2 * time.Second},
			0, []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 2 * time.Second, 2 * time.Second}},
		{"Max between two doublings caps the next", Exponential{Initial: 100 * ms, Max: 5 * time.Second},
			0, []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 5 * time.Second, 5 * time.Second}},
		{"Initial above Max is capped", Exponential{Initial: 3 * time.Second, Max: 2 * time.Second},
			0, []time.Duration{2 * time.Second, 2 * time.Second}},
		{"Initial equal to Max", Exponential{Initial: time.Second, Max: time.Second},
			0, []time.Duration{time.Second, time.Second}},
		{"Reset goes back to Initial", Exponential{Initial: 100 * ms, Max: 2 * time.Second},
			3, []time.Duration{100 * ms, 200 * ms, 400 * ms, 100 * ms, 200 * ms}},
		{"a Max near the largest duration does not overflow", Exponential{Initial: time.Duration(1) << 61, Max: time.Duration(1<<63 - 1)},
			0, []time.Duration{1 << 61, 1 << 62, 1<<63 - 1, 1<<63 - 1}},
		{"no jitter (0) is half the delay", Exponential{Initial: 100 * ms, Max: 400 * ms, Jitter: none},
			0, []time.Duration{50 * ms, 100 * ms, 200 * ms, 200 * ms}},
		{"full jitter (n) is the delay", Exponential{Initial: 100 * ms, Max: 400 * ms, Jitter: full},
			0, []time.Duration{100 * ms, 200 * ms, 400 * ms, 400 * ms}},
		{"jitter below 0 is clamped to half the delay", Exponential{Initial: 100 * ms, Max: 400 * ms, Jitter: func(time.Duration) time.Duration { return -time.Hour }},
			0, []time.Duration{50 * ms, 100 * ms, 200 * ms}},
		{"jitter above n is clamped to the delay", Exponential{Initial: 100 * ms, Max: 400 * ms, Jitter: func(n time.Duration) time.Duration { return 10 * n }},
			0, []time.Duration{100 * ms, 200 * ms, 400 * ms}},
		{"jitter does not slow the doubling", Exponential{Initial: 100 * ms, Max: 5 * time.Second, Jitter: func(n time.Duration) time.Duration { return n / 2 }},
			0, []time.Duration{75 * ms, 150 * ms, 300 * ms, 600 * ms, 1200 * ms, 2400 * ms, 3750 * ms}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.e
			var got []time.Duration
			for i := range tc.want {
				if tc.resetAfter > 0 && i == tc.resetAfter {
					e.Reset()
				}
				got = append(got, e.Next())
			}
			for i := range tc.want {
				if got[i] != tc.want[i] {
					t.Fatalf("Next calls returned %v; want %v", got, tc.want)
				}
			}
		})
	}
}

// Random jitter, as a caller gives it: every delay is within [d/2, d] of
// the delay d without jitter, and Jitter is asked about d/2.
func TestExponentialJitterBounds(t *testing.T) {
	plain := Exponential{Initial: 100 * ms, Max: 5 * time.Second}
	var asked time.Duration
	jittered := Exponential{Initial: 100 * ms, Max: 5 * time.Second, Jitter: func(n time.Duration) time.Duration {
		asked = n
		return rand.N(n + 1)
	}}
	for i := range 1000 {
		if i%20 == 0 {
			plain.Reset()
			jittered.Reset()
		}
		d, got := plain.Next(), jittered.Next()
		if asked != d/2 {
			t.Fatalf("call %d: Jitter asked about %v; want half of %v", i, asked, d)
		}
		if got < d/2 || got > d {
			t.Fatalf("call %d: %v; want within [%v, %v]", i, got, d/2, d)
		}
	}
}

func TestWait(t *testing.T) {
	t.Run("the delay passes", func(t *testing.T) {
		clock := clockwork.NewFakeClock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- Wait(ctx, clock, 200*ms) }()
		if err := clock.BlockUntilContext(ctx, 1); err != nil {
			t.Fatal(err)
		}
		clock.Advance(199 * ms)
		select {
		case err := <-done:
			t.Fatalf("Wait returned %v before the delay passed", err)
		default:
		}
		clock.Advance(ms)
		if err := <-done; err != nil {
			t.Fatalf("Wait = %v; want nil once the delay passed", err)
		}
	})
	t.Run("ctx ends first", func(t *testing.T) {
		clock := clockwork.NewFakeClock()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- Wait(ctx, clock, time.Hour) }()
		if err := clock.BlockUntilContext(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait = %v; want %v", err, context.Canceled)
		}
	})
	t.Run("ctx ended already", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		// A zero delay would be as ready as ctx: ctx's end wins.
		if err := Wait(ctx, clockwork.NewFakeClock(), 0); !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait = %v; want %v", err, context.Canceled)
		}
	})
}
