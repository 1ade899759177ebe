package core

import "time"

// Step is what the mirror's loop does next.
type Step int

const (
	// StepAdopt: a failback still has the destination's keys to adopt.
	StepAdopt Step = iota
	// StepSync: a full sync (from scratch or resumed), then streaming.
	StepSync
	// StepStream: streaming from the revision after the checkpoint.
	StepStream
)

// Next is the step the checkpoint calls for.
func (s *State) Next() Step {
	switch {
	case s.adopt:
		return StepAdopt
	case s.cp == nil || s.cp.Phase == PhaseSync:
		return StepSync
	}
	return StepStream
}

// SyncFromScratch reports whether a full sync starts anew (noting the
// source's revision first, StartSync) rather than resuming the one the
// checkpoint records.
func (s *State) SyncFromScratch() bool {
	return s.cp == nil || s.cp.Phase != PhaseSync || s.cp.Revision == 0
}

// StartSync is the checkpoint that starts a full sync at source revision
// head: this mirror's, nothing applied, keeping the resync count; with no
// checkpoint, Fresh says whether the image held no key of this mirror
// (nothing to compare or sweep).
func (s *State) StartSync(head int64) Checkpoint {
	next := s.fresh()
	if s.cp != nil {
		next.Resyncs = s.cp.Resyncs
	} else {
		next.Fresh = s.noneOwned
	}
	next.Phase, next.Revision = PhaseSync, head
	return next
}

// SyncPlan says how the full sync under way goes under policy p: compare,
// read the destination's copies before writing (only what differs is
// written), not into an image the mirror never wrote; sweep, delete the
// destination keys the source no longer has, not after a first sync into
// an image that held no key of this mirror, unless Prune (which deletes
// every such key).
func (s *State) SyncPlan(p Policy) (compare, sweep bool) {
	fresh := s.cp != nil && s.cp.Fresh
	return !fresh, !fresh || p == Prune
}

// SyncDone is the checkpoint that ends a full sync: streaming from the
// revision after the sync's.
func (s *State) SyncDone() Checkpoint {
	cp := *s.cp
	cp.Phase, cp.SyncedThrough, cp.From, cp.Fresh = PhaseStream, "", 0, false
	return cp
}

// resync is the checkpoint after the source compacted past cp, or
// --resync: a full sync from scratch, counted (written with the new
// sync's first page).
func resync(cp Checkpoint) Checkpoint {
	cp.Phase, cp.Revision, cp.SyncedThrough, cp.From = PhaseSync, 0, "", 0
	cp.Resyncs++
	return cp
}

// Idle is the checkpoint a progress notification at source revision
// progress moves an idle mirror to, at most once per every (last: when it
// last did): every event of the prefix up to progress has been sent, so
// nothing of the prefix changed since the checkpoint. ok is false when it
// is not due or not ahead.
func (s *State) Idle(progress int64, now, last time.Time, every time.Duration) (next Checkpoint, ok bool) {
	if s.cp == nil || progress <= s.cp.Revision || now.Sub(last) < every {
		return Checkpoint{}, false
	}
	next = *s.cp
	next.From, next.Revision = next.Revision+1, progress
	return next, true
}

// AdoptedThrough is the checkpoint of a failback's adoption done with the
// ownership records up to through (a source key).
func (s *State) AdoptedThrough(through string) Checkpoint {
	cp := *s.cp
	cp.AdoptedThrough = through
	return cp
}

// AdoptionDone is the checkpoint that ends a failback's adoption; once it
// is written, Next no longer adopts.
func (s *State) AdoptionDone() Checkpoint {
	cp := *s.cp
	cp.Adopted, cp.AdoptedThrough = true, ""
	return cp
}

// RestoreAt is the source revision the keys of lost leases are read at to
// be written again: the checkpoint's, once streaming has applied one (a key
// then never goes back to an older value); 0 (now) right after a full
// sync, whose pages were read at newer revisions.
func (s *State) RestoreAt() int64 {
	if s.cp != nil && s.cp.Phase == PhaseStream && s.cp.From > 0 {
		return s.cp.Revision
	}
	return 0
}

// Outcome is how a step of the mirror's loop ended.
type Outcome int

const (
	// Done: the step ended without error.
	Done Outcome = iota
	// Compacted: the source no longer has the revisions the mirror needs.
	Compacted
	// Landed: an earlier write of this mirror whose outcome it did not
	// learn had landed; the checkpoint was reloaded.
	Landed
	// Fatal: refused, or fenced off by another mirror: an operator must act.
	Fatal
	// Failed: anything else; the write may or may not have landed.
	Failed
)

// Reaction is what the loop does after a step (Stepped).
type Reaction int

const (
	// Again: the next step, at once, the backoff reset.
	Again Reaction = iota
	// Stop: Run returns the step's error.
	Stop
	// SyncAgain: a full sync from scratch, at once.
	SyncAgain
	// Retry: the next step at once, the backoff kept.
	Retry
	// BackOff: wait the backoff, reload the checkpoint, then retry.
	BackOff
)
