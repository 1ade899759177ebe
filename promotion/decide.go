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
	// has been silent for longer than FailoverAfter.
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
	return "", errors.New("want one of reader, standby, voter")
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
	// FailoverAfter is how long a voter must be silent (Voter.Silent),
	// without a break, before a standby replaces it.
	FailoverAfter time.Duration
}

// DefaultConfig is a reader with the bounds a standby or voter would use.
func DefaultConfig() Config {
	return Config{Role: RoleReader, MaxLag: 1000, Hold: 5 * time.Second, LeaderContact: 2 * time.Second, FailoverAfter: 5 * time.Minute}
}

// Validate reports every bad field at once, naming its flag.
func (c Config) Validate() error {
	var problems []error
	add := func(format string, a ...any) { problems = append(problems, fmt.Errorf(format, a...)) }
	if _, err := ParseRole(string(c.Role)); err != nil {
		add("--role %q: %v", c.Role, err)
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

// Observation is the cluster as the replica sees it at Now.
type Observation struct {
	Now      time.Time
	SelfID   uint64
	SelfName string
	// IsLearner is false once the replica has been promoted.
	IsLearner bool
	// Leader is the leader's member ID; 0 if none is known.
	Leader uint64
	// LastLeaderContact is when the replica last heard from the leader.
	LastLeaderContact time.Time
	// Applied is the replica's applied index; LeaderCommit the leader's
	// commit index, 0 if unknown. The caller learns it from raft itself: a
	// ReadIndex round through the leader answers with its commit index
	// (the caller may use an upper bound, such as its applied index once
	// the round completed, with Applied taken before the round); the
	// leader's raft status, where it can be read, is a refinement.
	Applied, LeaderCommit uint64
	// LastRound is when the last ReadIndex round of the replica's own that
	// completed began; zero if none has.
	LastRound time.Time
	// Voters are the voting members, without the replica, with what the
	// caller learned of each this round.
	Voters []Voter
	// HoldsFailoverLock: the replica holds the lock that lets one standby
	// act at a time, and the lock's session is alive.
	HoldsFailoverLock bool
	// Failover is the failover record persisted in the cluster, as last
	// read; nil if no failover is under way.
	Failover *Record
	// Holds are the maintenance holds stored in the cluster, as last read,
	// at the store's revision HoldsRev (which fences the steps taken on
	// this observation: no hold may have been written since).
	Holds    []MaintenanceHold
	HoldsRev int64
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
	} else if o.LeaderCommit == 0 {
		reasons = append(reasons, "the leader's commit index is unknown ("+noRound(o)+")")
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

// noRound says since when no ReadIndex round has completed.
func noRound(o Observation) string {
	if o.LastRound.IsZero() {
		return "no ReadIndex round has completed"
	}
	return fmt.Sprintf("no ReadIndex round for %v", o.Now.Sub(o.LastRound).Round(100*time.Millisecond))
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
	// ReleaseFailoverLock: the failover is over, no longer needed, or this
	// replica cannot carry it on.
	ReleaseFailoverLock
	// WriteRecord persists Action.Record as the failover record, only while
	// the caller holds the lock.
	WriteRecord
	// ClearRecord deletes the failover record (Action.Record is the one
	// read), only while the caller holds the lock: the failover is finished
	// or abandoned.
	ClearRecord
)

func (k Kind) String() string {
	return [...]string{"none", "promote", "remove-voter", "acquire-failover-lock", "release-failover-lock", "write-failover-record", "clear-failover-record"}[k]
}

// Action is one step for the caller. The caller carries it out and reports
// the outcome with Decider.Done.
type Action struct {
	Kind   Kind
	Target uint64
	// Record is the record to write (WriteRecord), or the record a Promote,
	// RemoveVoter or ClearRecord is based on: the caller acts only if the
	// persisted record is still this one.
	Record *Record
	Reason string
	// status, for None, is why nothing is done (see Status).
	status Status
}

// Decider turns observations into actions. One goroutine calls Step, Blind
// and Done.
type Decider struct {
	cfg Config
	// caughtUpSince is when the current unbroken run of caught-up
	// observations began; zero if the last one was not.
	caughtUpSince time.Time
	// silentSince is, per voter, when the current unbroken run of
	// observations in which it was silent began.
	silentSince map[uint64]time.Time
	// retryAt delays the next action after failures; failures counts them
	// in a row.
	retryAt  time.Time
	failures int
	// lastFailure is the last failed action and its error, for Status;
	// lastErr the error.
	lastFailure string
	lastErr     error
	// status is what the last Step, Blind or Done found.
	status Status
}

// NewDecider returns a Decider for cfg.
func NewDecider(cfg Config) *Decider { return &Decider{cfg: cfg, silentSince: map[uint64]time.Time{}} }

// Step takes one observation and says what to do next.
func (d *Decider) Step(o Observation) Action {
	if ok, _ := CaughtUp(d.cfg, o); ok && o.IsLearner {
		if d.caughtUpSince.IsZero() {
			d.caughtUpSince = o.Now
		}
	} else {
		d.caughtUpSince = time.Time{}
	}
	d.track(o)
	held := !d.caughtUpSince.IsZero() && o.Now.Sub(d.caughtUpSince) >= d.cfg.Hold

	var a Action
	switch d.cfg.Role {
	case RoleReader:
		a = wait(StateIdle, ReasonReader, "a reader never promotes")
	case RoleVoter:
		switch {
		case !o.IsLearner:
			a = wait(StateIdle, ReasonVoter, "a voter")
		case held:
			a = Action{Kind: Promote, Target: o.SelfID, Reason: fmt.Sprintf("caught up for %v: %d entries behind", o.Now.Sub(d.caughtUpSince).Round(time.Millisecond), Lag(o))}
		default:
			a = d.holdStatus(o)
		}
	case RoleStandby:
		a = d.standby(o, held)
	}
	// After a failure, wait before trying again; letting go of the lock
	// never waits.
	if a.Kind != None && a.Kind != ReleaseFailoverLock && o.Now.Before(d.retryAt) {
		a = d.retryStatus(o, a)
	}
	d.status = statusOf(a)
	if a.Kind == None {
		return Action{Reason: a.Reason, status: a.status}
	}
	return a
}

// ErrLockBusy, fed to Done, says that another standby holds the failover
// lock: the failover is blocked on it, not failing.
var ErrLockBusy = errors.New("promotion: another standby holds the failover lock")

// ErrRefused, wrapped in an error fed to Done, says that the cluster
// refuses the replica the call (its auth): retrying will not help until an
// operator grants the rights, so the replica is blocked, not waiting.
var ErrRefused = errors.New("refused by the cluster's auth")

// retryStatus is why a, decided during the back-off after a failure, waits.
func (d *Decider) retryStatus(o Observation, a Action) Action {
	left := d.retryAt.Sub(o.Now).Round(100 * time.Millisecond)
	switch {
	case errors.Is(d.lastErr, ErrLockBusy):
		return wait(StateBlocked, ReasonLockBusy, "another standby holds the failover lock (asking again in %v)", left)
	case errors.Is(d.lastErr, ErrRefused):
		return wait(StateBlocked, ReasonRefused, "%s (trying again in %v)", d.lastFailure, left)
	}
	return wait(StateWaiting, ReasonRetry, "%s again in %v; %s", a.Kind, left, d.lastFailure)
}

// Status is what the last Step, Blind or Done found: what the loop does,
// or why it does nothing.
func (d *Decider) Status() Status { return d.status }

// Blind tells the core that observing failed at now: it cannot tell who is
// caught up or dead, so every hold starts over, and a standby holding the
// lock lets it go for one that can act.
func (d *Decider) Blind(now time.Time, holdsLock bool, why error) Action {
	d.caughtUpSince = time.Time{}
	clear(d.silentSince)
	d.status = Status{State: StateBlind, Reason: ReasonCannotObserve, Detail: fmt.Sprintf("cannot observe the cluster: %v", why)}
	if holdsLock {
		return Action{Kind: ReleaseFailoverLock, Reason: "cannot observe the cluster"}
	}
	return Action{}
}

// Done feeds back the outcome of an action the caller carried out at now:
// after a failure the next action waits, doubling up to 5 s.
func (d *Decider) Done(now time.Time, a Action, err error) {
	if err == nil {
		d.failures, d.retryAt, d.lastFailure, d.lastErr = 0, time.Time{}, "", nil
		return
	}
	d.lastFailure, d.lastErr = fmt.Sprintf("the last %s failed: %v", a.Kind, err), err
	d.failures++
	wait := roleRetryBase << min(d.failures-1, 5)
	d.retryAt = now.Add(min(wait, roleRetryMax))
}

const (
	roleRetryBase = 200 * time.Millisecond
	roleRetryMax  = 5 * time.Second
)
