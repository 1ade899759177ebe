// Package promotion decides when a replica (an etcd learner) becomes a
// voter. It is a pure, clock-driven core: the caller observes the cluster
// (leader contact, indexes, member health, the time) and performs what the
// Decider asks, one membership change at a time.
//
// etcd's own guard, in MemberPromote, is that the learner's match index is
// at least 90% of the leader's: on a long log that lets a learner thousands
// of entries behind through, and it accepts a stopped learner. understudy's
// rule is stricter and about now: the learner has heard from the leader
// within a bound, its applied index is within a number of entries of the
// leader's commit, and both have held continuously for a while.
package promotion

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Role is what a replica may become.
type Role string

const (
	// RoleReader never promotes.
	RoleReader Role = "reader"
	// RoleStandby promotes itself, and removes the dead voter, when a voter
	// has been unreachable for longer than FailoverAfter.
	RoleStandby Role = "standby"
	// RoleVoter promotes itself as soon as it is safely caught up.
	RoleVoter Role = "voter"
)

var roles = []Role{RoleReader, RoleStandby, RoleVoter}

// ParseRole parses a --role value.
func ParseRole(s string) (Role, error) {
	for _, r := range roles {
		if string(r) == s {
			return r, nil
		}
	}
	return "", fmt.Errorf("--role %q: want one of reader, standby, voter", s)
}

// Config is the promotion policy.
type Config struct {
	Role Role
	// MaxLag is the most entries the applied index may trail the leader's
	// commit index.
	MaxLag uint64
	// Hold is how long the learner must stay caught up before it promotes.
	Hold time.Duration
	// LeaderContact bounds how long ago the learner last heard from the
	// leader (a ReadIndex round that completed).
	LeaderContact time.Duration
	// FailoverAfter is how long a voter must be unreachable before a
	// standby replaces it.
	FailoverAfter time.Duration
}

// DefaultConfig is a reader with the bounds a standby or voter would use.
func DefaultConfig() Config {
	return Config{Role: RoleReader, MaxLag: 1000, Hold: 5 * time.Second, LeaderContact: 2 * time.Second, FailoverAfter: 10 * time.Second}
}

// Validate reports every bad field at once, naming its flag.
func (c Config) Validate() error {
	var problems []error
	add := func(format string, a ...any) { problems = append(problems, fmt.Errorf(format, a...)) }
	if _, err := ParseRole(string(c.Role)); err != nil {
		problems = append(problems, err)
	}
	if c.Hold < 0 {
		add("--promote-hold %v: must be 0 or more", c.Hold)
	}
	if c.LeaderContact <= 0 {
		add("--promote-leader-contact %v: must be more than 0", c.LeaderContact)
	}
	if c.FailoverAfter <= 0 {
		add("--failover-after %v: must be more than 0", c.FailoverAfter)
	}
	return errors.Join(problems...)
}

// Voter is one voting member as the caller sees it.
type Voter struct {
	ID   uint64
	Name string
	// Reachable: it answered the caller's last health check.
	Reachable bool
	// UnreachableSince is when it stopped answering; zero if reachable.
	UnreachableSince time.Time
}

// Observation is the cluster as the replica sees it at Now.
type Observation struct {
	Now    time.Time
	SelfID uint64
	// IsLearner is false once the replica has been promoted.
	IsLearner bool
	// Leader is the leader's member ID; 0 if none is known.
	Leader uint64
	// LastLeaderContact is when the replica last heard from the leader.
	LastLeaderContact time.Time
	// Applied is the replica's applied index; LeaderCommit the leader's
	// commit index.
	Applied, LeaderCommit uint64
	// Voters are the voting members, without the replica.
	Voters []Voter
	// HoldsFailoverLock: the replica holds the lock that lets one standby
	// act at a time.
	HoldsFailoverLock bool
}

// Lag is how many entries the replica trails the leader's commit.
func Lag(o Observation) uint64 {
	if o.Applied >= o.LeaderCommit {
		return 0
	}
	return o.LeaderCommit - o.Applied
}

// CaughtUp is the instantaneous rule: a leader is known, heard from within
// LeaderContact, and the lag is within MaxLag. why says what fails.
func CaughtUp(c Config, o Observation) (ok bool, why string) {
	var reasons []string
	if o.Leader == 0 {
		reasons = append(reasons, "no leader is known")
	}
	if o.LastLeaderContact.IsZero() {
		reasons = append(reasons, "it has never heard from the leader")
	} else if d := o.Now.Sub(o.LastLeaderContact); d > c.LeaderContact {
		reasons = append(reasons, fmt.Sprintf("it has not heard from the leader for %v (bound %v)", d.Round(time.Millisecond), c.LeaderContact))
	}
	if lag := Lag(o); lag > c.MaxLag {
		reasons = append(reasons, fmt.Sprintf("it is %d entries behind the leader's commit %d (bound %d)", lag, o.LeaderCommit, c.MaxLag))
	}
	if len(reasons) > 0 {
		return false, strings.Join(reasons, "; ")
	}
	return true, fmt.Sprintf("%d entries behind, heard from the leader %v ago", Lag(o), o.Now.Sub(o.LastLeaderContact).Round(time.Millisecond))
}

