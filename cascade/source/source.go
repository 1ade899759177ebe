// Package source is a cascaded replica's store as the front serves it (a
// readpath.Source): its reads and watches are the store's, checked against
// the copy of the source's auth (the store runs with auth off); its writes,
// leases, auth, member, lock and election calls go to the upstreams with
// the caller's own token (etcd's grpc-proxy's forwarding services, and
// forwardedKV); every answer names the source cluster; and no call is
// served once the store is fenced (another history, a divergence, a
// bootstrap again).
package source

import (
	"context"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/etcdserver"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3rpc"
	"go.etcd.io/etcd/server/v3/proxy/grpcproxy"
	"go.etcd.io/etcd/server/v3/storage/mvcc"
	"google.golang.org/grpc"

	"github.com/understudy-kv/understudy/cascade"
	"github.com/understudy-kv/understudy/readindex"
	"github.com/understudy-kv/understudy/readpath"
)

// Source is a cascaded replica's store as the front's source.
type Source struct{ st *cascade.Store }

var _ readpath.Source = Source{}

// New is st as the front's source.
func New(st *cascade.Store) Source { return Source{st: st} }

func (s Source) Server() *etcdserver.EtcdServer { return s.st.Server() }
func (s Source) Rounds() readindex.Source       { return s.st.Rounds() }

// Progress is the store's revision and the source's newest that an
// upstream reported.
func (s Source) Progress() (applied, committed uint64) {
	return uint64(s.st.Revision()), uint64(s.st.SourceRevision())
}

// Services: reads and watches from the store (checked: Permit), the rest
// forwarded to the upstreams.
func (s Source) Services(h readpath.Host) (readpath.Services, error) {
	st, srv := s.st, s.st.Server()
	up := st.Forwarder()
	permit := Permit(st.Permit)
	maxBytes, maxOps := st.ForwardLimits()
	kv := &forwardedKV{permit: permit, local: v3rpc.NewKVServer(srv), up: pb.NewKVClient(up.ActiveConnection()), wait: st.WaitRevision,
		limits: limits{maxBytes: maxBytes, maxOps: maxOps},
		rev:    func() int64 { return srv.KV().Rev() }, check: st.CheckWrite,
		compact: func(ctx context.Context, rev int64) error {
			if err := st.WaitRevision(ctx, rev); err != nil {
				return err
			}
			_, err := srv.Compact(ctx, &pb.CompactionRequest{Revision: rev})
			if err == mvcc.ErrCompacted {
				err = nil // compacted here already, by the store's own follow
			}
			return err
		}}
	// etcd's proxies run goroutines until h.Ctx ends (their done
	// channels say when they have).
	lease, leaseDone := grpcproxy.NewLeaseProxy(h.Ctx, up)
	cluster, clusterDone := grpcproxy.NewClusterProxy(h.Logger, up, "", "")
	ended := &endedTokens{clock: h.Clock, at: map[string]time.Time{}}
	return readpath.Services{
		KV: kv,
		WatchStream: func(w pb.Watch_WatchServer) pb.Watch_WatchServer {
			return &permittedWatch{Watch_WatchServer: w, permit: permit, rev: func() int64 { return srv.KV().Rev() }, ended: ended}
		},
		Lease:   lease,
		Cluster: cluster,
		Auth:    &cascadeAuth{AuthServer: grpcproxy.NewAuthProxy(up), up: pb.NewAuthClient(up.ActiveConnection()), issueAt: st.IssueAt},
		Maintenance: &cascadeMaintenance{local: readpath.NewMaintenanceServer(srv), permit: permit, up: pb.NewMaintenanceClient(up.ActiveConnection()),
			leader: st.SourceLeader, quota: st.SourceQuota},
		Lock:     grpcproxy.NewLockProxy(up),
		Election: grpcproxy.NewElectionProxy(up),
		Unary:    []grpc.UnaryServerInterceptor{clusterHeaderUnary(st.Cluster()), fenceUnary(st)},
		Stream:   []grpc.StreamServerInterceptor{clusterHeaderStream(st.Cluster()), fenceStream(st)},
		Chain:    st.Chain,
		// Its store follows an upstream's watch, and may be served.
		Ready: map[string]func() error{"upstream": st.Stalled},
		Done:  []<-chan struct{}{leaseDone, clusterDone},
	}, nil
}
