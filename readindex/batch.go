package readindex

import "time"

// A ReadIndex round costs the leader the same whatever number of reads it
// serves (DESIGN.md: about 8 raft messages), and it serves only the reads
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
}

// batchDecision is the policy's answer: start a round now, or look again
// at the time at (or sooner, when a read arrives). Neither means there is
// nothing to do until a read arrives or a background round is due.
type batchDecision struct {
	start bool
	at    time.Time
}

func (p batchPolicy) next(s batchState) batchDecision {
	if s.pending == 0 && !s.due {
		return batchDecision{}
	}
	if !s.lastStart.IsZero() {
		if earliest := s.lastStart.Add(p.minGap); s.now.Before(earliest) {
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
