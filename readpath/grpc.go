package readpath

import (
	"context"
	"errors"
	"math"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3election"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3election/v3electionpb"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3lock"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3lock/v3lockpb"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3rpc"
	"go.etcd.io/etcd/server/v3/proxy/grpcproxy"
	"go.etcd.io/etcd/server/v3/storage/mvcc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	"github.com/understudy-kv/understudy/wire"
)

// The front's gRPC server: etcd's services, behind the read path's
// interceptors, for a learner's store or a cascaded replica's.

// streamWorkers is how many goroutines serve gRPC streams, each kept for
// the next stream: a goroutine per stream (grpc's default, and etcd's)
// grows its stack again on every request down etcd's read path, which
// cost a replica 18 % of its CPU under weak reads (runtime.copystack in a
// profile; 5.6 % with the workers). A stream that finds every worker busy
// (long-lived watches hold theirs) gets a goroutine of its own, as
// without them.
const streamWorkers = 128

// newGRPC builds the gRPC server: etcd's services, the read path's in
// front of KV and Watch, and etcd's lock and election services over an
// in-process client of the member, as embed serves them on a voter.
func (f *Front) newGRPC(cfg Config, lw *leaderWatch) {
	s, m := cfg.Server, f.m
	probe := probeAnswer{name: s.Cfg.Name, zone: cfg.Zone, roleState: cfg.RoleState, compaction: cfg.Compaction, freshness: f.fresh.Age,
		contact: func() (time.Duration, bool) {
			leader, at := f.contact.Last()
			return cfg.Clock.Since(at), leader != 0 && !at.IsZero()
		},
		chain: func() []string { return []string{s.MemberID().String()} }}
	unary := []grpc.UnaryServerInterceptor{unaryInterceptor(lw, m, probe, f.fresh.Touch)}
	stream := []grpc.StreamServerInterceptor{streamInterceptor(lw, m, f.fresh.Touch)}
	if c := cfg.Cascade; c != nil {
		probe.chain = c.Chain
		unary = []grpc.UnaryServerInterceptor{clusterHeaderUnary(c.Cluster), fenceUnary(c), unaryInterceptor(lw, m, probe, f.fresh.Touch)}
		stream = append([]grpc.StreamServerInterceptor{clusterHeaderStream(c.Cluster), fenceStream(c)}, stream...)
	}
	opts := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
		grpc.MaxRecvMsgSize(int(s.Cfg.MaxRequestBytesWithOverhead())),
		grpc.MaxSendMsgSize(math.MaxInt32),
		grpc.MaxConcurrentStreams(s.Cfg.MaxConcurrentStreams),
		grpc.NumStreamWorkers(streamWorkers),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: cfg.KeepAlive.MinTime, PermitWithoutStream: false}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: cfg.KeepAlive.Interval, Timeout: cfg.KeepAlive.Timeout}),
	}
	// No grpc.Creds: TLS listeners are served through net/http (see
	// Serve), which does the handshake and tells gRPC the client's
	// certificate, as etcd's embed does when HTTP shares the port.
	f.grpc = grpc.NewServer(opts...)
	var answer *answerHeader
	if cfg.AnswerHeaders != wire.HeadersOff {
		answer = &answerHeader{always: cfg.AnswerHeaders == wire.HeadersAlways, age: f.fresh.Age, hasLeader: lw.hasLeader, rev: func() int64 { return s.KV().Rev() }}
	}
	kv := &kvServer{etcd: v3rpc.NewQuotaKVServer(s), clock: cfg.Clock, fresh: f.fresh, maxStaleness: cfg.MaxStaleness, reqTimeout: s.Cfg.ReqTimeout(), m: m, answer: answer}
	ws := &watchServer{etcd: v3rpc.NewWatchServer(s), m: m, answer: answer}
	pb.RegisterWatchServer(f.grpc, ws)
	healthpb.RegisterHealthServer(f.grpc, health.NewServer())
	f.v3c = v3client.New(s)
	if cfg.Cascade != nil {
		ws.permit, ws.rev = cfg.Cascade.Permit, func() int64 { return s.KV().Rev() }
		ws.ended = &endedTokens{clock: cfg.Clock, at: map[string]time.Time{}}
		f.registerCascade(cfg, kv)
		return
	}
	pb.RegisterKVServer(f.grpc, kv)
	pb.RegisterLeaseServer(f.grpc, v3rpc.NewQuotaLeaseServer(s))
	pb.RegisterClusterServer(f.grpc, v3rpc.NewClusterServer(s))
	pb.RegisterAuthServer(f.grpc, &authServer{AuthServer: v3rpc.NewAuthServer(s), kv: kv, srv: s})
	pb.RegisterMaintenanceServer(f.grpc, newMaintenanceServer(s))
	v3lockpb.RegisterLockServer(f.grpc, v3lock.NewLockServer(f.v3c))
	v3electionpb.RegisterElectionServer(f.grpc, v3election.NewElectionServer(f.v3c))
}

// registerCascade registers a cascaded replica's services: its reads and
// watches are the local store's, everything else the upstreams'
// (etcd's grpc-proxy's forwarding services, on the upstream client).
func (f *Front) registerCascade(cfg Config, kv *kvServer) {
	c, s := cfg.Cascade, cfg.Server
	kv.etcd = &forwardedKV{permit: c.Permit, local: v3rpc.NewKVServer(s), up: pb.NewKVClient(c.Upstream.ActiveConnection()), wait: c.WaitRevision,
		rev: func() int64 { return s.KV().Rev() }, check: c.CheckWrite,
		compact: func(ctx context.Context, rev int64) error {
			if err := c.WaitRevision(ctx, rev); err != nil {
				return err
			}
			_, err := s.Compact(ctx, &pb.CompactionRequest{Revision: rev})
			if errors.Is(err, mvcc.ErrCompacted) {
				err = nil // compacted here already, by the store's own follow
			}
			return err
		}}
	pb.RegisterKVServer(f.grpc, kv)
	// etcd's proxies run goroutines until runCtx ends (Stop waits for
	// them).
	lease, leaseDone := grpcproxy.NewLeaseProxy(f.runCtx, c.Upstream)
	pb.RegisterLeaseServer(f.grpc, lease)
	cluster, clusterDone := grpcproxy.NewClusterProxy(cfg.Logger, c.Upstream, "", "")
	pb.RegisterClusterServer(f.grpc, cluster)
	f.proxiesDone = append(f.proxiesDone, leaseDone, clusterDone)
	pb.RegisterAuthServer(f.grpc, &cascadeAuth{AuthServer: grpcproxy.NewAuthProxy(c.Upstream), up: pb.NewAuthClient(c.Upstream.ActiveConnection()), issueAt: c.IssueAt})
	pb.RegisterMaintenanceServer(f.grpc, &cascadeMaintenance{local: newMaintenanceServer(s), permit: c.Permit, up: pb.NewMaintenanceClient(c.Upstream.ActiveConnection()), leader: c.Leader, quota: c.Quota})
	v3lockpb.RegisterLockServer(f.grpc, grpcproxy.NewLockProxy(c.Upstream))
	v3electionpb.RegisterElectionServer(f.grpc, grpcproxy.NewElectionProxy(c.Upstream))
}
