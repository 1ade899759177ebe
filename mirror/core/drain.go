package core

import "time"

// Drain is what a drain (package mirror's Drain) has seen, and its quiet
// rule: the destination is ready for clients once the mirror's checkpoint
// holds every source revision up to the source's revision, and nothing
// under the prefix has changed after the checkpoint for Quiet; a source
// still written to is caught up only for moments. Not safe for concurrent
// use.
type Drain struct {
	quiet time.Duration
	// head is the source revision the checkpoint has to reach; cpRev the
	// checkpoint's revision last read.
	head, cpRev int64
	// changes counts checks that found the prefix changed, the newest
	// source revision of such a change at lastAt.
	changes    int
	lastChange int64
	lastAt     time.Time
	// quietRev is the checkpoint's revision when the mirror was last found
	// caught up with nothing changed after it, at quietAt; 0 after a change.
	quietRev int64
	quietAt  time.Time
}

// NewDrain is a drain that calls the destination ready after quiet.
func NewDrain(quiet time.Duration) *Drain { return &Drain{quiet: quiet} }

// SourceAt records the source's revision, which the checkpoint must reach.
func (d *Drain) SourceAt(head int64) { d.head = head }

// CheckpointAt records the mirror's checkpoint as read and reports whether
// it holds the source's revision: streaming, at it or later.
func (d *Drain) CheckpointAt(cp Checkpoint) bool {
	d.cpRev = cp.Revision
	return cp.Phase == PhaseStream && cp.Revision >= d.head
}

// Since is the source revision after which the prefix must not have
// changed, for a caught-up checkpoint at cpRev: the checkpoint's, or, while
// the prefix has been quiet, the revision the quiet began at (a mirror that
// moves its checkpoint on meanwhile does not restart the wait).
func (d *Drain) Since(cpRev int64) int64 {
	if d.quietRev > 0 {
		return d.quietRev
	}
	return cpRev
}

// DrainStep is what a drain does after a check of the prefix.
type DrainStep int

const (
	// DrainChanged: the prefix changed; look again at once.
	DrainChanged DrainStep = iota
	// DrainWait: quiet, but not for Quiet yet; look again after a pause.
	DrainWait
	// DrainCut: quiet for Quiet: write the cutover record at the
	// checkpoint's revision, fenced on the checkpoint.
	DrainCut
)

// Checked takes a check at now of the prefix after Since(cpRev): changed
// is the source revision of the first change found, 0 if none.
func (d *Drain) Checked(cpRev, changed int64, now time.Time) DrainStep {
	if changed > 0 {
		d.changes, d.lastChange, d.lastAt, d.quietRev = d.changes+1, changed, now, 0
		return DrainChanged
	}
	if d.quietRev == 0 {
		d.quietRev, d.quietAt = cpRev, now
	}
	if now.Sub(d.quietAt) < d.quiet {
		return DrainWait
	}
	return DrainCut
}

// DrainReport is why a drain gave up.
type DrainReport struct {
	// KeptChanging: the source kept changing under the prefix (the last
	// change within the drain's timeout); else the mirror did not catch up.
	KeptChanging bool
	// Changes is how many checks found a change, the last at source
	// revision LastChange, LastAgo before the drain gave up.
	Changes    int
	LastChange int64
	LastAgo    time.Duration
	// CheckpointRev is the mirror's checkpoint last read, Head the source
	// revision it had to reach.
	CheckpointRev, Head int64
}

// GaveUp is the report of a drain that timed out (after timeout) at now.
func (d *Drain) GaveUp(now time.Time, timeout time.Duration) DrainReport {
	ago := now.Sub(d.lastAt)
	return DrainReport{KeptChanging: d.changes > 0 && ago < timeout, Changes: d.changes, LastChange: d.lastChange, LastAgo: ago,
		CheckpointRev: d.cpRev, Head: d.head}
}
