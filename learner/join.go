// Package learner owns a replica's membership: adding it to a cluster as a
// learner, knowing whether it has caught up, and taking the entry back out
// when it never becomes healthy, so that a misconfigured replica never
// changes the voters or their quorum.
package learner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

var (
	// ErrTooManyLearners means the cluster's learner limit is reached.
	ErrTooManyLearners = errors.New("learner: the cluster's learner limit is reached; raise --max-learners on every voter (etcd checks it on each member)")
	// ErrNameTaken means another member already uses this replica's name.
	ErrNameTaken = errors.New("learner: another member has this name")
	// ErrNotReady means the learner did not catch up within the join timeout.
	ErrNotReady = errors.New("learner: not ready within --join-timeout")
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

// HasData reports whether dataDir already holds an etcd member, in which case
// the replica restarts as that member and adds nothing.
func HasData(dataDir string) bool {
	_, err := os.Stat(filepath.Join(dataDir, "member", "wal"))
	return err == nil
}

// Join adds a learner with peerURLs to the cluster, or finds the entry a
// previous, interrupted attempt added (same peer URLs, never started). The
// "unhealthy cluster" refusal etcd gives right after a voter starts or
// restarts is retried with backoff until ctx ends.
func Join(ctx context.Context, lg *zap.Logger, m Membership, name string, peerURLs []string) (Joined, error) {
	backoff := 100 * time.Millisecond
	for {
		j, err := joinOnce(ctx, m, name, peerURLs)
		if err == nil || !retryable(err) {
			return j, err
		}
		lg.Info("cluster refused the learner for now; retrying", zap.Error(err), zap.Duration("backoff", backoff))
		select {
		case <-ctx.Done():
			return Joined{}, fmt.Errorf("learner: join: %w (last refusal: %v)", ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

func joinOnce(ctx context.Context, m Membership, name string, peerURLs []string) (Joined, error) {
	list, err := m.MemberList(ctx)
	if err != nil {
		return Joined{}, fmt.Errorf("learner: list members: %w", err)
	}
	for _, mem := range list.Members {
		if mem.Name == name && !samePeers(mem.PeerURLs, peerURLs) {
			return Joined{}, fmt.Errorf("%w: %q (ID %x, peer URLs %s); pick another --name",
				ErrNameTaken, name, mem.ID, strings.Join(mem.PeerURLs, ","))
		}
		if samePeers(mem.PeerURLs, peerURLs) {
			if mem.Name != "" && mem.Name != name {
				return Joined{}, fmt.Errorf("learner: peer URLs %s belong to member %q (ID %x); use its name or other --initial-advertise-peer-urls",
					strings.Join(peerURLs, ","), mem.Name, mem.ID)
			}
			if mem.Name == "" && mem.IsLearner {
				// Added by an attempt that never started: take it over.
				return Joined{ID: mem.ID, InitialCluster: initialCluster(list.Members, mem.ID, name), Added: true}, nil
			}
		}
	}
	resp, err := m.MemberAddAsLearner(ctx, peerURLs)
	if err != nil {
		if errors.Is(err, rpctypes.ErrTooManyLearners) || strings.Contains(err.Error(), rpctypes.ErrTooManyLearners.Error()) {
			return Joined{}, ErrTooManyLearners
		}
		return Joined{}, fmt.Errorf("learner: add as learner: %w", err)
	}
	return Joined{ID: resp.Member.ID, InitialCluster: initialCluster(resp.Members, resp.Member.ID, name), Added: true}, nil
}

func retryable(err error) bool {
	return errors.Is(err, rpctypes.ErrUnhealthy) || strings.Contains(err.Error(), rpctypes.ErrUnhealthy.Error())
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

func samePeers(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// Remove takes the member entry id out of the cluster. It is how a replica
// that never became healthy undoes its own join.
func Remove(ctx context.Context, m Membership, id uint64) error {
	_, err := m.MemberRemove(ctx, id)
	if err != nil && !errors.Is(err, rpctypes.ErrMemberNotFound) && !strings.Contains(err.Error(), rpctypes.ErrMemberNotFound.Error()) {
		return fmt.Errorf("learner: remove member %x: %w", id, err)
	}
	return nil
}
