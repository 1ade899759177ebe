package promotion

import "time"

// ViewReuse is how long a leader's raft view may stand in for a new one
// (see ReuseView).
const ViewReuse = time.Second

// ReuseView decides whether the observation o, being made, may reuse the
// leader's raft view read at viewAt from viewLeader instead of reading it
// again. Each read costs the leader a /debug/vars request (about a
// millisecond of its CPU, and a runtime.ReadMemStats); reading it on every
// observation is only worth it while something could come of it.
//
// The view is reused for less than ViewReuse, from the same leader (not
// this member: its own view costs no request), while it showed every
// voter active (allActive), no failover is under way (no record, lock not
// held), and o is not a learner that promotes as soon as it is caught up
// (RoleVoter): such a learner's decision rests on the leader's commit
// index now. A voter that dies is seen silent by the next fresh view,
// within ViewReuse; every observation after that is fresh, so a failover
// is decided on fresh views only. A standby's promotion hold may have
// begun on a commit index up to ViewReuse old.
func ReuseView(c Config, o Observation, viewAt time.Time, viewLeader uint64, allActive bool) bool {
	switch {
	case viewAt.IsZero(), o.Now.Before(viewAt), o.Now.Sub(viewAt) >= ViewReuse:
		return false
	case o.Leader == 0, o.Leader != viewLeader:
		return false
	case o.Leader == o.SelfID:
		return false // read in-process: nothing to save
	case o.Failover != nil, o.HoldsFailoverLock:
		return false
	case c.Role == RoleVoter && o.IsLearner:
		return false
	}
	return allActive
}
