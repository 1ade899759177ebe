package readindex

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/zap"
)

// The freshness loop and its rounds: when a round starts and what it is
// (Run, fed by the scheduler: schedule.go), its beginning (begin) and what
// its end proves (finish).

// begin numbers a new round and notes when it starts; it must happen
// before the round's ReadIndex is requested. Every pending read is the
// new round's. The round may go through a hub (viaHub) unless it must be
// own: wantOwn (a background round), or a bounded read waits for it; it
// takes a hub slot if a hub is usable (hubUsable), else it is an own
// round (through via, which falls back to one). If ageable, an own
// background round may come back aged (see ProofRequest.AcceptAged).
func (f *Freshness) begin(wantOwn, hubUsable, ageable bool) (r round) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mu.started++
	// Its kind by the reads waiting now, which become its own.
	k := kindOf(schedState{via: f.via != nil, hubUsable: hubUsable, ownWanted: f.mu.ownWanted,
		background: f.mu.waiting == f.mu.upkeep, idle: f.mu.waiting == 0}, wantOwn, ageable)
	r = round{n: f.mu.started, start: f.clock.Now(), viaHub: k.viaHub, hubSlot: k.hubSlot, background: k.background, ageable: k.ageable}
	if r.hubSlot {
		if f.mu.hubInFlight > 0 {
			f.mu.overlapped++
		}
		f.mu.hubInFlight++
	} else {
		f.mu.ownInFlight++
		if !r.viaHub {
			// Surely own: bounded reads that need it may wait for it,
			// unless its proof may come back older than its start.
			f.mu.ownStart, f.mu.ownAgeable = r.start, r.ageable
		}
	}
	f.mu.inFlight = append(f.mu.inFlight, r.n)
	f.mu.ownWanted = false
	f.mu.pending, f.mu.oldest = 0, time.Time{}
	f.mu.peak = f.mu.waiting
	return r
}

// round is a round under way.
type round struct {
	n     uint64
	start time.Time
	// viaHub: it goes through via; hubSlot: it counts among the rounds
	// through hubs in flight (a hub was usable when it began).
	viaHub, hubSlot bool
	// background: no client's read waited for it when it began (see
	// Background, ForUpkeep); ageable: it may prove the store fresh as of
	// before its start (see ProofRequest.AcceptAged).
	background, ageable bool
}

// ProofLag is how much older than its start the last own round's proof
// was: 0 after a round that proved the state as of its start, d after one
// answered aged (Proof.Aged). A replica keeps its schedule while its age is
// within its period plus this (and a margin).
func (f *Freshness) ProofLag() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mu.proofLag
}

// finish records the end of round r: if it succeeded, strong reads waiting
// for it may read, and if it was an own round, the store is fresh as of
// its start — or, if its proof was aged (Proof.Aged), as of that much
// before its start, and no strong read may read by it: a read may have
// begun waiting for it after it started (WaitRound takes the next round's
// number, then registers), and its proof predates the round. Waiters
// re-examine either way: those a failed or aged round would have served
// register for the next.
func (f *Freshness) finish(r round, own bool, proof Proof, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.clock.Now()
	f.mu.inFlight = slices.DeleteFunc(f.mu.inFlight, func(n uint64) bool { return n == r.n })
	if r.hubSlot {
		f.mu.hubInFlight--
		if err == nil && !own {
			f.mu.hubTook = now.Sub(r.start)
		}
	} else {
		f.mu.ownInFlight--
	}
	if own {
		f.mu.ownEnded = now
	}
	if err != nil {
		f.mu.failedAt = now
	} else {
		f.mu.failedAt = time.Time{}
		d, isAged := proof.Age, r.ageable && proof.Aged
		if !isAged {
			f.mu.completed = max(f.mu.completed, r.n)
		}
		if !isAged {
			d = 0 // only a round that could take an aged proof is aged
		}
		if own {
			f.mu.proofLag = d
			if proof := r.start.Add(-d); proof.After(f.mu.asOf) {
				f.mu.asOf = proof
			}
		}
	}
	close(f.mu.changed)
	f.mu.changed = make(chan struct{})
}

