package cascade

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
	// ErrBehind means no upstream still has the revisions the replica
	// needs (compacted past them): it bootstraps again.
	ErrBehind = errors.New("cascade: the upstream compacted past the revision this replica needs")
	// ErrAuth refuses a source cluster with auth enabled to a replica
	// without a user of the root role: it copies the whole keyspace (a
	// snapshot, a watch of every key) and the users and roles.
	ErrAuth = errors.New("cascade: the source cluster has auth enabled: a cascaded replica needs --user (and --password) of a user with the root role, to copy its snapshot, every key's changes and its users and roles")
)

// upstream is one --upstream URL and its client.
type upstream struct {
	url string
	cli *clientv3.Client
}

// identity is what an upstream says of itself.
type identity struct {
	cluster uint64 // the source cluster's ID
	leader  bool   // it is the source's leader
	leadID  uint64 // the source's leader, as it says
	rev     int64  // its store's revision
	chain   []string
}

// statusTimeout bounds one upstream's Status.
const statusTimeout = 5 * time.Second

// identify asks u's Status, as a probe (a replica then tells its chain of
// upstreams, wire.UpstreamChainKey).
func identify(ctx context.Context, u upstream) (identity, error) {
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(ctx, wire.ProbeKey, "1"), statusTimeout)
	defer cancel()
	var hdr metadata.MD
	st, err := pb.NewMaintenanceClient(u.cli.ActiveConnection()).Status(ctx, &pb.StatusRequest{}, grpc.Header(&hdr))
	if err != nil {
		return identity{}, fmt.Errorf("--upstream %s: not an etcd client URL that answers Status: %w", u.url, err)
	}
	id := identity{cluster: st.Header.ClusterId, leader: st.Leader != 0 && st.Leader == st.Header.MemberId, leadID: st.Leader, rev: st.Header.Revision}
	if v := hdr.Get(wire.UpstreamChainKey); len(v) > 0 {
		id.chain = strings.Split(v[0], ",")
	}
	return id, nil
}

// checkUpstreams refuses upstreams of different clusters, and one whose
// chain of upstreams holds this replica (instance): a cycle. It returns
// the source cluster's ID and the identities, by upstream, of those that
// answered (an upstream down now may be used later, once checked).
func checkUpstreams(ctx context.Context, us []upstream, instance string) (uint64, map[string]identity, error) {
	ids := map[string]identity{}
	var errs []error
	var cluster uint64
	var first string
	for _, u := range us {
		id, err := identify(ctx, u)
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

// snapshotSource is the upstream to take the snapshot from: the first that
// answered and is not the leader; the leader only if nothing else answered.
func snapshotSource(us []upstream, ids map[string]identity) (upstream, bool) {
	var leader *upstream
	for i, u := range us {
		id, ok := ids[u.url]
		switch {
		case !ok:
		case !id.leader:
			return u, true
		case leader == nil:
			leader = &us[i]
		}
	}
	if leader != nil {
		return *leader, true
	}
	return upstream{}, false
}

// background marks a request to an upstream as this replica's upkeep, no
// client's demand (wire.BackgroundKey).
func background(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, wire.BackgroundKey, "1")
}
