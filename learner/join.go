// Package learner owns a replica's membership: adding it to a cluster as a
// learner, knowing whether it has caught up, and taking the entry back out
// when it never becomes healthy, so that a misconfigured replica never
// changes the voters or their quorum.
package learner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/understudy-kv/understudy/backoff"
)

var (
	// ErrTooManyLearners means the cluster's learner limit is reached.
	ErrTooManyLearners = errors.New("learner: the cluster's learner limit is reached; raise --max-learners on every voter (etcd checks it on each member)")
	// ErrNameTaken means another member already uses this replica's name.
	ErrNameTaken = errors.New("learner: another member has this name")
	// ErrNotReady means the learner did not catch up within the join timeout.
	ErrNotReady = errors.New("learner: not ready within --join-timeout")
	// ErrPeerURLsTaken means a member that has started holds this
	// replica's peer URLs while its data dir holds no member: the data dir
	// was lost, or the URLs are another member's.
	ErrPeerURLsTaken = errors.New("learner: --initial-advertise-peer-urls belong to a member already")
	// ErrForeignDataDir means the data dir holds a member of another
	// cluster than the one --join reaches.
	ErrForeignDataDir = errors.New("learner: --data-dir belongs to another cluster")
	// ErrRemovedMember means the data dir holds a member the cluster no
	// longer lists.
	ErrRemovedMember = errors.New("learner: --data-dir holds a removed member")
	// ErrOtherMembersDataDir means the data dir holds a member of this
	// cluster under another name: a copy of another replica's data dir.
	ErrOtherMembersDataDir = errors.New("learner: --data-dir holds another member")
	// ErrJoinNotEtcd means no etcd cluster answered on the --join URLs.
	ErrJoinNotEtcd = errors.New("learner: --join does not reach an etcd cluster")
)

// Membership is the part of clientv3.Cluster the join needs.
type Membership interface {
	MemberList(ctx context.Context, opts ...clientv3.OpOption) (*clientv3.MemberListResponse, error)
	MemberAddAsLearner(ctx context.Context, peerAddrs []string) (*clientv3.MemberAddResponse, error)
	MemberRemove(ctx context.Context, id uint64) (*clientv3.MemberRemoveResponse, error)
}

var _ Membership = clientv3.Cluster(nil)

// Joined describes the member entry a replica starts as.
type Joined struct {
	// ID is the member ID the cluster gave the learner.
	ID uint64
	// InitialCluster is the etcd --initial-cluster value for the embedded
	// member: every member plus this one.
	InitialCluster string
	// Added is true when this call added the entry (and so may remove it).
	Added bool
}

// Join adds self as a learner, or finds the entry a previous, interrupted
// attempt added (same peer URLs, never started). The "unhealthy cluster"
// refusal etcd gives right after a voter starts or restarts is retried with
// backoff until ctx ends.
func Join(ctx context.Context, lg *zap.Logger, clock clockwork.Clock, m Membership, self Self) (Joined, error) {
	return join(ctx, lg, clock, m, self)
}

// joinBackoff is the first wait after a refused join; it doubles up to
// joinBackoffMax. etcd refuses a member add ("unhealthy cluster") until
// the member asked has been connected to a quorum of the voters for 5 s
// (etcdserver's HealthInterval), so a join right after the voters start
// waits about that long whatever the backoff; a cap of 500 ms ends the
// wait at most that late (a 2 s cap added up to 2 s to it). The member
// refuses before raft: retrying twice a second costs the cluster nothing.
const (
	joinBackoff    = 100 * time.Millisecond
	joinBackoffMax = 500 * time.Millisecond
)

// join is Join with its waits on clock.
func join(ctx context.Context, lg *zap.Logger, clock clockwork.Clock, m Membership, self Self) (Joined, error) {
	b := backoff.Exponential{Initial: joinBackoff, Max: joinBackoffMax}
	for {
		j, err := joinOnce(ctx, m, self)
		if errors.Is(err, errReplacedOwnLearner) {
			lg.Warn("--data-dir holds no member and the cluster listed this replica's own learner entry (its data was lost): removed it; joining as a new learner", zap.Error(err))
			continue
		}
		if err == nil || !retryable(err) {
			return j, err
		}
		d := b.Next()
		lg.Info("cluster refused the learner for now; retrying", zap.Error(err), zap.Duration("backoff", d))
		if werr := backoff.Wait(ctx, clock, d); werr != nil {
			return Joined{}, fmt.Errorf("learner: join: %w (last refusal: %v)", werr, err)
		}
	}
}

