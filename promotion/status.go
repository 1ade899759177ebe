package promotion

import (
	"fmt"
	"time"
)

// State is what the role loop is doing, in one word.
type State string

const (
	// StateIdle: nothing to do (every voter is live; a reader; a voter).
	StateIdle State = "idle"
	// StateWaiting: something is under way that ends by itself (a voter
	// silent for less than FailoverAfter, a promotion hold, a back-off
	// after a failed step).
	StateWaiting State = "waiting"
	// StateBlocked: the replica would act, but a rule forbids it until the
	// cluster changes (not caught up, no live quorum, no leader, another
	// standby holds the lock, the cluster's auth refuses a call).
	StateBlocked State = "blocked"
	// StateBlind: the replica cannot observe the cluster; every hold
	// starts over.
	StateBlind State = "blind"
	// StateActing: a step is being carried out.
	StateActing State = "acting"
)

// Reason codes, stable for metrics and alerts; Status.Detail says the rest.
const (
	ReasonLive               = "live"                      // every voter is live
	ReasonReader             = "reader"                    // --role reader
	ReasonVoter              = "voter"                     // already a voter
	ReasonSilence            = "silence"                   // a voter silent, not yet for FailoverAfter
	ReasonHold               = "hold"                      // caught up, not yet for Hold
	ReasonRetry              = "retry"                     // back-off after a failed step
	ReasonNotCaughtUp        = "not-caught-up"             // CaughtUp fails
	ReasonQuorumAfterPromote = "no-quorum-after-promotion" // one more voter would leave no live quorum
	ReasonQuorumAfterRemove  = "no-quorum-after-removal"   // removing the dead voter would leave none
	ReasonNoLeader           = "no-leader"                 // no leader known for a membership change
	ReasonLockBusy           = "lock-busy"                 // another standby holds the failover lock
	ReasonRefused            = "refused"                   // the cluster's auth refuses a call
	ReasonUnproven           = "unproven"                  // a voter does not answer, but nothing proves it down
	ReasonUncorroborated     = "uncorroborated"            // a voter does not answer here, the other voters do not agree
	ReasonMaintenance        = "maintenance-hold"          // a silent voter is under a maintenance hold
	ReasonCannotObserve      = "cannot-observe"            // the observation failed
	ReasonNoRound            = "no-read-index-round"       // the leader's commit index is unknown
)

// Status is why the role loop does what it does now: what `replica
// status` shows, what the logs say each time it changes, and a metric's
// labels (State, Reason).
type Status struct {
	State  State
	Reason string
	// Detail is for people: "hold 3.1s of 5s".
	Detail string
}

func (s Status) String() string {
	if s.Detail == "" {
		return string(s.State)
	}
	return string(s.State) + ": " + s.Detail
}

// Same reports whether s and o are the same state for the same reason
// (their details, which carry durations, may differ).
func (s Status) Same(o Status) bool { return s.State == o.State && s.Reason == o.Reason }

// wait is an Action that does nothing, and why.
func wait(state State, reason, format string, a ...any) Action {
	return Action{Reason: fmt.Sprintf(format, a...), status: Status{State: state, Reason: reason}}
}

// statusOf is what a's outcome tells of the loop.
func statusOf(a Action) Status {
	if a.Kind != None {
		return Status{State: StateActing, Reason: a.Kind.String(), Detail: a.Kind.String() + ": " + a.Reason}
	}
	s := a.status
	if s.State == "" {
		s = Status{State: StateIdle, Reason: ReasonLive}
	}
	s.Detail = a.Reason
	return s
}

// holdStatus says how far the promotion hold has come, or why it has not
// begun.
func (d *Decider) holdStatus(o Observation) Action {
	if d.caughtUpSince.IsZero() {
		if o.Leader != 0 && o.LeaderCommit == 0 {
			return wait(StateBlind, ReasonNoRound, "%s: the leader's commit index is unknown", noRound(o))
		}
		_, why := CaughtUp(d.cfg, o)
		return wait(StateBlocked, ReasonNotCaughtUp, "not caught up: %s", why)
	}
	return wait(StateWaiting, ReasonHold, "hold %v of %v", o.Now.Sub(d.caughtUpSince).Round(100*time.Millisecond), d.cfg.Hold)
}
