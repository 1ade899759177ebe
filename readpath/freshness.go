package readpath

import (
	"context"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/zap"
)

// Freshness knows how fresh the local store is. A ReadIndex round that
// started at t and completed (the replica has applied the leader's commit
// index as of t) proves that every write acknowledged before t is visible
// here: local state is "fresh as of t", and now−t bounds its staleness. This
// is a closed timestamp in CockroachDB's sense, kept up by a background round
// every interval and by rounds that bounded reads ask for.
type Freshness struct {
	lg       *zap.Logger
	clock    clockwork.Clock
	round    func(context.Context) error
	interval time.Duration
	timeout  time.Duration
	observe  func(d time.Duration, err error)

	// kick asks the loop for a round now; buffered 1, so asks made while a
	// round is pending coalesce into it.
	kick chan struct{}

	mu struct {
		sync.Mutex
		asOf time.Time
		// changed is closed, and replaced, whenever asOf moves.
		changed chan struct{}
	}
}

// NewFreshness returns a tracker whose rounds call round (in a replica,
// EtcdServer.LinearizableReadNotify, which etcd batches with client reads).
// observe, if not nil, is told each round's duration and outcome.
func NewFreshness(lg *zap.Logger, clock clockwork.Clock, interval, timeout time.Duration, round func(context.Context) error, observe func(time.Duration, error)) *Freshness {
	f := &Freshness{lg: lg, clock: clock, round: round, interval: interval, timeout: timeout, observe: observe, kick: make(chan struct{}, 1)}
	f.mu.changed = make(chan struct{})
	return f
}

// AsOf returns the time the local store is known fresh as of; zero if never.
func (f *Freshness) AsOf() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.asOf
}

// Age is how stale the local store may be now; the maximum duration if it
// has never been confirmed.
func (f *Freshness) Age() time.Duration {
	asOf := f.AsOf()
	if asOf.IsZero() {
		return time.Duration(1<<63 - 1)
	}
	return f.clock.Since(asOf)
}

// WaitFresh returns once the local store is known fresh as of need or later,
// asking for rounds as needed, or with ctx's error.
func (f *Freshness) WaitFresh(ctx context.Context, need time.Time) error {
	for {
		f.mu.Lock()
		asOf, changed := f.mu.asOf, f.mu.changed
		f.mu.Unlock()
		if !asOf.Before(need) {
			return nil
		}
		select {
		case f.kick <- struct{}{}:
		default:
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// confirm records a completed round that started at start.
func (f *Freshness) confirm(start time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !start.After(f.mu.asOf) {
		return
	}
	f.mu.asOf = start
	close(f.mu.changed)
	f.mu.changed = make(chan struct{})
}

// Run does rounds every interval, and whenever a waiter asks, until ctx ends.
// It is the tracker's only loop; the caller owns it.
func (f *Freshness) Run(ctx context.Context) {
	t := f.clock.NewTicker(f.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		case <-f.kick:
		}
		f.Round(ctx)
	}
}

// Round does one ReadIndex round and, if it completes, moves AsOf to the
// time it started.
func (f *Freshness) Round(ctx context.Context) {
	start := f.clock.Now()
	rctx, cancel := context.WithTimeout(ctx, f.timeout)
	err := f.round(rctx)
	cancel()
	if f.observe != nil {
		f.observe(f.clock.Since(start), err)
	}
	if err != nil {
		if ctx.Err() == nil {
			f.lg.Debug("freshness round failed", zap.Error(err))
		}
		return
	}
	f.confirm(start)
}
