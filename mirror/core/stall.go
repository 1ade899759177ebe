package core

import "time"

// Progress is what the stall rule and the lag metrics know of a mirror:
// the newest source revision it has seen, the newest in its checkpoint,
// its last commit and its last failure. It is not safe for concurrent
// use; its owner locks it.
type Progress struct {
	source, applied int64
	// behindSince is when the mirror last went from caught up to behind.
	behindSince time.Time
	// lastProgress is the last commit, or the last moment the mirror had
	// nothing to do; lastErr the error of the last failed attempt since.
	lastProgress time.Time
	lastErr      error
	stalled      bool
}

// NewProgress is a mirror that starts at now with nothing to do.
func NewProgress(now time.Time) Progress { return Progress{lastProgress: now} }

// SourceAt records a source revision seen at now.
func (p *Progress) SourceAt(rev int64, now time.Time) {
	if rev > p.source {
		p.source = rev
		if p.behindSince.IsZero() && rev > p.applied {
			p.behindSince = now
		}
	}
}

// AppliedAt records the checkpoint's revision.
func (p *Progress) AppliedAt(rev int64) {
	p.applied = rev
	if rev >= p.source {
		p.behindSince = time.Time{}
	}
}

// Committed records progress: a destination transaction went through.
func (p *Progress) Committed(now time.Time) { p.lastProgress, p.lastErr = now, nil }

// Failing records an attempt that did not go through.
func (p *Progress) Failing(err error) { p.lastErr = err }

// Lag is the newest source revision seen, the checkpoint's, and since when
// the mirror has been behind (zero: caught up).
func (p *Progress) Lag() (source, applied int64, behindSince time.Time) {
	return p.source, p.applied, p.behindSince
}

// Verdict is the stall rule's answer at one moment.
type Verdict struct {
	Stalled bool
	// Changed: Stalled differs from the previous verdict.
	Changed bool
	LastErr error
	// IdleFor is how long the mirror has had work to do without a commit.
	IdleFor time.Duration
}

// Check is the stall rule at now: the mirror is stalled when it has had
// work to do (behind the newest source revision it has seen, or its last
// attempt failed) for at least after without a commit. Having nothing to
// do is never a stall.
func (p *Progress) Check(now time.Time, after time.Duration) Verdict {
	if p.lastErr == nil && p.applied >= p.source {
		p.lastProgress = now
	}
	idle := now.Sub(p.lastProgress)
	stalled := idle >= after
	v := Verdict{Stalled: stalled, Changed: stalled != p.stalled, LastErr: p.lastErr, IdleFor: idle}
	p.stalled = stalled
	return v
}

// Say is which log line a verdict calls for.
type Say int

const (
	SayNothing Say = iota
	// SayStalled: the mirror has just stalled.
	SayStalled
	// SayStillStalled: a reminder, once a minute of a stall, for a check
	// made every tick (at most a tick apart).
	SayStillStalled
	// SayProgressing: the mirror has just stopped being stalled.
	SayProgressing
)

// Say is the log line of a verdict reached by checks tick apart.
func (v Verdict) Say(tick time.Duration) Say {
	switch {
	case v.Stalled && v.Changed:
		return SayStalled
	case v.Stalled && v.IdleFor%time.Minute < tick:
		return SayStillStalled
	case v.Changed:
		return SayProgressing
	}
	return SayNothing
}