func joinOnce(ctx context.Context, m Membership, self Self) (Joined, error) {
	list, err := m.MemberList(ctx)
	if err != nil {
		return Joined{}, fmt.Errorf("learner: list members: %w", err)
	}
	name, peerURLs := self.Name, self.PeerURLs
	for _, mem := range list.Members {
		if mem.Name == name && !SamePeerURLs(mem.PeerURLs, peerURLs) {
			return Joined{}, fmt.Errorf("%w: %q (ID %x, peer URLs %s); pick another --name",
				ErrNameTaken, name, mem.ID, strings.Join(mem.PeerURLs, ","))
		}
		if SamePeerURLs(mem.PeerURLs, peerURLs) {
			switch {
			case mem.Name == "" && mem.IsLearner:
				// Added by an attempt that never started: take it over.
				return Joined{ID: mem.ID, InitialCluster: initialCluster(list.Members, mem.ID, name), Added: true}, nil
			case mem.Name == name && mem.IsLearner && self.ReplaceOwnLearner:
				// This replica's own entry, its data lost: a learner
				// counts for no quorum, so removing it is safe.
				rctx, cancel := context.WithTimeout(ctx, addTimeout)
				_, err := m.MemberRemove(rctx, mem.ID)
				cancel()
				switch {
				case err == nil || isErr(err, rpctypes.ErrMemberNotFound):
					// Removed, by this call or by the old pod's own leave.
					return Joined{}, fmt.Errorf("%w: %q (ID %x)", errReplacedOwnLearner, name, mem.ID)
				case ctx.Err() == nil && timedOut(err):
					// Dropped beside another change: the next attempt
					// lists the members again.
					return Joined{}, fmt.Errorf("%w: remove %x: %v", errAddTimedOut, mem.ID, err)
				}
				return Joined{}, fmt.Errorf("learner: --replace-own-learner: remove learner %q (ID %x): %w", name, mem.ID, err)
			}
			return Joined{}, peerURLsTaken(self, mem)
		}
	}
	addCtx, cancel := context.WithTimeout(ctx, addTimeout)
	resp, err := m.MemberAddAsLearner(addCtx, peerURLs)
	cancel()
	switch {
	case err == nil:
		return Joined{ID: resp.Member.ID, InitialCluster: initialCluster(resp.Members, resp.Member.ID, name), Added: true}, nil
	case ctx.Err() == nil && timedOut(err):
		// raft holds one membership change at a time and drops a second
		// proposed meanwhile (another replica joining at once), and etcd
		// waits for the dropped one until the request ends. Whether or
		// not it was applied, the next attempt sees: an entry at these
		// URLs that never started is taken over.
		return Joined{}, fmt.Errorf("%w: %v", errAddTimedOut, err)
	case isErr(err, rpctypes.ErrMemberNotFound):
		// etcd derives a new member's ID from its peer URLs and the
		// current second: added again within the second of a removal,
		// it gets the removed ID and is refused. The next second works.
		return Joined{}, fmt.Errorf("%w: %v", errRemovedThisSecond, err)
	case isErr(err, rpctypes.ErrTooManyLearners):
		return Joined{}, tooManyLearners(self, list.Members)
	case isErr(err, rpctypes.ErrPeerURLExist):
		// Some of the URLs, not all: find who holds them.
		for _, mem := range list.Members {
			if slices.ContainsFunc(mem.PeerURLs, func(u string) bool { return slices.Contains(peerURLs, u) }) {
				return Joined{}, peerURLsTaken(self, mem)
			}
		}
		// Nobody in the list read before the add: an earlier add that
		// timed out was applied since. The next attempt takes it over.
		return Joined{}, fmt.Errorf("%w: %v", errAddTimedOut, err)
	}
	return Joined{}, fmt.Errorf("learner: add as learner: %w", err)
}

