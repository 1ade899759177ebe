package promotion

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// silentAt is caughtUp(at) with voter m2 (ID 2) silent: its peer URLs do
// not answer and the leader has it probing.
func silentAt(at time.Duration, lock bool, rec *Record) Observation {
	o := caughtUp(at)
	o.Voters[1].PeerAnswered, o.Voters[1].Leader = false, LeaderViewInactive
	o.HoldsFailoverLock, o.Failover = lock, rec
	return o
}

// runSilent steps d once a second from t0 to t0+until with m2 silent and
// returns the last action.
func runSilent(d *Decider, until time.Duration, lock bool) Action {
	var a Action
	for at := time.Duration(0); at <= until; at += time.Second {
		a = d.Step(silentAt(at, lock, nil))
	}
	return a
}

func want(t *testing.T, what string, a Action, kind Kind, target uint64) {
	t.Helper()
	if a.Kind != kind || (target != 0 && a.Target != target) {
		t.Fatalf("%s: %v (target %d, %q), want %v %d", what, a.Kind, a.Target, a.Reason, kind, target)
	}
}

func TestSilentNeedsThePeerURLsAndTheLeaderToAgree(t *testing.T) {
	for _, c := range []struct {
		peer, seen bool
		leader     LeaderView
		witness    Witness
		silent     bool
	}{
		{peer: true, seen: true, leader: LeaderViewActive},
		{peer: true, seen: true, leader: LeaderViewInactive}, // the leader lost it, its peer URL answers
		{peer: true, seen: true, leader: LeaderViewUnknown},  // no leader view: its peer URL answers
		{peer: false, seen: true, leader: LeaderViewActive},  // this standby cannot reach it, the leader can
		{peer: false, seen: true, leader: LeaderViewUnknown, witness: Witness{Silent: 1, Of: 2}, silent: true},
		// Without the leader's view, this standby's word alone is not enough.
		{peer: false, seen: true, leader: LeaderViewUnknown},
		{peer: false, seen: true, leader: LeaderViewUnknown, witness: Witness{Of: 2}},
		{peer: false, seen: true, leader: LeaderViewUnknown, witness: Witness{Active: 1, Of: 2}},
		{peer: false, seen: true, leader: LeaderViewUnknown, witness: Witness{Active: 1, Silent: 1, Of: 2}},
		{peer: false, seen: true, leader: LeaderViewUnknown, witness: Witness{Silent: 1, Of: 4}},
		{peer: false, seen: true, leader: LeaderViewUnknown, witness: Witness{Silent: 2, Of: 4}, silent: true},
		{peer: false, seen: true, leader: LeaderViewInactive, silent: true},
		// Never reached from here: only the leader's word proves it down.
		{peer: false, leader: LeaderViewUnknown},
		{peer: false, leader: LeaderViewActive},
		{peer: false, leader: LeaderViewInactive, silent: true},
	} {
		if got := (Voter{PeerAnswered: c.peer, PeerSeen: c.seen, Leader: c.leader, Witness: c.witness}).Silent(); got != c.silent {
			t.Errorf("peer answered %v (seen before %v), leader view %v, %v: silent %v, want %v", c.peer, c.seen, c.leader, c.witness, got, c.silent)
		}
	}
}

func TestAVoterWhosePeerURLAnswersIsNeverReplaced(t *testing.T) {
	d := NewDecider(cfg(RoleStandby))
	for at := time.Duration(0); at < time.Hour; at += time.Second {
		o := caughtUp(at)
		// Its client URL is firewalled, and the leader's view cannot be
		// read either; its peer URL answers.
		o.Voters[1].Leader = LeaderViewUnknown
		if a := d.Step(o); a.Kind != None {
			t.Fatalf("acted (%v: %s) at %v on a voter whose peer URL answers", a.Kind, a.Reason, at)
		}
	}
}

