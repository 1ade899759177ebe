package core

import "time"

// State is a running mirror's own state: its checkpoint as last written or
// read and the destination revision that fences the next write, the claim
// of its image, when it checks for mirror cycles next, and whether a
// failback still has keys to adopt. Package mirror's loop does the I/O and
// feeds every outcome to a transition here (a write landed, the checkpoint
// read back, a cycle check, a step's end); nothing else changes it. Time
// is an argument. It is not safe for concurrent use: the loop owns it.
type State struct {
	token      string
	cycleEvery time.Duration

	// identity is this mirror's checkpoint with nothing applied: source
	// cluster, prefixes, policy (fresh adds the failback).
	identity       Checkpoint
	failedBackFrom string
	// adopt: a failback still has destination keys to adopt.
	adopt bool

	cp *Checkpoint // nil: none yet
	// modRev is the checkpoint's ModRevision in the destination, 0 while
	// this mirror has written none: every write compares it.
	modRev int64
	// noneOwned: with no checkpoint, the destination holds no ownership
	// record of this mirror either (a first sync has nothing to sweep).
	noneOwned bool

	// claimRev is the destination revision of this mirror's first
	// checkpoint write (its claim on the image, before any key); cycleDue
	// that a cycle check must pass before the next write; checkedAt when
	// the last one ended.
	claimRev  int64
	cycleDue  bool
	checkedAt time.Time
}

// NewState is the state of a mirror process whose checkpoints carry token
// and that checks for cycles at most every cycleEvery (and whenever a
// check is due). Start gives it what preflight read.
func NewState(token string, cycleEvery time.Duration) *State {
	return &State{token: token, cycleEvery: cycleEvery}
}

// Start is what preflight read and decided before the mirror's first step.
type Start struct {
	// Checkpoint and ModRev are the destination's checkpoint of this
	// mirror and its ModRevision (nil and 0: none).
	Checkpoint *Checkpoint
	ModRev     int64
	// NoneOwned: the destination holds no ownership record of this mirror
	// (read only when there is no checkpoint).
	NoneOwned bool
	// Identity is this mirror's checkpoint with nothing applied: its
	// source cluster, prefixes and policy.
	Identity Checkpoint
	// Failback is decideFailback's plan (DecideFailback).
	Failback Failback
	// Resync (--resync) syncs in full although the checkpoint says where
	// to resume; Rev (--rev), with no checkpoint, streams from that source
	// revision without a sync.
	Resync bool
	Rev    int64
}

// Begin is how a mirror begins, as Start decided.
type Begin int

const (
	// BeginSync: no checkpoint; a first full sync (the image checked for
	// keys of others under Keep).
	BeginSync Begin = iota
	// BeginResume: from the checkpoint.
	BeginResume
	// BeginResync: --resync; a counted full sync from scratch, written
	// with its first page.
	BeginResync
	// BeginAtRev: --rev; streaming from it, the checkpoint written
	// (claimed) before the first revision is applied.
	BeginAtRev
	// BeginFailback: a failback's first run; the adoption claims the
	// image, then a full sync.
	BeginFailback
)

// Start takes what preflight read and says how the mirror begins.
func (s *State) Start(in Start) Begin {
	s.identity, s.failedBackFrom, s.adopt = in.Identity, in.Failback.From, in.Failback.Adopt
	s.cp, s.modRev, s.noneOwned = in.Checkpoint, in.ModRev, in.NoneOwned
	switch {
	case s.cp != nil && in.Resync:
		next := resync(*s.cp)
		s.cp = &next
		return BeginResync
	case s.cp != nil:
		return BeginResume
	case in.Rev > 0:
		cp := s.fresh()
		cp.Phase, cp.Revision = PhaseStream, in.Rev-1
		s.cp = &cp
		return BeginAtRev
	case s.failedBackFrom != "":
		cp := s.fresh()
		cp.Phase = PhaseSync
		s.cp = &cp
		return BeginFailback
	}
	return BeginSync
}

// fresh is this mirror's checkpoint with nothing applied.
func (s *State) fresh() Checkpoint {
	cp := s.identity
	cp.FailbackFrom, cp.Adopted = s.failedBackFrom, s.failedBackFrom != "" && !s.adopt
	return cp
}

// Checkpoint is a copy of the checkpoint the mirror goes on from; nil if
// there is none yet.
func (s *State) Checkpoint() *Checkpoint {
	if s.cp == nil {
		return nil
	}
	cp := *s.cp
	return &cp
}

// Revision is the checkpoint's source revision; 0 without one.
func (s *State) Revision() int64 {
	if s.cp == nil {
		return 0
	}
	return s.cp.Revision
}

// ModRev is the destination revision the checkpoint was last written or
// read at; 0 if this mirror has none there.
func (s *State) ModRev() int64 { return s.modRev }

// Token is this process's mark in the checkpoints it writes.
func (s *State) Token() string { return s.token }

// ClaimRev is the destination revision of this mirror's claim (its first
// checkpoint); 0 if this process wrote none.
func (s *State) ClaimRev() int64 { return s.claimRev }

// set takes a checkpoint written or read at destination revision modRev.
func (s *State) set(cp *Checkpoint, modRev int64) {
	s.cp, s.modRev = cp, modRev
	if cp != nil && cp.Adopted {
		s.adopt = false
	}
}

// Write is one checkpoint write for the loop to carry out: Checkpoint, in
// the transaction with the changes it accounts for, which applies only
// while the checkpoint's ModRevision in the destination is still IfModRev
// (0: no checkpoint).
type Write struct {
	Checkpoint Checkpoint
	IfModRev   int64
}

