package promotion

import (
	"encoding/json"
	"fmt"
	"time"
)

// LeaderView is what the leader's raft progress says of a voter.
type LeaderView int

const (
	// LeaderViewUnknown: no leader, or its progress could not be read.
	LeaderViewUnknown LeaderView = iota
	// LeaderViewActive: the leader replicates to it (or it is the leader).
	LeaderViewActive
	// LeaderViewInactive: the leader's progress has it probing, the state
	// raft falls back to when messages to a follower go unanswered.
	LeaderViewInactive
)

func (v LeaderView) String() string {
	return [...]string{"unknown", "active", "inactive"}[v]
}

// Voter is one voting member as the caller saw it this round.
type Voter struct {
	ID   uint64
	Name string
	// PeerAnswered: one of its peer URLs answered, as this cluster's member.
	PeerAnswered bool
	// PeerSeen: one of its peer URLs has answered this replica, this round
	// or an earlier one.
	PeerSeen bool
	// Leader is the leader's raft view of it.
	Leader LeaderView
	// Witness is what the other voters' own raft transports say of it,
	// read where the leader's view is unknown and this replica's peer
	// evidence alone says it is down.
	Witness Witness
}

// Witness is what the other voters see of one voter, each through its own
// raft transport (etcd's peer status: a link whose messages go unanswered
// is inactive). Of counts the other voters, those that did not answer
// included.
type Witness struct {
	Active, Silent, Of int
}

// corroborated: no other voter reaches it, and this replica with the
// voters that see it silent are a majority of the observers (this replica
// and the other voters). A one-sided partition — this replica cut from one
// voter that the others still reach — is never taken for its death. With
// no other voter (Of 0, also what an observation that asked none says)
// nothing corroborates.
func (w Witness) corroborated() bool {
	return w.Of > 0 && w.Active == 0 && 2*(1+w.Silent) > 1+w.Of
}

func (w Witness) String() string {
	return fmt.Sprintf("%d of the %d other voters see it silent, %d active", w.Silent, w.Of, w.Active)
}

// live: this round's evidence says v is up (its peer URL answers, or the
// leader replicates to it). Quorum is counted on live voters only.
func (v Voter) live() bool { return v.PeerAnswered || v.Leader == LeaderViewActive }

// Silent is this round's evidence that v is down: it is not live, and
// either the leader's progress has it probing (the leader's raft cannot
// reach it either), or, without the leader's view, its peer URLs answered
// this replica before and do not now and the other voters corroborate it
// (Witness). A peer URL this replica has never reached proves nothing (a
// firewall, a route, a certificate between the two), and neither does the
// voter's own client URL, which is not asked.
func (v Voter) Silent() bool {
	return !v.live() && (v.Leader == LeaderViewInactive || v.lonelySilence() && v.Witness.corroborated())
}

// lonelySilence: this replica's own evidence says v is down — its peer URLs
// answered here before and do not now — and the leader's view is unknown.
func (v Voter) lonelySilence() bool {
	return !v.live() && v.Leader != LeaderViewInactive && v.PeerSeen
}

// NeedsWitness: v's silence rests on this replica's evidence alone
// (lonelySilence), so the other voters' views must be read to decide it.
func (v Voter) NeedsWitness() bool { return v.lonelySilence() }

// uncorroborated: this replica's own evidence says v is down, the other
// voters do not agree.
func (v Voter) uncorroborated() bool { return v.lonelySilence() && !v.Witness.corroborated() }

// undecided: this replica alone finds v silent, no other voter sees it
// active, but too few answered to corroborate it (a witness's /metrics
// timed out). Such a round neither starts nor ends v's silence.
func (v Voter) undecided() bool { return v.uncorroborated() && v.Witness.Active == 0 }

// unproven: v is not live, but nothing proves it down (Silent).
func (v Voter) unproven() bool { return !v.live() && !v.Silent() }

// Evidence says what the round's evidence of v is.
func (v Voter) Evidence() string {
	peer := "no peer URL answers"
	switch {
	case v.PeerAnswered:
		peer = "a peer URL answers"
	case !v.PeerSeen:
		peer = "no peer URL has ever answered here"
	}
	out := peer + ", leader view " + v.Leader.String()
	if v.lonelySilence() {
		out += ", " + v.Witness.String()
	}
	return out
}

// Step is how far a failover has come.
type Step string

const (
	// StepPromote: Record.By is to be promoted in place of Record.Dead.
	StepPromote Step = "promote"
	// StepRemove: Record.By is a voter; Record.Dead is to be removed.
	StepRemove Step = "remove"
)

// Record is a failover under way, persisted in the cluster next to the
// failover lock so that whoever holds the lock next (the same standby
// after a restart, or another one) resumes it.
type Record struct {
	Dead     uint64    `json:"dead"`
	DeadName string    `json:"dead_name"`
	By       uint64    `json:"by"`
	ByName   string    `json:"by_name"`
	Step     Step      `json:"step"`
	Since    time.Time `json:"since"`
}

