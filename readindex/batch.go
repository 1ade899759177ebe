package readindex

import "time"

// A ReadIndex round costs the leader the same whatever number of reads it
// serves (docs/scaling.md: about 8 raft messages), and it serves only the reads
// waiting when it starts. batchPolicy decides when the next round starts:
// as soon as the reads that were in the system come back (a closed-loop
// client population — controllers, caches — is served by one round a
// cycle instead of being split across two), or when the oldest waiting
// read has waited maxWait, whichever is first, and never sooner than
// minGap after the previous round.
//
// It is a pure function of batchState; Freshness's loop feeds it and acts.
type batchPolicy struct {
	// minGap is the least time between two round starts
	// (--read-batch-interval).
	minGap time.Duration
	// maxWait is the most a read waits for its round to start because of
	// batching (--read-batch-max-wait); 0 starts a round as soon as one
	// is asked for and minGap allows.
	maxWait time.Duration
}

// batchState is what the policy sees when it decides.
type batchState struct {
	now time.Time
	// lastStart is when the previous round started; zero if none has.
	lastStart time.Time
	// due is set when a background round (freshness) is due.
	due bool
	// shared is set when the next round is a hub's (--read-index-via):
	// the hub holds it for every replica that asks, so holding it here
	// too would only add latency.
	shared bool
	// pending is the number of reads waiting for a round that has not
	// started yet; oldest is when the first of them began waiting.
	pending int
	oldest  time.Time
	// peak is the most reads that waited at once (for the last round or
	// the next one) since the last round started: the population that
	// the next round should carry when it comes back.
	peak int
	// ownInFlight: an own round is under way. Own rounds go through the
	// member's one ReadIndex loop, one at a time, so the next own round
	// waits for it.
	ownInFlight bool
	// hubInFlight is the number of hub rounds under way, hubMax the most
	// there may be (ViaConfig.InFlight), and hubTook how long the last
	// hub round took.
	hubInFlight, hubMax int
	hubTook             time.Duration
}

// batchDecision is the policy's answer: start a round now, or look again
// at the time at (or sooner, when a read arrives). Neither means there is
// nothing to do until a read arrives or a background round is due.
type batchDecision struct {
	start bool
	at    time.Time
}

// Rounds through a hub overlap. A read that arrives while a round is in
// flight cannot use it (its read index may predate the read), so with one
// round at a time it waits for that round to come back and then for a whole
// round of its own: up to two round trips, which at WAN latency is most of
// a strong read's cost. So while hub rounds are in flight, another starts
// for the reads that wait as soon as the last one's duration divided by
// hubMax has passed since the previous start (and minGap): a read then
// waits at most that long for its round to start, and a hub round costs
// the hub, not the leader, one more ask (the hub batches them into its own
// rounds). Own rounds never overlap: the member runs one at a time.
func (p batchPolicy) next(s batchState) batchDecision {
	if s.pending == 0 && !s.due {
		return batchDecision{}
	}
	gap := p.minGap
	if s.shared {
		if s.hubInFlight >= max(s.hubMax, 1) {
			return batchDecision{} // a round's end looks again
		}
		if s.hubInFlight > 0 {
			gap = max(gap, s.hubTook/time.Duration(max(s.hubMax, 1)))
		}
	} else if s.ownInFlight {
		return batchDecision{} // a round's end looks again
	}
	if !s.lastStart.IsZero() {
		if earliest := s.lastStart.Add(gap); s.now.Before(earliest) {
			return batchDecision{at: earliest}
		}
	}
	if s.due || s.shared || p.maxWait <= 0 || s.pending >= batchTarget(s.peak) {
		return batchDecision{start: true}
	}
	deadline := s.oldest.Add(p.maxWait)
	if !s.now.Before(deadline) {
		return batchDecision{start: true}
	}
	return batchDecision{at: deadline}
}

// batchTarget is how many waiting reads are "the population is back": all
// but an eighth of the peak, so that one slow client does not hold the
// others back until maxWait.
func batchTarget(peak int) int {
	return max(1, peak-peak/8)
}
