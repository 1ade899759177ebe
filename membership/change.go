package membership

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/backoff"
)

// Promote promotes the learner target (name or hex ID) of sts, the
// cluster's status as Status returned it. Unless force, a learner that
// does not answer, or that understudy's rule does not find caught up, is
// refused with ErrRefused and the reason (for a learner that does not
// answer, how far behind the leader's raft progress has it); force leaves
// the check to etcd's own (a match index at least 90% of the leader's).
func Promote(ctx context.Context, cli *clientv3.Client, hc *http.Client, sts []*Member, target string, force bool) (*Member, error) {
	s, err := Find(sts, target)
	if err != nil {
		return nil, err
	}
	if !s.IsLearner {
		return s, fmt.Errorf("%w: %s (%s) is already a voter", ErrRefused, s.Name, s.ID)
	}
	if !force {
		switch {
		case !s.Reachable:
			behind := "how far behind it is, the leader does not say"
			if match, commit, err := leaderMatch(ctx, hc, sts, s.id); err == nil {
				behind = Behind(match, commit)
			}
			return s, fmt.Errorf("%w %s (%s): it does not answer on %s (%s); %s. understudy promotes only a live learner within --promote-max-lag entries of the leader's commit (--force leaves it to etcd's check)",
				ErrRefused, s.Name, s.ID, s.ClientURL, s.Error, behind)
		case s.Promotable == nil || !*s.Promotable:
			return s, fmt.Errorf("%w %s (%s): %s (--force leaves it to etcd's 90%% rule)", ErrRefused, s.Name, s.ID, s.Why)
		}
	}
	if _, err := cli.MemberPromote(ctx, s.id); err != nil {
		return s, fmt.Errorf("membership: promote %s (%s): etcd refused: %w", s.Name, s.ID, err)
	}
	return s, nil
}

// Behind says how far a member whose log matches the leader's up to match
// trails commit, and whether etcd's own promotion check would pass it.
func Behind(match, commit uint64) string {
	pct := 100 * float64(match) / float64(max(commit, 1))
	out := fmt.Sprintf("the leader has it at index %d of its commit %d: %d entries behind, %.1f%% of the log", match, commit, commit-min(match, commit), pct)
	if pct >= 90 {
		out += ", enough for etcd's own check (90%)"
	}
	return out
}

// leaderMatch reads, from the leader's raft progress, the index up to
// which the leader knows member id's log matches its own: the only view of
// a learner that does not answer.
func leaderMatch(ctx context.Context, hc *http.Client, sts []*Member, id uint64) (match, commit uint64, err error) {
	var leader *Member
	for _, s := range sts {
		if s.IsLeader {
			leader = s
		}
	}
	if leader == nil || hc == nil {
		return 0, 0, fmt.Errorf("membership: no leader")
	}
	lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	st, err := LeaderRaftStatus(lctx, hc, leader.ClientURL)
	if err != nil {
		return 0, 0, err
	}
	p, ok := st.Progress[id]
	if !ok {
		return 0, 0, fmt.Errorf("membership: the leader's raft status has no progress for %x", id)
	}
	return p.Match, st.Commit, nil
}

// removeTimeout bounds one member remove, and removeRetry is the wait
// before the next: raft holds one membership change at a time and drops
// another proposed meanwhile (two pods leaving at once), and etcd waits
// for the dropped one until the request ends.
const (
	removeTimeout = 5 * time.Second
	removeRetry   = 500 * time.Millisecond
)

// Leave removes the learner target (name or hex ID) of sts. Voters are
// refused: removing one changes the quorum, which is etcdctl member
// remove's business, knowingly. A remove that times out is asked again
// until ctx ends, clock pacing it, after listing the members again: gone
// means an earlier remove was applied; promoted meanwhile is refused.
func Leave(ctx context.Context, clock clockwork.Clock, cli *clientv3.Client, sts []*Member, target string) (*Member, error) {
	s, err := Find(sts, target)
	if err != nil {
		return nil, err
	}
	if !s.IsLearner {
		return s, fmt.Errorf("%w: %s (%s) is a voter; remove voters with etcdctl member remove, knowing the quorum it changes", ErrRefused, s.Name, s.ID)
	}
	for try := 1; ; try++ {
		rctx, cancel := context.WithTimeout(ctx, removeTimeout)
		_, err := cli.MemberRemove(rctx, s.id)
		cancel()
		switch {
		case err == nil:
			return s, nil
		case try > 1 && hasErr(err, rpctypes.ErrMemberNotFound):
			return s, nil
		case ctx.Err() != nil || !(errors.Is(err, context.DeadlineExceeded) || hasErr(err, rpctypes.ErrTimeout) || hasErr(err, rpctypes.ErrTimeoutDueToLeaderFail)):
			return s, fmt.Errorf("membership: remove %s (%s): %w", s.Name, s.ID, err)
		}
		if werr := backoff.Wait(ctx, clock, removeRetry); werr != nil {
			return s, fmt.Errorf("membership: remove %s (%s): %w (after %v)", s.Name, s.ID, werr, err)
		}
		// Listed again before asking again: the remove may have been
		// applied late, or the learner promoted meanwhile (a standby
		// taking over), and a voter is never removed here.
		lctx, cancel := context.WithTimeout(ctx, removeTimeout)
		list, lerr := cli.MemberList(lctx)
		cancel()
		if lerr != nil {
			return s, fmt.Errorf("membership: remove %s (%s): %v; then listing the members: %w", s.Name, s.ID, err, lerr)
		}
		i := slices.IndexFunc(list.Members, func(m *etcdserverpb.Member) bool { return m.ID == s.id })
		switch {
		case i < 0:
			return s, nil
		case !list.Members[i].IsLearner:
			return s, fmt.Errorf("%w: %s (%s) became a voter while its removal waited; remove voters with etcdctl member remove, knowing the quorum it changes", ErrRefused, s.Name, s.ID)
		}
	}
}

func hasErr(err, target error) bool {
	return errors.Is(err, target) || strings.Contains(err.Error(), target.Error())
}