// Marshal is the record as stored.
func (r Record) Marshal() string {
	b, _ := json.Marshal(r) // a struct of plain fields always encodes
	return string(b)
}

// ParseRecord reads a stored record.
func ParseRecord(b []byte) (*Record, error) {
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("promotion: failover record %q: %w", b, err)
	}
	if r.Dead == 0 || r.By == 0 || (r.Step != StepPromote && r.Step != StepRemove) {
		return nil, fmt.Errorf("promotion: failover record %q: want dead, by and step promote or remove", b)
	}
	return &r, nil
}

func (r Record) String() string {
	return fmt.Sprintf("%s (%x) replaced by %s (%x), step %s", r.DeadName, r.Dead, r.ByName, r.By, r.Step)
}

// track keeps, per voter, when its current silence began.
func (d *Decider) track(o Observation) {
	seen := map[uint64]bool{}
	for _, v := range o.Voters {
		seen[v.ID] = true
		switch _, ok := d.silentSince[v.ID]; {
		case v.Silent() && !ok:
			d.silentSince[v.ID] = o.Now
		case v.Silent(), v.undecided():
		default:
			delete(d.silentSince, v.ID)
		}
	}
	for id := range d.silentSince {
		if !seen[id] {
			delete(d.silentSince, id)
		}
	}
}

// dead lists the voters silent now and, without a break, for longer than
// FailoverAfter.
func (d *Decider) dead(o Observation) []Voter {
	var out []Voter
	for _, v := range o.Voters {
		if since, ok := d.silentSince[v.ID]; ok && v.Silent() && v.ID != o.SelfID && o.Now.Sub(since) > d.cfg.FailoverAfter {
			out = append(out, v)
		}
	}
	return out
}

func voter(o Observation, id uint64) (Voter, bool) {
	for _, v := range o.Voters {
		if v.ID == id {
			return v, true
		}
	}
	return Voter{}, false
}

// standby is the failover state machine: lock, record (promote), promote
// self, record (remove), remove the dead voter, clear the record, unlock.
// Each membership change is checked against quorum; each step is decided
// from the persisted record and the membership, so whoever holds the lock
// next resumes where the last holder stopped.
func (d *Decider) standby(o Observation, held bool) Action {
	a := d.failover(o, held)
	if o.HoldsFailoverLock {
		// The lock is kept while a record's voter has been silent here
		// for less than resumeSilence; let go otherwise.
		if a.Kind == None && !(o.Failover != nil && a.status.Reason == ReasonSilence) {
			return Action{Kind: ReleaseFailoverLock, Reason: a.Reason}
		}
		return a
	}
	if a.Kind == None {
		return a
	}
	return Action{Kind: AcquireFailoverLock, Reason: a.Reason}
}

// failover is what the lock holder would do now; None with a reason when
// it has nothing to do or cannot act.
func (d *Decider) failover(o Observation, held bool) Action {
	if r := o.Failover; r != nil {
		return d.resume(o, held, *r)
	}
	if !o.IsLearner {
		return wait(StateIdle, ReasonVoter, "a voter")
	}
	dead := d.dead(o)
	if len(dead) == 0 {
		return d.silenceStatus(o)
	}
	dv, a, ok := d.unheld(o, dead)
	if !ok {
		return a
	}
	if a, ok := d.cannotPromote(o, held); !ok {
		return a
	}
	r := &Record{Dead: dv.ID, DeadName: dv.Name, By: o.SelfID, ByName: o.SelfName, Step: StepPromote, Since: o.Now}
	return Action{Kind: WriteRecord, Record: r, Reason: fmt.Sprintf("voter %s silent for %v", dv.Name, o.Now.Sub(d.silentSince[dv.ID]).Round(time.Millisecond))}
}

// unheld is the first of the dead voters no maintenance hold covers; or,
// if a hold covers them all, ok false and why nothing is done.
func (d *Decider) unheld(o Observation, dead []Voter) (v Voter, a Action, ok bool) {
	for _, v := range dead {
		if _, held := heldFor(o, v.ID); !held {
			return v, Action{}, true
		}
	}
	h, _ := heldFor(o, dead[0].ID)
	return Voter{}, heldStatus(dead[0], h, o.Now.Sub(d.silentSince[dead[0].ID])), false
}

// silenceStatus says which voter is silent and for how long of
// FailoverAfter, or that every voter is live.
func (d *Decider) silenceStatus(o Observation) Action {
	for _, v := range o.Voters {
		if since, ok := d.silentSince[v.ID]; ok {
			var note string
			if h, held := heldFor(o, v.ID); held {
				note = "; " + h.String()
			}
			return wait(StateWaiting, ReasonSilence, "voter %s silent for %v of %v (%s)%s", v.Name,
				o.Now.Sub(since).Round(100*time.Millisecond), d.cfg.FailoverAfter, v.Evidence(), note)
		}
	}
	for _, v := range o.Voters {
		if v.unproven() {
			return unprovenStatus(v)
		}
	}
	return wait(StateIdle, ReasonLive, "every voter is live")
}

