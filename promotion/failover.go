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
}

// live: this round's evidence says v is up (its peer URL answers, or the
// leader replicates to it). Quorum is counted on live voters only.
func (v Voter) live() bool { return v.PeerAnswered || v.Leader == LeaderViewActive }

// Silent is this round's evidence that v is down: it is not live, and
// either the leader's progress has it probing (the leader cannot reach it
// either), or, without the leader's view, its peer URLs answered this
// replica before and do not now. A peer URL this replica has never reached
// proves nothing (a firewall, a route, a certificate between the two), and
// neither does a client URL, which is not asked.
func (v Voter) Silent() bool {
	return !v.live() && (v.Leader == LeaderViewInactive || v.PeerSeen)
}

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
	return peer + ", leader view " + v.Leader.String()
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
		if !v.Silent() {
			delete(d.silentSince, v.ID)
		} else if _, ok := d.silentSince[v.ID]; !ok {
			d.silentSince[v.ID] = o.Now
		}
	}
	for id := range d.silentSince {
		if !seen[id] {
			delete(d.silentSince, id)
		}
	}
}

// dead lists the voters silent, without a break, for longer than
// FailoverAfter.
func (d *Decider) dead(o Observation) []Voter {
	var out []Voter
	for _, v := range o.Voters {
		if since, ok := d.silentSince[v.ID]; ok && v.ID != o.SelfID && o.Now.Sub(since) > d.cfg.FailoverAfter {
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
	if a, ok := d.cannotPromote(o, held); !ok {
		return a
	}
	v := dead[0]
	r := &Record{Dead: v.ID, DeadName: v.Name, By: o.SelfID, ByName: o.SelfName, Step: StepPromote, Since: o.Now}
	return Action{Kind: WriteRecord, Record: r, Reason: fmt.Sprintf("voter %s silent for %v", v.Name, o.Now.Sub(d.silentSince[v.ID]).Round(time.Millisecond))}
}

// silenceStatus says which voter is silent and for how long of
// FailoverAfter, or that every voter is live.
func (d *Decider) silenceStatus(o Observation) Action {
	for _, v := range o.Voters {
		if since, ok := d.silentSince[v.ID]; ok {
			return wait(StateWaiting, ReasonSilence, "voter %s silent for %v of %v (%s)", v.Name,
				o.Now.Sub(since).Round(100*time.Millisecond), d.cfg.FailoverAfter, v.Evidence())
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