// peerURLsTaken says what to do when mem, which has started (or is a
// voter), holds self's peer URLs.
func peerURLsTaken(self Self, mem *etcdserverpb.Member) error {
	who := fmt.Sprintf("member %q (ID %x)", mem.Name, mem.ID)
	if mem.Name == "" {
		who = fmt.Sprintf("member %x (never started)", mem.ID)
	}
	target := mem.Name
	if target == "" || target != self.Name {
		target = fmt.Sprintf("%x", mem.ID)
	}
	remove := fmt.Sprintf("`replica leave --endpoints %s %s`", joinList(self.Join), target)
	if mem.IsLearner && mem.Name == self.Name {
		remove += " (or start with --replace-own-learner, which does it)"
	}
	if !mem.IsLearner {
		remove = fmt.Sprintf("`etcdctl --endpoints %s member remove %x` (a voter: it changes the quorum)", joinList(self.Join), mem.ID)
	}
	return fmt.Errorf("%w: %s at %s, and --data-dir %s holds no member. If that member is this replica and its data dir was lost, run %s and start again (it joins as a new learner); otherwise give other --initial-advertise-peer-urls",
		ErrPeerURLsTaken, who, strings.Join(mem.PeerURLs, ","), self.DataDir, remove)
}

// tooManyLearners names the learners that never started (no name) when
// there are any: entries a first start left behind when it crashed.
func tooManyLearners(self Self, members []*etcdserverpb.Member) error {
	var stale []string
	for _, m := range members {
		if m.IsLearner && m.Name == "" {
			stale = append(stale, fmt.Sprintf("%x at %s", m.ID, strings.Join(m.PeerURLs, ",")))
		}
	}
	if len(stale) == 0 {
		return ErrTooManyLearners
	}
	return fmt.Errorf("%w. %d of the learners never started (no name): %s; a first start that crashed leaves such an entry, and starting that replica again with the same peer URLs reuses it. If no replica is starting there, remove it with `replica leave --endpoints %s ID`",
		ErrTooManyLearners, len(stale), strings.Join(stale, "; "), joinList(self.Join))
}

func joinList(join []string) string { return strings.Join(join, ",") }

func isErr(err, target error) bool {
	return errors.Is(err, target) || strings.Contains(err.Error(), target.Error())
}

// errReplacedOwnLearner is a join that removed this replica's own learner
// entry (--replace-own-learner): the next attempt adds it anew.
var errReplacedOwnLearner = errors.New("learner: removed this replica's own learner entry")

// addTimeout bounds one member add; etcd's own request timeout is 5 s
// plus two elections.
const addTimeout = 10 * time.Second

// timedOut is a membership change that got no answer in time.
func timedOut(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || isErr(err, rpctypes.ErrTimeout) || isErr(err, rpctypes.ErrTimeoutDueToLeaderFail)
}

// errAddTimedOut is a member add that got no answer within addTimeout.
var errAddTimedOut = errors.New("learner: the member add was not answered in time")

// errRemovedThisSecond is a refused add at peer URLs whose member was
// removed in the same second.
var errRemovedThisSecond = errors.New("learner: a member at these peer URLs was removed this second")

func retryable(err error) bool {
	return isErr(err, rpctypes.ErrUnhealthy) || errors.Is(err, errRemovedThisSecond) || errors.Is(err, errAddTimedOut)
}

// initialCluster lists every member by its peer URLs. Members that never
// started have no name yet; the new learner is given its own.
func initialCluster(members []*etcdserverpb.Member, self uint64, name string) string {
	var parts []string
	for _, m := range members {
		n := m.Name
		if m.ID == self {
			n = name
		}
		if n == "" {
			n = fmt.Sprintf("%x", m.ID)
		}
		for _, u := range m.PeerURLs {
			parts = append(parts, n+"="+u)
		}
	}
	return strings.Join(parts, ",")
}

// SamePeerURLs reports whether a and b hold the same URLs in any order.
func SamePeerURLs(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// Remove takes the member entry id out of the cluster. It is how a replica
// that never became healthy undoes its own join.
func Remove(ctx context.Context, m Membership, id uint64) error {
	_, err := m.MemberRemove(ctx, id)
	if err != nil && !isErr(err, rpctypes.ErrMemberNotFound) {
		return fmt.Errorf("learner: remove member %x: %w", id, err)
	}
	return nil
}
