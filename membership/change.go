package membership

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Promote promotes the learner target (name or hex ID) of sts, the
// cluster's status as Status returned it. Unless force, a learner that
// does not answer, or that understudy's rule does not find caught up, is
// refused with ErrRefused and the reason (for a learner that does not
// answer, how far behind the leader's raft progress has it); force leaves
// the check to etcd's own (a match index at least 90% of the leader's).
// The promotion itself is the Changer's: each attempt bounded by
// adminAttempt, asked again while unanswered until ctx ends; a member
// found a voter after an attempt in doubt is promoted.
func Promote(ctx context.Context, clock clockwork.Clock, cli *clientv3.Client, hc *http.Client, sts []*Member, target string, force bool) (*Member, error) {
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
	ch, err := NewChanger(adminChanger(cli, clock))
	if err != nil {
		return s, err
	}
	if _, err := ch.Promote(ctx, s.id); err != nil {
		return s, fmt.Errorf("membership: promote %s (%s): %w", s.Name, s.ID, err)
	}
	return s, nil
}

// adminAttempt bounds one attempt of `replica promote` or `replica leave`:
// shorter than etcd's request timeout (5 s plus two elections), so that a
// change raft dropped beside another (two pods leaving at once) is asked
// again sooner than etcd would give up on it.
const adminAttempt = 5 * time.Second

// adminChanger is how `replica promote` and `replica leave` ask.
func adminChanger(cli *clientv3.Client, clock clockwork.Clock) ChangerConfig {
	cfg := DefaultChangerConfig(cli, clock)
	cfg.Attempt = adminAttempt
	return cfg
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

// Leave removes the learner target (name or hex ID) of sts. Voters are
// refused: removing one changes the quorum, which is etcdctl member
// remove's business, knowingly. The removal is the Changer's: a remove
// that times out (raft drops a change proposed beside another: two pods
// leaving at once) is asked again until ctx ends, clock pacing it, after
// listing the members again: gone means an earlier remove was applied;
// promoted meanwhile is refused.
func Leave(ctx context.Context, clock clockwork.Clock, cli *clientv3.Client, sts []*Member, target string) (*Member, error) {
	s, err := Find(sts, target)
	if err != nil {
		return nil, err
	}
	if !s.IsLearner {
		return s, fmt.Errorf("%w: %s (%s) is a voter; remove voters with etcdctl member remove, knowing the quorum it changes", ErrRefused, s.Name, s.ID)
	}
	ch, err := NewChanger(adminChanger(cli, clock))
	if err != nil {
		return s, err
	}
	if _, err := ch.RemoveLearner(ctx, s.id); err != nil {
		return s, fmt.Errorf("membership: remove %s (%s): %w", s.Name, s.ID, err)
	}
	return s, nil
}
