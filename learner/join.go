// Package learner owns a replica's own membership: adding it to a cluster
// as a learner (the add itself is membership's Changer's), knowing whether
// it has caught up, and the checks of its data dir and --join, so that a
// misconfigured replica never changes the voters or their quorum.
package learner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.uber.org/zap"

	"github.com/understudy-kv/understudy/membership"
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

// addTimeout bounds one attempt of the member add (and of the remove of
// --replace-own-learner); etcd's own request timeout is 5 s plus two
// elections.
const addTimeout = 10 * time.Second

// Join adds self as a learner, or finds the entry a previous, interrupted
// attempt added (same peer URLs, never started). The add is the
// membership Changer's: each attempt bounded by addTimeout, asked again,
// paced by clock, while etcd refuses it for now ("unhealthy cluster" right
// after a voter starts or restarts, the ID of a member removed this
// second) or does not answer (raft holds one membership change at a time
// and drops another proposed meanwhile: replicas joining at once), until
// ctx ends; an add applied although unanswered is found at its peer URLs.
func Join(ctx context.Context, lg *zap.Logger, clock clockwork.Clock, m membership.Cluster, self Self) (Joined, error) {
	cfg := membership.DefaultChangerConfig(m, clock)
	cfg.Attempt, cfg.Log = addTimeout, lg
	ch, err := membership.NewChanger(cfg)
	if err != nil {
		return Joined{}, fmt.Errorf("learner: join: %w", err)
	}
	for {
		j, err := joinOnce(ctx, ch, m, self)
		if errors.Is(err, errReplacedOwnLearner) {
			lg.Warn("--data-dir holds no member and the cluster listed this replica's own learner entry (its data was lost): removed it; joining as a new learner", zap.Error(err))
			continue
		}
		return j, err
	}
}

func joinOnce(ctx context.Context, ch *membership.Changer, m membership.Cluster, self Self) (Joined, error) {
	list, err := m.MemberList(ctx)
	if err != nil {
		return Joined{}, fmt.Errorf("learner: list members: %w", err)
	}
	name, peerURLs := self.Name, self.PeerURLs
	for _, mem := range list.Members {
		if mem.Name == name && !membership.SamePeerURLs(mem.PeerURLs, peerURLs) {
			return Joined{}, fmt.Errorf("%w: %q (ID %x, peer URLs %s); pick another --name",
				ErrNameTaken, name, mem.ID, strings.Join(mem.PeerURLs, ","))
		}
		if membership.SamePeerURLs(mem.PeerURLs, peerURLs) {
			switch {
			case mem.Name == "" && mem.IsLearner:
				// Added by an attempt that never started: take it over.
				return Joined{ID: mem.ID, InitialCluster: initialCluster(list.Members, mem.ID, name), Added: true}, nil
			case mem.Name == name && mem.IsLearner && self.ReplaceOwnLearner:
				// This replica's own entry, its data lost: a learner
				// counts for no quorum, so removing it is safe; one
				// promoted meanwhile is refused. Gone already (the old
				// pod's own leave) is done.
				if _, err := ch.RemoveLearner(ctx, mem.ID); err != nil {
					return Joined{}, fmt.Errorf("learner: --replace-own-learner: remove learner %q (ID %x): %w", name, mem.ID, err)
				}
				return Joined{}, fmt.Errorf("%w: %q (ID %x)", errReplacedOwnLearner, name, mem.ID)
			}
			return Joined{}, peerURLsTaken(self, mem)
		}
	}
	res, err := ch.AddLearner(ctx, peerURLs)
	var ce *membership.ChangeError
	switch {
	case err == nil && res.Member != nil:
		return Joined{ID: res.Member.ID, InitialCluster: initialCluster(res.Members, res.Member.ID, name), Added: true}, nil
	case err == nil:
		return Joined{}, errors.New("learner: add as learner: the answer names no member")
	case errors.Is(err, rpctypes.ErrTooManyLearners):
		return Joined{}, tooManyLearners(self, list.Members)
	case errors.Is(err, membership.ErrPeerURLsHeld) && errors.As(err, &ce) && ce.Member != nil:
		// Some of the URLs, or all of them held by a member that has
		// started since the list was read.
		return Joined{}, peerURLsTaken(self, ce.Member)
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

// errReplacedOwnLearner is a join that removed this replica's own learner
// entry (--replace-own-learner): the next attempt adds it anew.
var errReplacedOwnLearner = errors.New("learner: removed this replica's own learner entry")

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
