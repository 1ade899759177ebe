package readindex

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
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
// leader pays for rounds, not reads — the lever docs/scaling.md measures.
//
// A quiet replica's background round may be aged (ProofRequest.AcceptAged,
// Proof.Aged): a cascaded replica's upkeep answered from its upstream's
// last round, which moves AsOf to before its start and serves no strong
// read.
//
// A round is the replica's own (a ReadIndex through the leader) or, with
// via set (--read-index-via), may be a hub's read index applied here. Both
// serve strong reads: the hub's round started after the request. Only own
// rounds move AsOf and tell leader contact: a hub's answer is another
// process's word, and a bound on staleness is never proved by it. So a
// round is own when a background round is due or a bounded read waits for
// it; otherwise (only strong reads wait) it may go through a hub.
type Freshness struct {
	lg       *zap.Logger
	clock    clockwork.Clock
	prover   Prover
	interval time.Duration
	timeout  time.Duration
	observe  func(d time.Duration, own bool, err error)
	batch    batchPolicy
	// via, if set, does a round through a hub (--read-index-via); it
	// reports own when it fell back to an own round.
	via func(context.Context) (own bool, err error)
	// shared, if set, tells whether a round through via will ask a hub
	// (which batches on its side) rather than fall back at once.
	shared func() bool
	// hubMax is the most rounds through hubs in flight at once (see
	// batchPolicy); 0 means 1.
	hubMax int

	// idleInterval, if more than interval, is the period of rounds while
	// no bounded read with a bound under twice it has come for idleAfter
	// (see Demand): a replica nobody asks for tight bounded reads costs
	// the leader almost nothing (strong reads and
	// bounded reads that need a round ask for one at once).
	idleInterval time.Duration
	// quietInterval, if more than the other periods, is the period of
	// rounds once no client request has come for as long (see Touch): a
	// replica nobody uses then costs the leader about what a stock learner
	// costs it, whatever the number of replicas. The first request after
	// a quiet spell wakes the loop, which starts a round at once.
	quietInterval time.Duration
	// touched: a client request came since the loop last looked (Touch);
	// on a cache line of its own, as every request reads it. quiet: the
	// loop runs at quietInterval; periodNs: the background period the
	// loop runs at now. All three are used without mu: Touch is on every
	// request's path.
	touched  paddedBool
	quiet    atomic.Bool
	periodNs atomic.Int64

	// kick tells the loop that a read began waiting for the next round;
	// buffered 1, so kicks made while the loop is busy coalesce.
	kick chan struct{}

	mu struct {
		sync.Mutex
		asOf time.Time
		// started counts rounds begun; completed is the number of the
		// latest round that succeeded. Rounds through hubs overlap, so
		// they may end out of order: inFlight holds the numbers of the
		// rounds under way.
		started, completed uint64
		inFlight           []uint64
		// ownInFlight counts own rounds under way (one, but for a race
		// the next round's start tolerates), ownStart is when the last
		// of them started, and ownEnded when the last one ended: the
		// background rounds' period runs from there.
		ownInFlight int
		ownStart    time.Time
		ownEnded    time.Time
		// ownAgeable: the own round in flight may prove the store fresh
		// only as of before ownStart (an aged proof); proofLag is how much
		// before its start the last own round's proof was (ProofLag).
		ownAgeable bool
		proofLag   time.Duration
		// hubInFlight counts rounds through hubs under way; hubTook is
		// how long the last one that succeeded took; overlapped counts
		// those that began while another was under way.
		hubInFlight int
		hubTook     time.Duration
		overlapped  uint64
		// ownWanted: a read waiting for round started+1 needs it to be
		// an own round (a bounded read).
		ownWanted bool
		// failedAt is when the last round failed, if the last failed.
		failedAt time.Time
		// changed is closed, and replaced, whenever a round ends.
		changed chan struct{}
		// waiting counts reads waiting for a round; peak is the most
		// that waited at once since the last round began; upkeep: of
		// those waiting, the reads a replica asked for its own upkeep
		// (ForUpkeep), no client's.
		waiting, peak, upkeep int
		// pending counts the reads waiting for round started+1, which
		// has not begun; oldest is when the first of them registered.
		pending int
		oldest  time.Time
		// demand is when a bounded read last came; active is when the
		// loop last saw a client request (Touch).
		demand, active time.Time
	}
}

// idleAfter is how long after the last bounded read rounds slow down to
// the idle interval.
const idleAfter = 5 * time.Second

// NewFreshness returns a tracker whose own rounds ask p for a proof (in a
// learner replica, EtcdServer.LinearizableReadNotify: a ReadIndex through
// the leader, then a wait until it is applied here). A round runs every
// interval, and on demand no sooner than minGap after the previous one.
// observe, if not nil, is told each round's duration, whether it was an own
// round, and its outcome.
func NewFreshness(lg *zap.Logger, clock clockwork.Clock, interval, minGap, timeout time.Duration, p Prover, observe func(d time.Duration, own bool, err error)) *Freshness {
	f := &Freshness{lg: lg, clock: clock, prover: p, interval: interval, timeout: timeout, observe: observe, kick: make(chan struct{}, 1)}
	f.batch.minGap = minGap
	f.mu.changed = make(chan struct{})
	return f
}