func TestStandbyFailoverStepByStep(t *testing.T) {
	d := NewDecider(cfg(RoleStandby))
	for at := time.Duration(0); at <= 10*time.Second; at += time.Second {
		if a := d.Step(silentAt(at, false, nil)); a.Kind != None {
			t.Fatalf("acted (%v) %v into the silence, before --failover-after", a.Kind, at)
		}
	}
	want(t, "silent 11s", d.Step(silentAt(11*time.Second, false, nil)), AcquireFailoverLock, 0)
	a := d.Step(silentAt(12*time.Second, true, nil))
	want(t, "with the lock", a, WriteRecord, 0)
	if r := a.Record; r == nil || r.Dead != 2 || r.By != 99 || r.ByName != "s1" || r.Step != StepPromote {
		t.Fatalf("record %+v, want m2 replaced by s1, step promote", a.Record)
	}
	rec := *a.Record
	a = d.Step(silentAt(13*time.Second, true, &rec))
	want(t, "record written", a, Promote, 99)
	if *a.Record != rec {
		t.Fatalf("promote based on %+v, want %+v", a.Record, rec)
	}
	promoted := silentAt(14*time.Second, true, &rec)
	promoted.IsLearner = false
	a = d.Step(promoted)
	want(t, "promoted", a, WriteRecord, 0)
	if a.Record.Step != StepRemove || a.Record.Dead != 2 {
		t.Fatalf("record %+v, want step remove of m2", a.Record)
	}
	rec = *a.Record
	promoted.Failover = &rec
	want(t, "record says remove", d.Step(promoted), RemoveVoter, 2)
	promoted.Voters = []Voter{promoted.Voters[0], promoted.Voters[2]}
	a = d.Step(promoted)
	want(t, "m2 removed", a, ClearRecord, 0)
	if !strings.Contains(a.Reason, "finished") {
		t.Fatalf("clear reason %q", a.Reason)
	}
	promoted.Failover = nil
	want(t, "record cleared", d.Step(promoted), ReleaseFailoverLock, 0)
	promoted.HoldsFailoverLock = false
	want(t, "done", d.Step(promoted), None, 0)
}

func TestTheHoldStartsOverAfterABlindObservation(t *testing.T) {
	d := NewDecider(cfg(RoleStandby))
	runSilent(d, 9*time.Second, false)
	if a := d.Blind(t0.Add(9500*time.Millisecond), false, errors.New("cut")); a.Kind != None {
		t.Fatalf("blind without the lock: %v", a.Kind)
	}
	// Silent again from 10s: a single observation after the blind spell
	// must not count the silence from before it.
	for at := 10 * time.Second; at <= 20*time.Second; at += time.Second {
		if a := d.Step(silentAt(at, false, nil)); a.Kind != None {
			t.Fatalf("acted (%v) at %v, only %v after the blind observation", a.Kind, at, at-10*time.Second)
		}
	}
	want(t, "silent 11s after the blind spell", d.Step(silentAt(21*time.Second, false, nil)), AcquireFailoverLock, 0)
	// The lock holder that goes blind lets the lock go.
	want(t, "blind with the lock", d.Blind(t0.Add(22*time.Second), true, errors.New("cut")), ReleaseFailoverLock, 0)
}

func TestAHolderThatCannotActReleasesTheLock(t *testing.T) {
	d := NewDecider(cfg(RoleStandby))
	runSilent(d, 11*time.Second, false)
	behind := silentAt(12*time.Second, true, nil)
	behind.Applied = 500
	a := d.Step(behind)
	want(t, "lock held, 500 entries behind", a, ReleaseFailoverLock, 0)
	if !strings.Contains(a.Reason, "not caught up") {
		t.Fatalf("reason %q", a.Reason)
	}
	// With a record naming it, too: another standby may take over.
	rec := &Record{Dead: 2, DeadName: "m2", By: 99, ByName: "s1", Step: StepPromote}
	behind.Failover = rec
	want(t, "lock and record held, behind", d.Step(behind), ReleaseFailoverLock, 0)
	live := caughtUp(13 * time.Second)
	live.HoldsFailoverLock = true
	want(t, "every voter live", d.Step(live), ReleaseFailoverLock, 0)
}