// Kind is what the Decider asks for.
type Kind int

const (
	None Kind = iota
	// Promote the replica itself.
	Promote
	// RemoveVoter removes Action.Target, a dead voter.
	RemoveVoter
	// AcquireFailoverLock asks the caller to try for the lock.
	AcquireFailoverLock
	// ReleaseFailoverLock: the failover is over (or no longer needed).
	ReleaseFailoverLock
)

func (k Kind) String() string {
	return [...]string{"none", "promote", "remove-voter", "acquire-failover-lock", "release-failover-lock"}[k]
}

// Action is one step for the caller.
type Action struct {
	Kind   Kind
	Target uint64
	Reason string
}

// Decider turns observations into actions. One goroutine calls Step.
type Decider struct {
	cfg Config
	// caughtUpSince is when the current unbroken run of caught-up
	// observations began; zero if the last one was not.
	caughtUpSince time.Time
	// failingOver is the dead voter a standby is replacing.
	failingOver uint64
}

// NewDecider returns a Decider for cfg.
func NewDecider(cfg Config) *Decider { return &Decider{cfg: cfg} }

// Step takes one observation and says what to do next.
func (d *Decider) Step(o Observation) Action {
	if ok, _ := CaughtUp(d.cfg, o); ok && o.IsLearner {
		if d.caughtUpSince.IsZero() {
			d.caughtUpSince = o.Now
		}
	} else {
		d.caughtUpSince = time.Time{}
	}
	held := !d.caughtUpSince.IsZero() && o.Now.Sub(d.caughtUpSince) >= d.cfg.Hold

	switch d.cfg.Role {
	case RoleVoter:
		if o.IsLearner && held {
			return Action{Kind: Promote, Target: o.SelfID, Reason: fmt.Sprintf("caught up for %v: %d entries behind", o.Now.Sub(d.caughtUpSince).Round(time.Millisecond), Lag(o))}
		}
	case RoleStandby:
		return d.standby(o, held)
	}
	return Action{}
}

func (d *Decider) standby(o Observation, held bool) Action {
	dead := d.dead(o)
	if !o.IsLearner {
		// Promoted: finish by removing the voter it replaced, if that is
		// still dead and removing it keeps a live quorum.
		if d.failingOver != 0 {
			for _, v := range dead {
				if v.ID == d.failingOver && liveQuorumAfter(o, -1) {
					d.failingOver = 0
					return Action{Kind: RemoveVoter, Target: v.ID, Reason: fmt.Sprintf("voter %s unreachable since %v, replaced by this standby", v.Name, v.UnreachableSince.Format(time.RFC3339))}
				}
			}
			d.failingOver = 0
		}
		if o.HoldsFailoverLock {
			return Action{Kind: ReleaseFailoverLock, Reason: "failover done"}
		}
		return Action{}
	}
	if len(dead) == 0 {
		d.failingOver = 0
		if o.HoldsFailoverLock {
			return Action{Kind: ReleaseFailoverLock, Reason: "every voter is reachable again"}
		}
		return Action{}
	}
	if !held || o.Leader == 0 {
		return Action{} // not caught up: a voter that lags would not help
	}
	if !liveQuorumAfter(o, +1) {
		return Action{} // the change could not commit, or would leave no live quorum
	}
	if !o.HoldsFailoverLock {
		return Action{Kind: AcquireFailoverLock, Reason: fmt.Sprintf("voter %s unreachable for %v", dead[0].Name, o.Now.Sub(dead[0].UnreachableSince).Round(time.Millisecond))}
	}
	d.failingOver = dead[0].ID
	return Action{Kind: Promote, Target: o.SelfID, Reason: fmt.Sprintf("replacing voter %s, unreachable for %v", dead[0].Name, o.Now.Sub(dead[0].UnreachableSince).Round(time.Millisecond))}
}

// dead lists the voters unreachable for longer than FailoverAfter.
func (d *Decider) dead(o Observation) []Voter {
	var out []Voter
	for _, v := range o.Voters {
		if v.ID != o.SelfID && !v.Reachable && !v.UnreachableSince.IsZero() && o.Now.Sub(v.UnreachableSince) > d.cfg.FailoverAfter {
			out = append(out, v)
		}
	}
	return out
}

// liveQuorumAfter reports whether, after adding (+1: promoting the
// replica, which is live) or removing (-1: a dead voter) one voter, the
// live voters would still be a quorum of all voters.
func liveQuorumAfter(o Observation, change int) bool {
	n, live := len(o.Voters), 0
	for _, v := range o.Voters {
		if v.Reachable {
			live++
		}
	}
	if !o.IsLearner {
		n, live = n+1, live+1 // the replica itself, now a voter
	}
	switch change {
	case +1:
		n, live = n+1, live+1
	case -1:
		n-- // removing a dead voter leaves live as it is
	}
	return live >= n/2+1
}