// Proved records a ReadIndex round that another caller of the member's
// round function ran (etcd's linearizable_read readiness check, through the
// same LinearizableReadNotify): it started after start and completed, so
// the local store is fresh as of start.
func (f *Freshness) Proved(start time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !start.After(f.mu.asOf) {
		return
	}
	f.mu.asOf = start
	close(f.mu.changed)
	f.mu.changed = make(chan struct{})
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
// asking for own rounds as needed, or with ctx's error. A read of ctx
// marked ForUpkeep is no client's (see there).
func (f *Freshness) WaitFresh(ctx context.Context, need time.Time) error {
	return f.wait(ctx, true,
		func() bool { return !f.mu.asOf.Before(need) },
		func() bool { return f.mu.ownInFlight > 0 && !f.mu.ownAgeable && !f.mu.ownStart.Before(need) })
}

// WaitRound returns once a round that started after the call has completed:
// the local store then holds every write acknowledged before the call, so a
// local read is linearizable. A round already under way does not count: its
// read index may predate the call. A read of ctx marked ForUpkeep is no
// client's (see there).
func (f *Freshness) WaitRound(ctx context.Context) error {
	f.mu.Lock()
	target := f.mu.started + 1
	f.mu.Unlock()
	return f.waitRound(ctx, target)
}

// waitRound returns once round target, or a later one, has completed (an
// aged round completes none: see Proof).
func (f *Freshness) waitRound(ctx context.Context, target uint64) error {
	return f.wait(ctx, false,
		func() bool { return f.mu.completed >= target },
		func() bool { return slices.ContainsFunc(f.mu.inFlight, func(n uint64) bool { return n >= target }) })
}

// HubRounds is the number of rounds through hubs under way, and how many
// have begun while another was (see batchPolicy).
func (f *Freshness) HubRounds() (inFlight int, overlapped uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.hubInFlight, f.mu.overlapped
}

// Demand records a bounded read with the given bound: rounds keep their
// full rate while bounded reads come that the idle rate could not serve
// locally (a bound under twice the idle interval: between idle rounds the
// freshness age climbs to the interval plus up to two rounds, well under
// twice the interval while a round takes under half of it). A looser bound, as a
// balancer's probes carry (5s by default) while its clients use no tighter
// budget, is served by idle rounds alone and costs the leader no more
// rounds. (A balancer whose clients use tight budgets probes with the
// tightest: its replicas stay at the full rate for them.)
func (f *Freshness) Demand(bound time.Duration) {
	if f.idleInterval > f.interval && bound >= 2*f.idleInterval {
		return
	}
	now := f.clock.Now()
	f.mu.Lock()
	f.mu.demand = now
	f.mu.Unlock()
	if f.periodNs.Load() > int64(f.interval) {
		// The loop waits out a slower period: it starts the full rate
		// now, not when that wait ends.
		select {
		case f.kick <- struct{}{}:
		default:
		}
	}
}

// paddedBool is an atomic.Bool alone on its cache line: the loop's and the
// reads' writes to the fields around it do not evict it from the cores
// that only read it.
type paddedBool struct {
	_ [64]byte
	atomic.Bool
	_ [64]byte
}

// Touch records a client request (any RPC, the JSON gateway's included,
// and a hub's read-index request; not /metrics or health probes): rounds
// keep at least their idle rate while requests come. Cheap enough for
// every request: a load, and a store only when the loop has looked since
// the last one.
func (f *Freshness) Touch() {
	if f.touched.Load() || !f.touched.CompareAndSwap(false, true) {
		return
	}
	if f.quiet.Load() {
		select {
		case f.kick <- struct{}{}:
		default:
		}
	}
}

// Quiet tells whether no client request has come for a quiet interval,
// so that background rounds run that far apart.
func (f *Freshness) Quiet() bool { return f.quiet.Load() }

// Period is the background rounds' period now: the freshness interval,
// the idle interval or the quiet interval (see period).
func (f *Freshness) Period() time.Duration { return time.Duration(f.periodNs.Load()) }

// Waiting is the number of reads waiting for a round now.
func (f *Freshness) Waiting() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.waiting
}

// wait returns once done holds, or with ctx's error. done, and covered
// (would a round in flight, if it succeeds, make done hold), are called
// with mu held. A read not covered by the round in flight registers for
// the next round, which must be an own round if own, and tells the loop.
func (f *Freshness) wait(ctx context.Context, own bool, done, covered func() bool) error {
	var reg uint64 // the round this read registered for; 0 if none
	upkeep := isUpkeep(ctx)
	f.mu.Lock()
	f.mu.waiting++
	f.mu.peak = max(f.mu.peak, f.mu.waiting)
	if upkeep {
		f.mu.upkeep++
	}
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.mu.waiting--
		if upkeep {
			f.mu.upkeep--
		}
		if reg == f.mu.started+1 {
			f.mu.pending--
		}
		f.mu.Unlock()
	}()
	for {
		f.mu.Lock()
		if done() {
			f.mu.Unlock()
			return nil
		}
		register := !covered() && reg != f.mu.started+1
		if register {
			reg = f.mu.started + 1
			if f.mu.pending == 0 {
				f.mu.oldest = f.clock.Now()
			}
			f.mu.pending++
		}
		if own && reg == f.mu.started+1 {
			f.mu.ownWanted = true
		}
		changed := f.mu.changed
		f.mu.Unlock()
		if register {
			select {
			case f.kick <- struct{}{}:
			default:
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// upkeepKey marks a context ForUpkeep.
type upkeepKey struct{}

// ForUpkeep marks the reads waiting with ctx (WaitRound, WaitFresh) as a
// replica's upkeep, no client's (wire.BackgroundKey: a cascaded replica's
// background round, asked of this one). A round that only such reads wait
// for is still a background round (ProofRequest.Background): asked of an
// upstream, it is upkeep there too, and does not wake it from quiet. It is
// not ageable (ProofRequest.AcceptAged): a read waits for its proof.
func ForUpkeep(ctx context.Context) context.Context {
	return context.WithValue(ctx, upkeepKey{}, true)
}

func isUpkeep(ctx context.Context) bool {
	v, _ := ctx.Value(upkeepKey{}).(bool)
	return v
}
