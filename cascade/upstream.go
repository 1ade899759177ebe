package cascade

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/understudy-kv/understudy/wire"
)

var (
	// ErrUpstream wraps the refusals of --upstream: an operator must fix
	// the flag.
	ErrUpstream = errors.New("cascade: refused --upstream")
	// ErrDiverged means the local store no longer equals the source at a
	// revision the Applier checked: it must not be served, and the replica
	// bootstraps again.
	ErrDiverged = errors.New("cascade: the local store diverged from the source")
	// ErrBehind means no upstream the replica can follow still has the
	// revisions it needs (compacted past them): it bootstraps again.
	ErrBehind = errors.New("cascade: no upstream that answers still has the revision this replica needs (compacted past it)")
	// ErrAuth refuses a source cluster with auth enabled to a replica
	// without a user of the root role: it copies the whole keyspace (a
	// snapshot, a watch of every key) and the users and roles.
	ErrAuth = errors.New("cascade: the source cluster has auth enabled: a cascaded replica needs --user (and --password) of a user with the root role, to copy its snapshot, every key's changes and its users and roles")
)

// upstream is one --upstream URL and its client, made when first needed
// (client): a client with the replica's user authenticates as it is made,
// which an upstream down cannot answer.
type upstream struct {
	url  string
	dial func(endpoints []string) (*clientv3.Client, error)
	mu   sync.Mutex
	// cli is set once, by client, and never changes after.
	cli *clientv3.Client
}

// client is u's client, made now if it was not yet.
func (u *upstream) client() (*clientv3.Client, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.cli != nil {
		return u.cli, nil
	}
	cli, err := u.dial([]string{u.url})
	if err != nil {
		return nil, fmt.Errorf("--upstream %s: %w", u.url, err)
	}
	u.cli = cli
	return cli, nil
}

func (u *upstream) close() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.cli != nil {
		_ = u.cli.Close()
	}
}

// identity is what an upstream says of itself.
type identity struct {
	cluster uint64 // the source cluster's ID
	leader  bool   // it is the source's leader
	leadID  uint64 // the source's leader, as it says
	rev     int64  // its store's revision
	quota   int64  // its backend quota (Status's DbSizeQuota)
	chain   []string
}

// identify asks u's Status within timeout, as a probe (a replica then
// tells its chain of upstreams, wire.UpstreamChainKey).
func identify(ctx context.Context, u *upstream, timeout time.Duration) (identity, error) {
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(ctx, wire.ProbeKey, "1"), timeout)
	defer cancel()
	cli, err := u.client()
	if err != nil {
		return identity{}, err
	}
	var hdr metadata.MD
	st, err := pb.NewMaintenanceClient(cli.ActiveConnection()).Status(ctx, &pb.StatusRequest{}, grpc.Header(&hdr))
	if err != nil {
		return identity{}, fmt.Errorf("--upstream %s: not an etcd client URL that answers Status within %v: %w", u.url, timeout, err)
	}
	id := identity{cluster: st.Header.ClusterId, leader: st.Leader != 0 && st.Leader == st.Header.MemberId, leadID: st.Leader, rev: st.Header.Revision, quota: st.DbSizeQuota}
	if v := hdr.Get(wire.UpstreamChainKey); len(v) > 0 {
		id.chain = strings.Split(v[0], ",")
	}
	if st.IsLearner && len(id.chain) == 0 {
		// A stock etcd learner serves only Status and serializable reads:
		// no watch, no linearizable read, no auth status.
		return identity{}, fmt.Errorf("%w: %s is a stock etcd learner (member %x), which serves only Status and serializable reads, not the watch and linearizable reads a cascaded replica copies with: name a replica's client URL (or a voter's)",
			ErrUpstream, u.url, st.Header.MemberId)
	}
	return id, nil
}

// checkUpstreams asks every upstream at once (each within timeout) and
// refuses upstreams of different clusters, a stock learner, and one whose
// chain of upstreams holds this replica (instance): a cycle. It returns
// the source cluster's ID and the identities, by upstream, of those that
// answered (an upstream down now may be used later, once checked).
func checkUpstreams(ctx context.Context, us []*upstream, instance string, timeout time.Duration) (uint64, map[string]identity, error) {
	type answer struct {
		id  identity
		err error
	}
	answers := make([]answer, len(us))
	var wg sync.WaitGroup
	for i, u := range us {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i].id, answers[i].err = identify(ctx, u, timeout)
		}()
	}
	wg.Wait()
	ids := map[string]identity{}
	var errs []error
	var cluster uint64
	var first string
	for i, u := range us {
		id, err := answers[i].id, answers[i].err
		if errors.Is(err, ErrUpstream) {
			return 0, nil, err
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if cluster != 0 && id.cluster != cluster {
			return 0, nil, fmt.Errorf("%w: %s is in cluster %x, %s in cluster %x: every --upstream must be of the same cluster",
				ErrUpstream, u.url, id.cluster, first, cluster)
		}
		for _, c := range id.chain {
			if c == instance {
				return 0, nil, fmt.Errorf("%w: %s copies from this replica (its chain of upstreams, %s, holds it): a cycle", ErrUpstream, u.url, strings.Join(id.chain, " ← "))
			}
		}
		cluster, first = id.cluster, u.url
		ids[u.url] = id
	}
	if len(ids) == 0 {
		return 0, nil, errors.Join(errs...)
	}
	return cluster, ids, nil
}

// snapshotSource is the upstream to take the snapshot from: the first
// that answered and is not the leader, the leader only if no other will
// do; and of those, the first that answers a linearizable read within
// timeout (live: one with no leader, or of a history the source left, as
// a learner replica not yet rejoined after a restore, answers none).
func snapshotSource(ctx context.Context, us []*upstream, ids map[string]identity, timeout time.Duration) (*upstream, error) {
	var order []*upstream
	for _, u := range us {
		if id, ok := ids[u.url]; ok && !id.leader {
			order = append(order, u)
		}
	}
	for _, u := range us {
		if id, ok := ids[u.url]; ok && id.leader {
			order = append(order, u)
		}
	}
	var errs []error
	for _, u := range order {
		rctx, cancel := context.WithTimeout(ctx, timeout)
		_, err := u.cli.Get(rctx, probeKey, clientv3.WithCountOnly())
		cancel()
		if err == nil {
			return u, nil
		}
		errs = append(errs, fmt.Errorf("--upstream %s: no linearizable read within %v: %w", u.url, timeout, err))
	}
	if len(errs) == 0 {
		return nil, errors.New("cascade: no --upstream answered")
	}
	return nil, fmt.Errorf("cascade: no --upstream to take a snapshot from: %w", errors.Join(errs...))
}

// background marks a request to an upstream as this replica's upkeep, no
// client's demand (wire.BackgroundKey).
func background(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, wire.BackgroundKey, "1")
}