// Claim is the write that claims the image before the first write of
// changes (a cycle check follows it, before any key): the checkpoint the
// mirror goes on from, which it has not written yet (--rev, a failback,
// --resync before any page). ok is false when no claim is needed.
func (s *State) Claim(changes bool) (cp Checkpoint, ok bool) {
	if s.modRev != 0 || !changes || s.cp == nil {
		return Checkpoint{}, false
	}
	return *s.cp, true
}

// Write is the write of next, stamped with now and this process's token,
// fenced on the checkpoint the mirror last wrote or read.
func (s *State) Write(next Checkpoint, now time.Time) Write {
	next.Updated, next.Token = now, s.token
	return Write{Checkpoint: next, IfModRev: s.modRev}
}

// Committed records that w landed at destination revision modRev. It
// returns true when w was the mirror's first checkpoint (its claim): a
// cycle check is due, and the loop runs it at once, so that of two
// mirrors started together the later check sees the other's claim.
func (s *State) Committed(w Write, modRev int64) (claimed bool) {
	cp := w.Checkpoint
	s.set(&cp, modRev)
	if w.IfModRev != 0 {
		return false
	}
	s.claimRev, s.cycleDue = modRev, true
	return true
}

// Reload is what the checkpoint read back after a write whose outcome the
// mirror did not learn (or whose compare failed) says.
type Reload int

const (
	// ReloadSame: the checkpoint is the one the mirror last wrote; resume
	// from it.
	ReloadSame Reload = iota
	// ReloadLanded: a write of this process whose answer was lost landed;
	// resume from it (if it was the claim, a cycle check is due).
	ReloadLanded
	// ReloadRestored: the checkpoint is older than the mirror's last
	// write: the destination was restored from a backup, and its keys and
	// this checkpoint were written together; resume from it, copying
	// again what the restore took back.
	ReloadRestored
	// ReloadFenced: another process wrote the checkpoint, or deleted it:
	// stop.
	ReloadFenced
)

// Reloaded takes the checkpoint read back (nil: none) and its ModRevision.
// A destination's revisions never go back but by a restore.
func (s *State) Reloaded(cp *Checkpoint, modRev int64) Reload {
	switch {
	case modRev == s.modRev:
		return ReloadSame
	case cp != nil && modRev < s.modRev:
		s.set(cp, modRev)
		return ReloadRestored
	case cp != nil && cp.Token == s.token:
		if s.modRev == 0 {
			s.claimRev, s.cycleDue = modRev, true
		}
		s.set(cp, modRev)
		return ReloadLanded
	}
	return ReloadFenced
}

// CycleCheckDue reports whether a cycle check runs before the next
// checkpoint write at now: one is due (after the claim, a new mirror
// writing into the source), or the interval has passed since the last.
func (s *State) CycleCheckDue(now time.Time) bool {
	return s.cycleDue || now.Sub(s.checkedAt) >= s.cycleEvery
}

// NewFeeder records that a mirror not known before writes into the
// source under the prefix: a cycle check is due before the next write.
func (s *State) NewFeeder() { s.cycleDue = true }

// CycleCheck is how a check for mirror cycles ended.
type CycleCheck int

const (
	// NoCycle: the checkpoints were read; no cycle.
	NoCycle CycleCheck = iota
	// CycleFound: a cycle (the check's error wraps ErrRefused).
	CycleFound
	// CycleUnknown: the checkpoints could not be read.
	CycleUnknown
)

// CycleVerdict is what the loop does after a cycle check.
type CycleVerdict int

const (
	// GoOn: write.
	GoOn CycleVerdict = iota
	// WarnAndGoOn: the check could not be made and none was due: warn and
	// write; the next check is an interval away.
	WarnAndGoOn
	// StopWriting: return the check's error (a cycle, or a check that was
	// due and could not be made: it is made again before the next write).
	StopWriting
	// Unclaim: a cycle while the checkpoint is still the claim (nothing
	// copied): delete the claim (at ClaimRev), so that a restart after
	// the operator's fix starts clean, and stop.
	Unclaim
)

// CycleChecked takes the outcome of a cycle check that ended at now.
func (s *State) CycleChecked(now time.Time, c CycleCheck) CycleVerdict {
	switch {
	case c == CycleFound && s.modRev != 0 && s.modRev == s.claimRev:
		return Unclaim
	case c == CycleFound, c == CycleUnknown && s.cycleDue:
		return StopWriting
	}
	s.cycleDue, s.checkedAt = false, now
	if c == CycleUnknown {
		return WarnAndGoOn
	}
	return GoOn
}

// SourceBehind reports whether a source at revision rev is behind the
// checkpoint: a source never goes back in revision, so one that is behind
// the revision the mirror has copied through holds another history than
// the one in the destination (restored from a backup: the same cluster ID,
// an older revision).
func (s *State) SourceBehind(rev int64) bool {
	return s.cp != nil && rev < s.cp.Revision
}

// Stepped takes how a step of the loop ended and says what the loop does
// next. Compaction past the checkpoint makes it a full sync from scratch,
// counted (written with the new sync's first page).
func (s *State) Stepped(o Outcome) Reaction {
	switch o {
	case Fatal:
		return Stop
	case Compacted:
		if s.cp != nil {
			next := resync(*s.cp)
			s.cp = &next
		}
		return SyncAgain
	case Landed:
		return Retry
	case Failed:
		return BackOff
	}
	return Again
}
