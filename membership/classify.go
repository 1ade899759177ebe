package membership

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Op is a kind of membership change.
type Op int

const (
	// OpAddLearner adds a member at Change.PeerURLs as a learner.
	OpAddLearner Op = iota + 1
	// OpPromote promotes the learner Change.ID to voter.
	OpPromote
	// OpRemove removes the member Change.ID, voter or learner (a standby
	// removing the dead voter it replaced).
	OpRemove
	// OpRemoveLearner removes the learner Change.ID and never a voter: a
	// replica leaving, undoing its own join, or replacing its own entry.
	OpRemoveLearner
)

func (o Op) String() string {
	switch o {
	case OpAddLearner:
		return "add learner"
	case OpPromote:
		return "promote"
	case OpRemove:
		return "remove"
	case OpRemoveLearner:
		return "remove learner"
	}
	return fmt.Sprintf("op(%d)", int(o))
}

// Change is one membership change: what a Changer asks etcd for until an
// answer, or the member list, says it is made or will not be.
type Change struct {
	Op Op
	// ID is the member promoted or removed.
	ID uint64
	// PeerURLs are the new learner's.
	PeerURLs []string
}

func (c Change) String() string {
	if c.Op == OpAddLearner {
		return fmt.Sprintf("%s at %s", c.Op, strings.Join(c.PeerURLs, ","))
	}
	return fmt.Sprintf("%s %x", c.Op, c.ID)
}

// Verdict is what an answer means for a change.
type Verdict int

const (
	// Retry: not made (or not known to be); ask again after the backoff.
	Retry Verdict = iota + 1
	// Done: made, by this answer or before it.
	Done
	// Check: the answer alone does not say; the member list does (Settle).
	Check
	// Refused: asking again will not make it. Etcd refused it (its rules or
	// its auth) before anything changed, or understudy's own rule does.
	Refused
	// Failed: an answer this table does not know. It is not asked again,
	// and it may or may not have changed something.
	Failed
)

func (v Verdict) String() string {
	switch v {
	case Retry:
		return "retry"
	case Done:
		return "done"
	case Check:
		return "check"
	case Refused:
		return "refused"
	case Failed:
		return "failed"
	}
	return fmt.Sprintf("verdict(%d)", int(v))
}

// Answer is what one attempt's answer, or the member list read to settle
// a change, says.
type Answer struct {
	Verdict Verdict
	// Unanswered: no answer came in time, or the connection or the leader
	// was lost meanwhile; the change may still be applied. Until a later
	// answer or the member list settles it, the change is in doubt.
	Unanswered bool
	// Already: Done because the change was found made (a member to remove
	// not found, a member to promote a voter already, a learner to add
	// listed at its peer URLs), not because this attempt made it.
	Already bool
	// Member is the member the list showed (Settle): the learner found
	// added, or the member in the way of a refused change.
	Member *etcdserverpb.Member
	// Why is understudy's reason for Settle's Refused.
	Why error
}

// ErrPeerURLsHeld means another member holds some or all of the peer URLs
// a learner was to be added at (Answer.Member names it).
var ErrPeerURLsHeld = errors.New("membership: another member holds these peer URLs")

// Classify is the one reading of etcd's answer err to an attempt of op,
// for every membership change understudy makes. It is pure: the same
// answer always means the same, whoever asked.
//
//   - Retry, answered: etcd refused before proposing anything and will
//     take it later: an unhealthy cluster (a member asked right after a
//     voter started: etcd's 5 s health interval), too many requests, not
//     enough started members; for an add, the ID of a member removed this
//     second ("member not found": etcd derives IDs from the peer URLs and
//     the time, and a removed ID is refused).
//   - Retry, unanswered: no answer in time (the attempt's deadline, etcd's
//     request timeout: raft holds one membership change at a time and
//     drops another proposed meanwhile, and etcd waits for the dropped one
//     until the request ends), no leader, the leader changed, the member
//     stopped, the connection lost.
//   - Done: no error; a remove of a member not found (removed by an earlier
//     attempt, or by someone else: it is gone either way); a promote of a
//     member that is a voter already ("can only promote a learner member").
//   - Check: an add refused because the peer URLs or the ID exist: an
//     earlier attempt's add may have been applied after all, or another
//     member holds the URLs; the member list tells which (Settle).
//   - Refused: the learner limit, bad peer URLs; a learner not ready to
//     promote (etcd's own 90% check), a member to promote that is gone;
//     the cluster's auth (permission denied, no user, bad credentials).
//   - Failed: anything else.
func Classify(op Op, err error) Answer {
	if err == nil {
		return Answer{Verdict: Done}
	}
	e := etcdError(err)
	is := func(targets ...error) bool {
		return slices.ContainsFunc(targets, func(t error) bool { return errors.Is(e, t) })
	}
	switch {
	case is(rpctypes.ErrUnhealthy, rpctypes.ErrTooManyRequests, rpctypes.ErrMemberNotEnoughStarted):
		return Answer{Verdict: Retry}
	case is(rpctypes.ErrTimeout, rpctypes.ErrTimeoutDueToLeaderFail, rpctypes.ErrTimeoutDueToConnectionLost,
		rpctypes.ErrTimeoutWaitAppliedIndex, rpctypes.ErrNoLeader, rpctypes.ErrLeaderChanged, rpctypes.ErrStopped):
		return Answer{Verdict: Retry, Unanswered: true}
	case is(rpctypes.ErrPermissionDenied, rpctypes.ErrUserEmpty, rpctypes.ErrAuthFailed):
		return Answer{Verdict: Refused}
	}
	switch op {
	case OpAddLearner:
		switch {
		case is(rpctypes.ErrMemberNotFound):
			return Answer{Verdict: Retry}
		case is(rpctypes.ErrPeerURLExist, rpctypes.ErrMemberExist):
			return Answer{Verdict: Check}
		case is(rpctypes.ErrTooManyLearners, rpctypes.ErrMemberBadURLs):
			return Answer{Verdict: Refused}
		}
	case OpPromote:
		switch {
		case is(rpctypes.ErrMemberNotLearner):
			return Answer{Verdict: Done, Already: true}
		case is(rpctypes.ErrMemberLearnerNotReady, rpctypes.ErrMemberNotFound):
			return Answer{Verdict: Refused}
		}
	case OpRemove, OpRemoveLearner:
		if is(rpctypes.ErrMemberNotFound) {
			return Answer{Verdict: Done, Already: true}
		}
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return Answer{Verdict: Retry, Unanswered: true}
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return Answer{Verdict: Retry, Unanswered: true}
	}
	return Answer{Verdict: Failed}
}