func TestAnotherStandbyTakesOverAPromotionThatNeverHappened(t *testing.T) {
	// s0 (98) recorded that it replaces m2, then stopped, still a learner.
	rec := &Record{Dead: 2, DeadName: "m2", By: 98, ByName: "s0", Step: StepPromote}
	d := NewDecider(cfg(RoleStandby))
	var a Action
	for at := time.Duration(0); at <= 6*time.Second; at += time.Second {
		a = d.Step(silentAt(at, false, rec))
	}
	want(t, "a record naming a learner that is gone", a, AcquireFailoverLock, 0)
	a = d.Step(silentAt(7*time.Second, true, rec))
	want(t, "with the lock", a, WriteRecord, 0)
	if a.Record.By != 99 || a.Record.Dead != 2 || a.Record.Step != StepPromote {
		t.Fatalf("takeover record %+v", a.Record)
	}
	want(t, "after the takeover", d.Step(silentAt(8*time.Second, true, a.Record)), Promote, 99)
}

func TestAnotherStandbyFinishesTheRemovalOfAPromotedOne(t *testing.T) {
	// s0 (98) was promoted, then paused past its lock: it is a voter now.
	rec := &Record{Dead: 2, DeadName: "m2", By: 98, ByName: "s0", Step: StepPromote}
	o := silentAt(0, true, rec)
	o.Voters = append(o.Voters, Voter{ID: 98, Name: "s0", PeerAnswered: true, Leader: LeaderViewActive})
	d := NewDecider(cfg(RoleStandby))
	want(t, "s0 a voter, record at promote, m2 just seen silent: the lock is kept", d.Step(o), None, 0)
	o.Now = t0.Add(resumeSilence)
	a := d.Step(o)
	want(t, "s0 a voter, record at promote", a, WriteRecord, 0)
	if a.Record.By != 98 || a.Record.Step != StepRemove {
		t.Fatalf("record %+v, want s0's, at remove", a.Record)
	}
	o.Failover = a.Record
	want(t, "record at remove", d.Step(o), RemoveVoter, 2)
	// Never a second promotion: this standby stays a learner throughout.
	for at := time.Second; at < time.Minute; at += time.Second {
		o.Now = t0.Add(at)
		if a := d.Step(o); a.Kind == Promote || a.Kind == WriteRecord {
			t.Fatalf("at %v: %v, with s0 already the replacement", at, a.Kind)
		}
	}
}

func TestARestartedStandbyResumesItsRemoval(t *testing.T) {
	// Promoted, then killed before the removal; restarted as a voter with
	// no memory but the record.
	rec := &Record{Dead: 2, DeadName: "m2", By: 99, ByName: "s1", Step: StepPromote}
	d := NewDecider(cfg(RoleStandby))
	o := silentAt(0, false, rec)
	o.IsLearner = false
	want(t, "restarted, m2 just seen silent", d.Step(o), None, 0)
	if s := d.Status(); s.Reason != ReasonSilence {
		t.Fatalf("restarted, m2 just seen silent: status %q", s)
	}
	o.Now = t0.Add(resumeSilence)
	want(t, "restarted, record names it", d.Step(o), AcquireFailoverLock, 0)
	o.HoldsFailoverLock = true
	a := d.Step(o)
	want(t, "with the lock", a, WriteRecord, 0)
	o.Failover = a.Record
	want(t, "record at remove", d.Step(o), RemoveVoter, 2)
}

func TestAFailoverIsAbandonedWhenTheVoterAnswersAgain(t *testing.T) {
	for _, step := range []Step{StepPromote, StepRemove} {
		rec := &Record{Dead: 2, DeadName: "m2", By: 99, ByName: "s1", Step: step}
		o := caughtUp(0) // m2 answers on its peer URL
		o.HoldsFailoverLock, o.Failover, o.IsLearner = true, rec, step == StepPromote
		d := NewDecider(cfg(RoleStandby))
		a := d.Step(o)
		want(t, "m2 back at step "+string(step), a, ClearRecord, 0)
		if !strings.Contains(a.Reason, "abandoned") {
			t.Fatalf("reason %q", a.Reason)
		}
	}
}