// roundRetryGap is the least time between a failed round and the next.
const roundRetryGap = 10 * time.Millisecond

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Run does a background round every period (every idleInterval while no
// bounded read that counts comes (see Demand), every quietInterval while
// no request comes) after
// the last own round ended, and rounds for
// waiting reads when the batch policy says, until ctx ends; then it waits
// for the rounds under way. Each round runs on a goroutine of its own,
// whose end wakes the loop: own rounds one at a time, rounds through hubs
// overlapping (see batchPolicy). It is the tracker's only loop; the
// caller owns it.
func (f *Freshness) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	var last time.Time
	f.mu.Lock()
	f.mu.ownEnded = f.clock.Now()
	f.mu.active = f.mu.ownEnded
	f.mu.Unlock()
	for {
		now := f.clock.Now()
		hubUsable := f.via != nil && f.shared != nil && f.shared()
		d := f.decide(now, last, hubUsable)
		if d.start {
			last = now
			r := f.begin(d.due, hubUsable, d.quiet)
			wg.Add(1)
			go func() {
				defer wg.Done()
				f.run(ctx, r)
				select {
				case f.kick <- struct{}{}:
				default:
				}
			}()
			continue
		}
		wake := d.wake
		var t clockwork.Timer
		var tc <-chan time.Time
		if !wake.IsZero() {
			t = f.clock.NewTimer(wake.Sub(now))
			tc = t.Chan()
		}
		select {
		case <-ctx.Done():
		case <-tc:
		case <-f.kick:
		}
		if t != nil {
			t.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// decide is the scheduler's decision now, on the tracker's state (and
// publishes the period it runs at: Period, Quiet).
func (f *Freshness) decide(now, lastStart time.Time, hubUsable bool) schedDecision {
	f.mu.Lock()
	if f.touched.Swap(false) {
		f.mu.active = now
	}
	s := schedState{now: now, interval: f.interval, idleInterval: f.idleInterval, quietInterval: f.quietInterval,
		demand: f.mu.demand, active: f.mu.active, ownEnded: f.mu.ownEnded, ownBusy: f.mu.ownInFlight > 0,
		lastStart: lastStart, failedAt: f.mu.failedAt, via: f.via != nil, hubUsable: hubUsable,
		ownWanted: f.mu.ownWanted, background: f.mu.waiting == f.mu.upkeep, idle: f.mu.waiting == 0,
		pending: f.mu.pending, peak: f.mu.peak, oldest: f.mu.oldest,
		hubInFlight: f.mu.hubInFlight, hubMax: f.hubMax, hubTook: f.mu.hubTook, minGap: f.batch.minGap, maxWait: f.batch.maxWait}
	f.mu.Unlock()
	d := schedule(s)
	if d.quiet {
		// Touch sets touched, then reads quiet; this sets quiet, then
		// reads touched. So a request that came after the swap above and
		// found quiet unset (and so did not kick) is seen here: without
		// this, the loop would sleep a whole quiet interval past it.
		f.quiet.Store(true)
		if f.touched.Load() {
			s.active = now
			d = schedule(s)
		}
	}
	if !d.quiet && f.quiet.Load() {
		f.quiet.Store(false)
	}
	if f.periodNs.Load() != int64(d.period) {
		f.periodNs.Store(int64(d.period))
	}
	return d
}

// Round does one own ReadIndex round and, if it completes, moves AsOf to
// the time it started (never aged).
func (f *Freshness) Round(ctx context.Context) { f.run(ctx, f.begin(true, false, false)) }

// run does round r: through via if r.viaHub, else an own round.
func (f *Freshness) run(ctx context.Context, r round) {
	rctx, cancel := context.WithTimeout(ctx, f.timeout)
	req := ProofRequest{Background: r.background}
	if r.ageable {
		req.AcceptAged = f.Period()
	}
	own, err, proof := true, error(nil), Proof{}
	if r.viaHub {
		own, err = f.via(rctx)
	} else {
		proof, err = f.prover.Prove(rctx, req)
	}
	cancel()
	if f.observe != nil {
		f.observe(f.clock.Since(r.start), own, err)
	}
	if err != nil && ctx.Err() == nil {
		f.lg.Debug("freshness round failed", zap.Error(err))
	}
	f.finish(r, own, proof, err)
}
