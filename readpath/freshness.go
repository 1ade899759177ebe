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
//
// The same rounds serve strong reads (WaitRound): a read waits for a round
// that started after it arrived, then reads locally. Every read waiting when
// a round starts shares it, and rounds start at most every minGap, so the
// leader pays for rounds, not reads — the lever DESIGN.md measured.
type Freshness struct {
	lg       *zap.Logger
	clock    clockwork.Clock
	round    func(context.Context) error
	interval time.Duration
	minGap   time.Duration
	timeout  time.Duration
	observe  func(d time.Duration, err error)

	// idleInterval, if more than interval, is the period of rounds while
	// no bounded read has come for idleAfter: a replica nobody asks for
	// bounded reads costs the leader almost nothing (strong reads and
	// bounded reads that need a round ask for one at once).
	idleInterval time.Duration

	// kick asks the loop for a round now; buffered 1, so asks made while a
	// round is pending coalesce into it.
	kick chan struct{}

	mu struct {
		sync.Mutex
		asOf time.Time
		// started counts rounds begun; completed is the number of the
		// last round that succeeded. Rounds run one at a time, in order.
		started, completed uint64
		// changed is closed, and replaced, whenever a round succeeds.
		changed chan struct{}
		// waiting counts reads waiting for a round.
		waiting int
		// demand is when a bounded read last came.
		demand time.Time
	}
}

// idleAfter is how long after the last bounded read rounds slow down to
// the idle interval.
const idleAfter = 5 * time.Second

// NewFreshness returns a tracker whose rounds call round (in a replica,
// EtcdServer.LinearizableReadNotify: a ReadIndex through the leader, then a
// wait until it is applied here). A round runs every interval, and on demand
// no sooner than minGap after the previous one. observe, if not nil, is told
// each round's duration and outcome.
func NewFreshness(lg *zap.Logger, clock clockwork.Clock, interval, minGap, timeout time.Duration, round func(context.Context) error, observe func(time.Duration, error)) *Freshness {
	f := &Freshness{lg: lg, clock: clock, round: round, interval: interval, minGap: minGap, timeout: timeout, observe: observe, kick: make(chan struct{}, 1)}
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
	f.enter()
	defer f.leave()
	return f.wait(ctx, func() bool { return !f.mu.asOf.Before(need) })
}

// WaitRound returns once a round that started after the call has completed:
// the local store then holds every write acknowledged before the call, so a
// local read is linearizable. A round already under way does not count: its
// read index may predate the call.
func (f *Freshness) WaitRound(ctx context.Context) error {
	f.mu.Lock()
	target := f.mu.started + 1
	f.mu.waiting++
	f.mu.Unlock()
	defer f.leave()
	return f.wait(ctx, func() bool { return f.mu.completed >= target })
}

// Demand records a bounded read: rounds keep their full rate while bounded
// reads come, so that they are served locally.
func (f *Freshness) Demand() {
	now := f.clock.Now()
	f.mu.Lock()
	f.mu.demand = now
	f.mu.Unlock()
}

// period is the time to the next background round.
func (f *Freshness) period() time.Duration {
	if f.idleInterval <= f.interval {
		return f.interval
	}
	f.mu.Lock()
	demand := f.mu.demand
	f.mu.Unlock()
	if !demand.IsZero() && f.clock.Since(demand) <= idleAfter {
		return f.interval
	}
	return f.idleInterval
}

// Waiting is the number of reads waiting for a round now.
func (f *Freshness) Waiting() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.waiting
}

func (f *Freshness) enter() {
	f.mu.Lock()
	f.mu.waiting++
	f.mu.Unlock()
}

func (f *Freshness) leave() {
	f.mu.Lock()
	f.mu.waiting--
	f.mu.Unlock()
}

// wait asks for rounds until done (called with mu held) holds.
func (f *Freshness) wait(ctx context.Context, done func() bool) error {
	for {
		f.mu.Lock()
		ok, changed := done(), f.mu.changed
		f.mu.Unlock()
		if ok {
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

// begin numbers a new round; it must happen before the round's ReadIndex
// is requested.
func (f *Freshness) begin() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.started++
	return f.mu.started
}

// confirm records that round n, which started at start, completed.
func (f *Freshness) confirm(n uint64, start time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.completed = max(f.mu.completed, n)
	if start.After(f.mu.asOf) {
		f.mu.asOf = start
	}
	close(f.mu.changed)
	f.mu.changed = make(chan struct{})
}

// Run does rounds every interval (every idleInterval while no bounded read
// comes), and whenever a waiter asks, until ctx ends.
// It is the tracker's only loop; the caller owns it.
func (f *Freshness) Run(ctx context.Context) {
	var last time.Time
	for {
		// A bounded read arriving in an idle period asks for a round
		// itself (kick), so a long idle wait delays nobody.
		t := f.clock.NewTimer(f.period())
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.Chan():
		case <-f.kick:
			t.Stop()
		}
		// Space rounds out: reads arriving meanwhile join the next one.
		if gap := f.minGap - f.clock.Since(last); !last.IsZero() && gap > 0 {
			select {
			case <-ctx.Done():
				return
			case <-f.clock.After(gap):
			}
		}
		last = f.clock.Now()
		f.Round(ctx)
	}
}

// Round does one ReadIndex round and, if it completes, moves AsOf to the
// time it started.
func (f *Freshness) Round(ctx context.Context) {
	n := f.begin()
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
	f.confirm(n, start)
}