func TestStandbyKeepsALiveQuorum(t *testing.T) {
	// 3 voters, 2 silent: no change can keep a live quorum.
	d := NewDecider(cfg(RoleStandby))
	for at := time.Duration(0); at < time.Minute; at += time.Second {
		o := silentAt(at, true, nil)
		o.Voters[2].PeerAnswered, o.Voters[2].Leader = false, LeaderViewInactive
		if a := d.Step(o); a.Kind != ReleaseFailoverLock {
			t.Fatalf("acted (%v) with 2 of 3 voters silent", a.Kind)
		}
	}
	// Nor removal: promoted, 4 voters with 2 silent.
	rec := &Record{Dead: 2, DeadName: "m2", By: 99, ByName: "s1", Step: StepRemove}
	o := silentAt(0, true, rec)
	o.IsLearner = false
	o.Voters[2].PeerAnswered, o.Voters[2].Leader = false, LeaderViewInactive
	if a := d.Step(o); a.Kind == RemoveVoter {
		t.Fatalf("removed with 2 of 4 voters silent")
	}
	// 5 voters, 1 silent: it may.
	d = NewDecider(cfg(RoleStandby))
	var a Action
	for at := time.Duration(0); at <= 11*time.Second; at += time.Second {
		o := silentAt(at, true, nil)
		o.Voters = append(o.Voters, Voter{ID: 4, Name: "m4", PeerAnswered: true}, Voter{ID: 5, Name: "m5", PeerAnswered: true})
		a = d.Step(o)
	}
	want(t, "5 voters, 1 silent for 11s", a, WriteRecord, 0)
}

func TestAFailedStepWaitsBeforeTheNext(t *testing.T) {
	rec := &Record{Dead: 2, DeadName: "m2", By: 99, ByName: "s1", Step: StepRemove}
	o := silentAt(0, true, rec)
	o.IsLearner = false
	d := NewDecider(cfg(RoleStandby))
	d.Step(o) // m2 seen silent from t0
	at := func(d time.Duration) time.Time { return t0.Add(resumeSilence + d) }
	o.Now = at(0)
	a := d.Step(o)
	want(t, "record at remove", a, RemoveVoter, 2)
	d.Done(o.Now, a, errors.New("leader changed"))
	o.Now = at(100 * time.Millisecond)
	want(t, "100ms after a failed removal", d.Step(o), None, 0)
	o.Now = at(200 * time.Millisecond)
	a = d.Step(o)
	want(t, "retried", a, RemoveVoter, 2)
	d.Done(o.Now, a, errors.New("again"))
	o.Now = at(500 * time.Millisecond)
	want(t, "300ms after a second failure", d.Step(o), None, 0)
	// Letting go of the lock never waits.
	live := caughtUp(resumeSilence + 600*time.Millisecond)
	live.HoldsFailoverLock = true
	want(t, "nothing to do", d.Step(live), ReleaseFailoverLock, 0)
}

