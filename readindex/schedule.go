package readindex

import "time"

// The round scheduler's decisions, apart from the loop that acts on them:
// the background rounds' period (how often freshness is proved: the
// interval while tight bounded reads come, the idle interval while client
// requests come, the quiet interval while none do), whether a background
// round is due, when the next round starts (batchPolicy), and what kind of
// round it is (own or through a hub, background or for reads, may take an
// aged proof). Freshness.Run takes a schedState under its lock, calls
// schedule, publishes the period and begins the round it says; the round's
// end is fed back through the state the next call sees.

// schedState is what the scheduler decides on, now.
type schedState struct {
	now time.Time
	// interval, idleInterval and quietInterval are Freshness's periods.
	interval, idleInterval, quietInterval time.Duration
	// demand is when a bounded read with a bound the idle rate cannot
	// serve last came (Demand); active when the loop last saw a client
	// request (Touch).
	demand, active time.Time
	// ownEnded is when the last own round ended; ownBusy: one is under
	// way (no background round is due until it ends).
	ownEnded time.Time
	ownBusy  bool
	// lastStart is when the loop last started a round; failedAt when the
	// last round failed (zero if the last succeeded).
	lastStart, failedAt time.Time
	// via: rounds may go through hubs; hubUsable: one is usable now.
	via, hubUsable bool
	// ownWanted: a read waiting for the next round needs it own (a
	// bounded read); background: no client's read waits (those waiting,
	// if any, are replicas' upkeep: ForUpkeep); idle: no read waits.
	ownWanted, background, idle bool
	// The batch policy's inputs (batchState).
	pending, peak       int
	oldest              time.Time
	hubInFlight, hubMax int
	hubTook             time.Duration
	minGap, maxWait     time.Duration
}

// schedDecision is the scheduler's answer.
type schedDecision struct {
	// period is the background rounds' period now; quiet: it is the quiet
	// interval (no client request for as long).
	period time.Duration
	quiet  bool
	// due: a background round is due (the next round is own).
	due bool
	// start: begin a round now, of kind; else look again at wake (zero:
	// when a read or a round's end wakes the loop).
	start bool
	kind  roundKind
	wake  time.Time
}

// roundKind is what a round is.
type roundKind struct {
	// viaHub: it goes through a hub (falling back to an own round);
	// hubSlot: it counts among the hub rounds in flight (a hub was usable).
	viaHub, hubSlot bool
	// background: no client's read waited for it when it began; ageable:
	// it may prove the store fresh as of before its start (a quiet
	// replica's, with no read waiting for it).
	background, ageable bool
}

// schedule decides, now.
func schedule(s schedState) schedDecision {
	var d schedDecision
	d.period, d.quiet = backgroundPeriod(s)
	nextDue := s.ownEnded.Add(d.period)
	due := !s.ownBusy && !s.now.Before(nextDue)
	d.due = due
	lastStart := s.lastStart
	if !s.failedAt.IsZero() {
		// After a failed round, wait a little before the next: a leader
		// election or a cut link fails rounds fast, and retrying at once
		// would only spin.
		lastStart = later(lastStart, s.failedAt.Add(roundRetryGap-s.minGap))
	}
	b := batchPolicy{minGap: s.minGap, maxWait: s.maxWait}.next(batchState{now: s.now, lastStart: lastStart, due: due,
		shared: s.via && s.hubUsable && !due && !s.ownWanted, pending: s.pending, oldest: s.oldest, peak: s.peak,
		ownInFlight: s.ownBusy, hubInFlight: s.hubInFlight, hubMax: s.hubMax, hubTook: s.hubTook})
	if b.start {
		d.start, d.kind = true, kindOf(s, due, d.quiet)
		return d
	}
	if !s.ownBusy {
		d.wake = nextDue
	}
	if !b.at.IsZero() && (d.wake.IsZero() || b.at.Before(d.wake)) {
		d.wake = b.at
	}
	return d
}

// backgroundPeriod is the time from an own round's end to the next
// background round: the interval while bounded reads the idle rate could
// not serve come (within idleAfter), else the quiet interval once no
// client request has come for as long, else the idle interval.
func backgroundPeriod(s schedState) (time.Duration, bool) {
	switch {
	case !s.demand.IsZero() && s.now.Sub(s.demand) <= idleAfter:
		return s.interval, false
	case s.quietInterval > max(s.interval, s.idleInterval) && s.now.Sub(s.active) >= s.quietInterval:
		return s.quietInterval, true
	}
	return max(s.interval, s.idleInterval), false
}

// kindOf is the kind of round that starts now: own when it must be
// (wantOwn: a background round is due) or a bounded read waits for it (a
// bound is proved by own rounds only), else through a hub if there are
// any; an own background round of a quiet replica that no read waits for
// may take an aged proof.
func kindOf(s schedState, wantOwn, quiet bool) roundKind {
	k := roundKind{background: s.background}
	k.viaHub = s.via && !wantOwn && !s.ownWanted
	k.hubSlot = k.viaHub && s.hubUsable
	k.ageable = quiet && s.idle && !k.viaHub
	return k
}
