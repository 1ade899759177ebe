// Package backoff is understudy's one exponential backoff: a delay that
// starts at Initial and doubles after every attempt up to Max, optionally
// jittered, and Wait, which waits one delay on an injected clock unless the
// context ends first. The policy is a plain value: it reads no clock and
// holds no goroutine, so tests drive it by calling Next.
package backoff

import (
	"context"
	"time"

	"github.com/jonboulle/clockwork"
)

// Exponential is a delay that doubles after every attempt. Set Initial
// and Max (and Jitter if wanted) and call Next; no constructor is needed.
// It is not safe for concurrent use: one retry loop owns it.
type Exponential struct {
	// Initial is the first delay, and the delay after Reset.
	Initial time.Duration
	// Max is the longest delay: the doubling stops there, and a Max
	// below Initial caps every delay at Max.
	Max time.Duration
	// Jitter, if not nil, spreads the delays of attempts that fail
	// together: with it Next returns d/2 + Jitter(d/2) for the current
	// delay d, a value in [d/2, d]. Jitter(n) returns a duration in
	// [0, n] (a random one, such as rand.N(n+1)); a result outside that
	// range is clamped into it. The doubling is of d, not of the jittered
	// value.
	Jitter func(n time.Duration) time.Duration

	// cur is the delay the next call of Next is based on; 0 before the
	// first call and after Reset.
	cur time.Duration
}

// Next returns the delay to wait before the next attempt, and doubles the
// current delay up to Max.
func (e *Exponential) Next() time.Duration {
	if e.cur == 0 {
		e.cur = e.Initial
	}
	d := min(e.cur, e.Max)
	if d > e.Max/2 {
		e.cur = e.Max // 2*d would pass Max, or overflow
	} else {
		e.cur = 2 * d
	}
	if e.Jitter == nil {
		return d
	}
	return d/2 + min(max(e.Jitter(d/2), 0), d/2)
}

// Reset goes back to Initial, as after an attempt that succeeded.
func (e *Exponential) Reset() { e.cur = 0 }

// Wait waits d on clock, and returns nil, or ctx's error if ctx ends first
// (at once if it has ended already).
func Wait(ctx context.Context, clock clockwork.Clock, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t := clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.Chan():
		return nil
	}
}