func TestParseRecord(t *testing.T) {
	r := Record{Dead: 2, DeadName: "m2", By: 99, ByName: "s1", Step: StepRemove, Since: t0}
	got, err := ParseRecord([]byte(r.Marshal()))
	if err != nil || *got != r {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	for _, bad := range []string{"", "{", `{"dead":2,"by":99,"step":"demote"}`, `{"by":99,"step":"remove"}`} {
		if _, err := ParseRecord([]byte(bad)); err == nil || !strings.Contains(err.Error(), "failover record") {
			t.Errorf("ParseRecord(%q) = %v, want an error naming the failover record", bad, err)
		}
	}
}

// A voter whose peer URLs have never answered this standby (a firewall
// between the two) is not proven down by its silence alone: without the
// leader's view, nothing is done, and the status says why.
func TestAVoterNeverReachedHereIsNotReplacedWithoutTheLeadersWord(t *testing.T) {
	d := NewDecider(cfg(RoleStandby))
	for at := time.Duration(0); at < time.Hour; at += time.Second {
		o := caughtUp(at)
		for i := range o.Voters {
			o.Voters[i].Leader = LeaderViewUnknown
		}
		o.Voters[2].PeerAnswered, o.Voters[2].PeerSeen = false, false
		if a := d.Step(o); a.Kind != None {
			t.Fatalf("acted (%v: %s) at %v on a voter never reached from here", a.Kind, a.Reason, at)
		}
	}
	if s := d.Status(); s.State != StateBlocked || s.Reason != ReasonUnproven || !strings.Contains(s.Detail, "m3") {
		t.Fatalf("status %q (%s/%s), want blocked, unproven, naming m3", s, s.State, s.Reason)
	}
	// The same voter, once seen and then silent, and silent to another
	// voter too, is proven down.
	o := caughtUp(time.Hour)
	o.Voters[2].PeerAnswered, o.Voters[2].PeerSeen, o.Voters[2].Leader = false, true, LeaderViewUnknown
	o.Voters[2].Witness = Witness{Silent: 1, Of: 2}
	for at := time.Hour; at <= time.Hour+11*time.Second; at += time.Second {
		o.Now, o.LastLeaderContact = t0.Add(at), t0.Add(at-100*time.Millisecond)
		if a := d.Step(o); a.Kind != None {
			want(t, "seen, then silent for 11s", a, AcquireFailoverLock, 0)
			return
		}
	}
	t.Fatalf("a voter seen before and silent for 11s was not replaced: %q", d.Status())
}

// A standby cut from one voter that the other voters still reach, with the
// leader's view unknown (its client URL cut too), never replaces it: the
// silence is not corroborated, and the status says so. Once another voter
// sees it silent too, it is replaced after --failover-after.
func TestAOneSidedPartitionIsNotADeath(t *testing.T) {
	d := NewDecider(cfg(RoleStandby))
	for at := time.Duration(0); at < time.Hour; at += time.Second {
		// m1 (the leader, its client URL cut) does not answer; m2 reaches m3.
		if a := d.Step(oneSidedCut(at, Witness{Active: 1, Of: 2})); a.Kind != None {
			t.Fatalf("acted (%v: %s) at %v on a voter another voter reaches", a.Kind, a.Reason, at)
		}
	}
	if s := d.Status(); s.State != StateBlocked || s.Reason != ReasonUncorroborated || !strings.Contains(s.Detail, "m3") || !strings.Contains(s.Detail, "not corroborated") {
		t.Fatalf("status %q (%s/%s), want blocked, uncorroborated, naming m3", s, s.State, s.Reason)
	}
	// m3 dies: m2 sees it silent too.
	for at := time.Hour; at <= time.Hour+10*time.Second; at += time.Second {
		if a := d.Step(oneSidedCut(at, Witness{Silent: 1, Of: 2})); a.Kind != None {
			t.Fatalf("acted (%v) %v into a corroborated silence, before --failover-after", a.Kind, at-time.Hour)
		}
	}
	want(t, "corroborated for 11s", d.Step(oneSidedCut(time.Hour+11*time.Second, Witness{Silent: 1, Of: 2})), AcquireFailoverLock, 0)
}

// A witness that does not answer a round (its /metrics timed out) neither
// starts nor ends a silence: a dead voter whose one witness flaps is still
// replaced after --failover-after, counted from the first corroborated
// round; one that a witness sees active starts over.
func TestAFlappingWitnessNeitherStartsNorEndsASilence(t *testing.T) {
	d := NewDecider(cfg(RoleStandby))
	var a Action
	for at := time.Duration(0); at <= 12*time.Second; at += time.Second {
		w := Witness{Silent: 1, Of: 2}
		if at%(2*time.Second) == time.Second {
			w = Witness{Of: 2} // no answer this round
		}
		if a = d.Step(oneSidedCut(at, w)); a.Kind != None {
			break
		}
	}
	want(t, "silent 12s, its witness answering every other round", a, AcquireFailoverLock, 0)

	d = NewDecider(cfg(RoleStandby))
	for at := time.Duration(0); at <= 12*time.Second; at += time.Second {
		w := Witness{Silent: 1, Of: 2}
		if at == 6*time.Second {
			w = Witness{Active: 1, Of: 2}
		}
		if a = d.Step(oneSidedCut(at, w)); a.Kind != None {
			t.Fatalf("acted (%v) at %v: a witness saw it active at 6s, so its silence is 6s old", a.Kind, at)
		}
	}
}

// oneSidedCut is an observation at at where no voter's leader view is
// known and m3's peer URLs, which answered before, do not now; w is what
// the other voters' own views say of m3.
func oneSidedCut(at time.Duration, w Witness) Observation {
	o := caughtUp(at)
	for i := range o.Voters {
		o.Voters[i].Leader = LeaderViewUnknown
	}
	o.Voters[2].PeerAnswered, o.Voters[2].PeerSeen, o.Voters[2].Witness = false, true, w
	return o
}