// Retryable tells whether err, however wrapped, is an answer Classify
// says to ask again (Retry): the same path later, or another path to the
// cluster now, may get the call through. A ChangeError is retryable when
// its context ended while its change was still to be asked again.
func Retryable(err error) bool {
	var ce *ChangeError
	if errors.As(err, &ce) {
		return ce.Verdict == Retry
	}
	return Classify(0, err).Verdict == Retry
}

// etcdError is err as the rpctypes.EtcdError it carries, in the client's
// form or the server's (a gRPC status), or err itself.
func etcdError(err error) error {
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee
	}
	var gs interface{ GRPCStatus() *status.Status }
	if errors.As(err, &gs) {
		return rpctypes.Error(gs.GRPCStatus().Err())
	}
	return err
}

// Settle judges change c against the cluster's member list, read after an
// answer Classify could not judge alone (Check) or, for OpRemoveLearner,
// before asking again after an attempt in doubt. It is pure.
//
//   - OpAddLearner: a learner that never started (no name) at exactly
//     c.PeerURLs is Done: an earlier add applied after all, or one a
//     first start left behind. A member that has started, or a voter, at
//     those URLs, or any member at some of them, is Refused
//     (ErrPeerURLsHeld, Member names it). Nobody at them: Retry.
//   - OpPromote: a voter is Done; a learner, Retry; gone, Refused.
//   - OpRemove: gone is Done; listed, Retry.
//   - OpRemoveLearner: gone is Done; a learner, Retry; a voter is Refused
//     (ErrRefused): a learner promoted meanwhile (a standby taking over)
//     is never removed here, since that changes the quorum.
func Settle(c Change, members []*etcdserverpb.Member) Answer {
	if c.Op == OpAddLearner {
		for _, m := range members {
			if !SamePeerURLs(m.PeerURLs, c.PeerURLs) {
				continue
			}
			if m.IsLearner && m.Name == "" {
				return Answer{Verdict: Done, Already: true, Member: m}
			}
			return Answer{Verdict: Refused, Member: m, Why: fmt.Errorf("%w: %s at %s", ErrPeerURLsHeld, describe(m), strings.Join(m.PeerURLs, ","))}
		}
		for _, m := range members {
			if slices.ContainsFunc(m.PeerURLs, func(u string) bool { return slices.Contains(c.PeerURLs, u) }) {
				return Answer{Verdict: Refused, Member: m, Why: fmt.Errorf("%w: %s at %s", ErrPeerURLsHeld, describe(m), strings.Join(m.PeerURLs, ","))}
			}
		}
		return Answer{Verdict: Retry}
	}
	i := slices.IndexFunc(members, func(m *etcdserverpb.Member) bool { return m.ID == c.ID })
	if i < 0 {
		if c.Op == OpPromote {
			return Answer{Verdict: Refused, Why: fmt.Errorf("%w: member %x is no longer listed", ErrNoMember, c.ID)}
		}
		return Answer{Verdict: Done, Already: true}
	}
	m := members[i]
	switch {
	case c.Op == OpPromote && !m.IsLearner:
		return Answer{Verdict: Done, Already: true, Member: m}
	case c.Op == OpRemoveLearner && !m.IsLearner:
		return Answer{Verdict: Refused, Member: m, Why: fmt.Errorf("%w: %s is a voter now; only learners are removed here (remove voters with etcdctl member remove, knowing the quorum it changes)", ErrRefused, describe(m))}
	}
	return Answer{Verdict: Retry, Member: m}
}

// describe names a member of a member list.
func describe(m *etcdserverpb.Member) string {
	if m.Name == "" {
		return fmt.Sprintf("member %x (never started)", m.ID)
	}
	return fmt.Sprintf("member %q (ID %x)", m.Name, m.ID)
}

// SamePeerURLs reports whether a and b hold the same URLs in any order.
func SamePeerURLs(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
