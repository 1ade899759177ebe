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

// NextStep is the step the checkpoint (nil: none) calls for.
func NextStep(cp *Checkpoint, adopt bool) Step {
	switch {
	case adopt:
		return StepAdopt
	case cp == nil || cp.Phase == PhaseSync:
		return StepSync
	}
	return StepStream
}

// SyncFromScratch reports whether a full sync starts anew (noting the
// source's revision first) rather than resuming the one the checkpoint
// records.
func SyncFromScratch(cp *Checkpoint) bool {
	return cp == nil || cp.Phase != PhaseSync || cp.Revision == 0
}

// StartSync is the checkpoint that starts a full sync at source revision
// head: fresh (this mirror's identity, nothing applied) keeps the resync
// count of prev; with no checkpoint (prev nil), Fresh says whether the
// image held no key of this mirror (noneOwned: nothing to sweep).
func StartSync(fresh Checkpoint, prev *Checkpoint, noneOwned bool, head int64) Checkpoint {
	if prev != nil {
		fresh.Resyncs = prev.Resyncs
	} else {
		fresh.Fresh = noneOwned
	}
	fresh.Phase, fresh.Revision = PhaseSync, head
	return fresh
}

// CompareFirst reports whether a full sync reads the destination's copies
// before writing (only what differs is written): not into an image the
// mirror never wrote.
func CompareFirst(cp Checkpoint) bool { return !cp.Fresh }

// NeedsSweep reports whether a full sync deletes the destination keys the
// source no longer has: not after a first sync into an image that held no
// key of this mirror, unless Prune (which deletes every such key).
func NeedsSweep(cp Checkpoint, p Policy) bool { return !cp.Fresh || p == Prune }

// SyncDone is the checkpoint that ends a full sync: streaming from the
// revision after the sync's.
func SyncDone(cp Checkpoint) Checkpoint {
	cp.Phase, cp.SyncedThrough, cp.From, cp.Fresh = PhaseStream, "", 0, false
	return cp
}

// Resync is the checkpoint after the source compacted past cp: a full
// sync from scratch, counted (written with the new sync's first page).
func Resync(cp Checkpoint) Checkpoint {
	cp.Phase, cp.Revision, cp.SyncedThrough, cp.From = PhaseSync, 0, "", 0
	cp.Resyncs++
	return cp
}

// ProgressCheckpoint is the checkpoint a progress notification at source
// revision progress moves an idle mirror to, at most once per every (last:
// when it last did): every event of the prefix up to progress has been
// sent, so nothing of the prefix changed since cp. ok is false when it is
// not due or not ahead of cp.
func ProgressCheckpoint(cp Checkpoint, progress int64, now, last time.Time, every time.Duration) (next Checkpoint, ok bool) {
	if progress <= cp.Revision || now.Sub(last) < every {
		return cp, false
	}
	cp.From, cp.Revision = cp.Revision+1, progress
	return cp, true
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

// Reaction is what the loop does after a step.
type Reaction int

const (
	// Again: the next step, at once, the backoff reset.
	Again Reaction = iota
	// Stop: Run returns the step's error.
	Stop
	// SyncAgain: a full sync from scratch (Resync), at once.
	SyncAgain
	// Retry: the next step at once, the backoff kept.
	Retry
	// BackOff: wait the backoff, reload the checkpoint, then retry.
	BackOff
)

// React is the loop's reaction to a step's outcome.
func React(o Outcome) Reaction {
	switch o {
	case Fatal:
		return Stop
	case Compacted:
		return SyncAgain
	case Landed:
		return Retry
	case Failed:
		return BackOff
	}
	return Again
}

// Backoff doubles from 100ms to 5s, with jitter: each wait is between
// half the current delay and the delay. Jitter returns a random duration
// in [0, n].
type Backoff struct {
	d      time.Duration
	Jitter func(n time.Duration) time.Duration
}

// NewBackoff is a backoff at its first delay.
func NewBackoff(jitter func(time.Duration) time.Duration) *Backoff {
	return &Backoff{d: 100 * time.Millisecond, Jitter: jitter}
}

// Reset goes back to the first delay.
func (b *Backoff) Reset() { b.d = 100 * time.Millisecond }

// Next is the wait before the next attempt.
func (b *Backoff) Next() time.Duration {
	d := b.d/2 + b.Jitter(b.d/2)
	b.d = min(2*b.d, 5*time.Second)
	return d
}

// CycleCheckDue reports whether the cycle check runs before the next
// checkpoint write: when due (right after the first checkpoint), or every
// interval since the last check.
func CycleCheckDue(due bool, now, last time.Time, every time.Duration) bool {
	return due || now.Sub(last) >= every
}

// SourceBehind reports whether a source at revision rev is behind the
// checkpoint: a source never goes back in revision, so one that is behind
// the revision the mirror has copied through holds another history than
// the one in the destination (restored from a backup: the same cluster ID,
// an older revision).
func SourceBehind(cp *Checkpoint, rev int64) bool {
	return cp != nil && rev < cp.Revision
}
