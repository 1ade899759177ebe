package readpath

import (
	"context"
	"math"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	etcdconfig "go.etcd.io/etcd/server/v3/config"
	"go.etcd.io/etcd/server/v3/etcdserver"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3election/v3electionpb"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3lock/v3lockpb"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3rpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	"github.com/understudy-kv/understudy/wire"
)

// The front's gRPC server: the read path's KV and Watch, and its source's
// other services, behind the source's interceptors and the front's.

// streamWorkers is how many goroutines serve gRPC streams, each kept for
// the next stream: a goroutine per stream (grpc's default, and etcd's)
// grows its stack again on every request down etcd's read path, which
// cost a replica 18 % of its CPU under weak reads (runtime.copystack in a
// profile; 5.6 % with the workers). A stream that finds every worker busy
// (long-lived watches hold theirs) gets a goroutine of its own, as
// without them.
const streamWorkers = 128

// maxRecvBytes is the largest message the front takes: MaxRequestBytes (or
// the served member's) and the overhead etcd allows for gRPC.
func (c Config) maxRecvBytes(s *etcdserver.EtcdServer) int {
	if c.MaxRequestBytes == 0 {
		return int(s.Cfg.MaxRequestBytesWithOverhead())
	}
	limits := etcdconfig.ServerConfig{MaxRequestBytes: c.MaxRequestBytes}
	return int(limits.MaxRequestBytesWithOverhead())
}

// newGRPC builds the gRPC server: the read path's KV and Watch on the
// source's store, and the source's other services (a learner's: etcd's
// own, as embed serves them on a voter), behind the source's interceptors
// and the front's.
func (f *Front) newGRPC(cfg Config, lw *leaderWatch) error {
	s, m := cfg.Source.Server(), f.m
	var answer *answerHeader
	if cfg.AnswerHeaders != wire.HeadersOff {
		answer = &answerHeader{always: cfg.AnswerHeaders == wire.HeadersAlways, age: f.fresh.Age, hasLeader: lw.hasLeader, rev: func() int64 { return s.KV().Rev() }}
	}
	kv := &kvServer{clock: cfg.Clock, fresh: f.fresh, maxStaleness: cfg.MaxStaleness, reqTimeout: s.Cfg.ReqTimeout(), m: m, answer: answer}
	svc, err := cfg.Source.Services(Host{Ctx: f.runCtx, Logger: cfg.Logger, Clock: cfg.Clock,
		ReadMode: func(ctx context.Context, bounded bool) error { _, err := kv.readMode(ctx, bounded); return err }})
	if err != nil {
		return err
	}
	f.svc = svc
	kv.etcd = svc.KV
	probe := probeAnswer{name: s.Cfg.Name, zone: cfg.Zone, roleState: cfg.RoleState, compaction: cfg.Compaction, freshness: f.fresh.Age,
		contact: func() (time.Duration, bool) {
			leader, at := f.contact.Last()
			return cfg.Clock.Since(at), leader != 0 && !at.IsZero()
		},
		chain: svc.Chain}
	unary := append(append([]grpc.UnaryServerInterceptor{}, svc.Unary...), unaryInterceptor(lw, m, probe, f.fresh.Touch))
	stream := append(append([]grpc.StreamServerInterceptor{}, svc.Stream...), streamInterceptor(lw, m, f.fresh.Touch))
	opts := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
		grpc.MaxRecvMsgSize(cfg.maxRecvBytes(s)),
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
	pb.RegisterKVServer(f.grpc, kv)
	pb.RegisterWatchServer(f.grpc, &watchServer{etcd: v3rpc.NewWatchServer(s), m: m, answer: answer, wrap: svc.WatchStream})
	healthpb.RegisterHealthServer(f.grpc, health.NewServer())
	pb.RegisterLeaseServer(f.grpc, svc.Lease)
	pb.RegisterClusterServer(f.grpc, svc.Cluster)
	pb.RegisterAuthServer(f.grpc, svc.Auth)
	pb.RegisterMaintenanceServer(f.grpc, svc.Maintenance)
	v3lockpb.RegisterLockServer(f.grpc, svc.Lock)
	v3electionpb.RegisterElectionServer(f.grpc, svc.Election)
	return nil
}
