package core

// Decisions made once, before the mirror's first step: the policy a
// restart writes under, and whether the mirror fails back. Package mirror
// reads what they need and words their refusals.

// PolicyChange is what a restart does about the policy its checkpoint
// records.
type PolicyChange int

const (
	// PolicySame: the checkpoint's policy is the mirror's.
	PolicySame PolicyChange = iota
	// PolicyAdopt: the checkpoint predates stored policies; the mirror
	// writes its own into it.
	PolicyAdopt
	// PolicyReset: --reset-policy replaces the checkpoint's policy.
	PolicyReset
	// PolicyRefused: another policy than the checkpoint's, without
	// --reset-policy: a restart with other flags must not quietly change
	// what the mirror does to keys it did not write.
	PolicyRefused
)

// DecidePolicy compares the policy stored in a checkpoint ("" in one
// written before policies were stored) with the mirror's.
func DecidePolicy(stored string, current Policy, reset bool) PolicyChange {
	switch {
	case stored == current.String():
		return PolicySame
	case stored == "":
		return PolicyAdopt
	case reset:
		return PolicyReset
	}
	return PolicyRefused
}

// TakePolicy applies DecidePolicy to the checkpoint: unless refused, the
// checkpoint carries current from now on. write says whether to write it
// at once (an adopted or reset policy in a checkpoint the destination
// holds); otherwise the next checkpoint written carries it.
func (s *State) TakePolicy(current Policy, reset bool) (change PolicyChange, write bool) {
	if s.cp == nil {
		return PolicySame, false
	}
	change = DecidePolicy(s.cp.Policy, current, reset)
	if change == PolicyRefused {
		return change, false
	}
	next := *s.cp
	next.Policy = current.String()
	s.cp = &next
	return change, change != PolicySame && s.modRev != 0
}

// Reverse is a mirror found in this mirror's source that copies this
// mirror's destination into its source: with this mirror, a cycle of two,
// unless this mirror fails back from it.
type Reverse struct {
	Name string
	// Drained: it has a cutover record in the source (a drain), at its
	// source revision CutRev.
	Drained bool
	CutRev  int64
	// Exact: the mirror and its cutover record copy exactly this mirror's
	// destination (cluster and prefix) into exactly its source prefix.
	Exact bool
}

// Failback is what a mirror does about a failback.
type Failback struct {
	// From is the mirror failed back from ("" none): left out of the cycle
	// check and of the feeders whose keys are not copied.
	From string
	// Adopt: the destination's keys it copied are still to be adopted.
	Adopt bool
	// CutRev is the source revision of its cutover record: destination
	// versions newer than it are not adopted.
	CutRev int64
}

// FailbackRefusal says why DecideFailback refuses.
type FailbackRefusal int

const (
	// FailbackAccepted: no refusal.
	FailbackAccepted FailbackRefusal = iota
	// NothingToFailBack: --failback, no reverse mirror, and no failback
	// recorded in the checkpoint.
	NothingToFailBack
	// SeveralReverses: more than one mirror to fail back from.
	SeveralReverses
	// NotAFailback: no --failback, but the reverse was drained, or the
	// checkpoint records a failback from it.
	NotAFailback
	// ReverseNotDrained: --failback, but the reverse has no cutover record.
	ReverseNotDrained
	// ReverseNotExact: --failback, but the reverse, or its record, is not
	// the exact reverse of this mirror.
	ReverseNotExact
	// AnotherThanRecorded: the checkpoint records a failback from another
	// mirror.
	AnotherThanRecorded
)

// DecideFailback decides from the --failback flag, this mirror's
// checkpoint (nil: none) and the reverse mirrors found in the source
// whether this mirror fails back and from which mirror, or refuses.
// Without the flag, a reverse never drained and never failed back from is
// left to the cycle check, which refuses it.
func DecideFailback(failback bool, cp *Checkpoint, found []Reverse) (Failback, FailbackRefusal) {
	stored := ""
	if cp != nil {
		stored = cp.FailbackFrom
	}
	switch {
	case len(found) == 0 && failback && stored == "":
		return Failback{}, NothingToFailBack
	case len(found) == 0 && failback:
		// The mirror failed back from was retired since: nothing to leave out.
		return Failback{From: stored}, FailbackAccepted
	case len(found) == 0:
		return Failback{}, FailbackAccepted
	case len(found) > 1:
		return Failback{}, SeveralReverses
	}
	r := found[0]
	switch {
	case !failback && !r.Drained && stored == "":
		return Failback{}, FailbackAccepted
	case !failback:
		return Failback{}, NotAFailback
	case !r.Drained:
		return Failback{}, ReverseNotDrained
	case !r.Exact:
		return Failback{}, ReverseNotExact
	case stored != "" && stored != r.Name:
		return Failback{}, AnotherThanRecorded
	}
	return Failback{From: r.Name, Adopt: cp == nil || !cp.Adopted, CutRev: r.CutRev}, FailbackAccepted
}