// cannotPromote says why this replica may not promote itself now; ok if it
// may.
func (d *Decider) cannotPromote(o Observation, held bool) (a Action, ok bool) {
	switch {
	case !o.IsLearner:
		return wait(StateIdle, ReasonVoter, "a voter"), false
	case !held:
		return d.holdStatus(o), false
	case !liveQuorumAfter(o, +1):
		return wait(StateBlocked, ReasonQuorumAfterPromote, "one more voter would leave no live quorum"), false
	}
	return Action{}, true
}

func (d *Decider) resume(o Observation, held bool, r Record) Action {
	dv, deadIsVoter := voter(o, r.Dead)
	_, byIsOther := voter(o, r.By)
	byIsVoter := byIsOther || (r.By == o.SelfID && !o.IsLearner)
	switch {
	case !deadIsVoter:
		return Action{Kind: ClearRecord, Record: &r, Reason: fmt.Sprintf("failover of %s finished: it is no longer a member", r.DeadName)}
	case dv.unproven():
		return unprovenStatus(dv)
	case dv.Silent() && o.Now.Sub(d.silentSince[dv.ID]) < resumeSilence:
		return wait(StateWaiting, ReasonSilence, "voter %s silent for %v here; the failover goes on once it is for %v", dv.Name,
			o.Now.Sub(d.silentSince[dv.ID]).Round(100*time.Millisecond), resumeSilence)
	case !dv.Silent():
		why := "before any promotion"
		if byIsVoter {
			why = fmt.Sprintf("after %s was promoted: the cluster has one voter more than before (etcdctl member remove one if that is not wanted)", r.ByName)
		}
		return Action{Kind: ClearRecord, Record: &r, Reason: fmt.Sprintf("failover of %s abandoned: it is live again, %s", r.DeadName, why)}
	case underHold(o, dv):
		h, _ := heldFor(o, dv.ID)
		return heldStatus(dv, h, o.Now.Sub(d.silentSince[dv.ID]))
	case byIsVoter && r.Step == StepPromote:
		next := r
		next.Step = StepRemove
		return Action{Kind: WriteRecord, Record: &next, Reason: fmt.Sprintf("%s is a voter: next, remove %s", r.ByName, r.DeadName)}
	case byIsVoter:
		if o.Leader == 0 {
			return wait(StateBlocked, ReasonNoLeader, "no leader is known to remove %s", r.DeadName)
		}
		if !liveQuorumAfter(o, -1) {
			return wait(StateBlocked, ReasonQuorumAfterRemove, "removing %s would leave no live quorum", r.DeadName)
		}
		return Action{Kind: RemoveVoter, Target: r.Dead, Record: &r, Reason: fmt.Sprintf("voter %s silent, replaced by %s", r.DeadName, r.ByName)}
	case r.By == o.SelfID:
		if a, ok := d.cannotPromote(o, held); !ok {
			return a
		}
		return Action{Kind: Promote, Target: o.SelfID, Record: &r, Reason: fmt.Sprintf("replacing voter %s", r.DeadName)}
	default:
		// The standby named in the record never became a voter (it died,
		// was paused past its lock, or fell behind): this one takes over.
		if a, ok := d.cannotPromote(o, held); !ok {
			return a
		}
		next := r
		next.By, next.ByName = o.SelfID, o.SelfName
		return Action{Kind: WriteRecord, Record: &next, Reason: fmt.Sprintf("taking over the failover of %s from %s, which is still a learner", r.DeadName, r.ByName)}
	}
}

// resumeSilence is how long a voter named by a failover record must have
// been silent in this process's own observations before a standby that
// resumes the failover (after a restart, or another standby's) acts on it:
// one observation is not evidence enough.
const resumeSilence = time.Second

// unprovenStatus: v does not answer, but nothing proves it down.
func unprovenStatus(v Voter) Action {
	if v.uncorroborated() {
		return wait(StateBlocked, ReasonUncorroborated, "silence not corroborated: voter %s does not answer here and the leader's view is unknown, but %s (a partition between this replica and it, not its death; check this replica's route to its peer URL, or the leader's client URL)", v.Name, v.Witness)
	}
	return wait(StateBlocked, ReasonUnproven, "voter %s does not answer here, but its peer URLs have never answered this replica and the leader's view is unknown: no evidence that it is down (check that this replica reaches its peer URL, or the leader's client URL)", v.Name)
}

// liveQuorumAfter reports whether the live voters are a quorum now (the
// change must commit) and would still be one after adding (+1: promoting
// the replica, which is live) or removing (-1: a silent voter) one voter.
func liveQuorumAfter(o Observation, change int) bool {
	n, live := len(o.Voters), 0
	for _, v := range o.Voters {
		if v.live() {
			live++
		}
	}
	if !o.IsLearner {
		n, live = n+1, live+1 // the replica itself, now a voter
	}
	if live < n/2+1 {
		return false
	}
	switch change {
	case +1:
		n, live = n+1, live+1
	case -1:
		n-- // removing a silent voter leaves live as it is
	}
	return live >= n/2+1
}
