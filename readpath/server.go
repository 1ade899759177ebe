// Package readpath is a replica's front: an etcd v3 gRPC server that serves
// reads and watches from the replica's own store and hands writes, leases and
// membership changes to etcd's own handlers, whose raft proposals a learner
// forwards to the leader.
//
// Reads come in three modes, chosen per request:
//
//   - strong (etcd's default, serializable=false): a ReadIndex round through
//     the leader that started after the read arrived, shared with every read
//     waiting for one, then a local read once the replica has applied that
//     index. Linearizable. Rounds are at least ReadBatchInterval apart, so
//     the leader's cost is per round, not per read.
//   - weak (serializable=true, no bound): the local store as it is.
//   - bounded (serializable=true with a bound, from the request's
//     "understudy-max-staleness" metadata or the replica's --max-staleness):
//     local if the replica is known fresh within the bound (see Freshness),
//     else after a fresh ReadIndex round, or an Unavailable error at the
//     request's deadline. Never older than the bound.
//
// etcd's own v3rpc server cannot be used as is: its interceptors refuse every
// request to a learner but Status and serializable Range. The handlers behind
// them work on a learner, so this package registers them on its own server,
// with interceptors of its own.
package readpath

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3rpc"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
)

// Config configures a Front.
type Config struct {
	// Server is the replica's embedded etcd member (a learner).
	Server *etcdserver.EtcdServer
	// Logger is required.
	Logger *zap.Logger
	// Registerer receives the metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// Clock drives freshness; nil means the real clock.
	Clock clockwork.Clock
	// MaxStaleness bounds serializable reads that carry no bound; 0 serves
	// them locally as they are.
	MaxStaleness time.Duration
	// FreshnessInterval is the period of background ReadIndex rounds.
	FreshnessInterval time.Duration
	// ReadBatchInterval is the least time between two ReadIndex rounds:
	// strong and bounded reads arriving meanwhile share the next round.
	// Longer means less leader work per read and at most that much more
	// latency; 0 runs rounds back to back.
	ReadBatchInterval time.Duration
	// TLS, if set, serves the front over TLS.
	TLS *tls.Config
	// Zone, if set, is told to balancers that probe the replica (see
	// wire.ZoneKey), for zone-affine reads.
	Zone string
}

// Validate reports every missing or bad field.
func (c Config) Validate() error {
	var problems []error
	if c.Server == nil {
		problems = append(problems, errors.New("readpath: Config.Server is nil"))
	}
	if c.Logger == nil {
		problems = append(problems, errors.New("readpath: Config.Logger is nil"))
	}
	if c.MaxStaleness < 0 {
		problems = append(problems, fmt.Errorf("readpath: MaxStaleness %v: must be 0 or more", c.MaxStaleness))
	}
	if c.FreshnessInterval <= 0 {
		problems = append(problems, fmt.Errorf("readpath: FreshnessInterval %v: must be more than 0", c.FreshnessInterval))
	}
	if c.ReadBatchInterval < 0 || c.ReadBatchInterval > c.FreshnessInterval {
		problems = append(problems, fmt.Errorf("readpath: ReadBatchInterval %v: must be between 0 and FreshnessInterval (%v)", c.ReadBatchInterval, c.FreshnessInterval))
	}
	return errors.Join(problems...)
}

// Front is the replica's gRPC server.
type Front struct {
	lg    *zap.Logger
	grpc  *grpc.Server
	fresh *Freshness
	m     *Metrics

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New builds the front and starts its freshness loop; Stop ends both.
func New(cfg Config) (*Front, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	s := cfg.Server
	f := &Front{lg: cfg.Logger}
	var m *Metrics
	f.fresh = NewFreshness(cfg.Logger, cfg.Clock, cfg.FreshnessInterval, cfg.ReadBatchInterval, s.Cfg.ReqTimeout(), s.LinearizableReadNotify,
		func(d time.Duration, err error) { m.observeRound(d.Seconds(), err) })
	m = NewMetrics(cfg.Registerer, func() float64 { return min(f.fresh.Age().Seconds(), math.MaxInt32) })
	f.m = m

	lw := newLeaderWatch(s, f.fresh)
	opts := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(unaryInterceptor(lw, m, cfg.Zone, func() time.Duration { return f.fresh.Age() })),
		grpc.ChainStreamInterceptor(streamInterceptor(lw, m)),
		grpc.MaxRecvMsgSize(int(s.Cfg.MaxRequestBytesWithOverhead())),
		grpc.MaxSendMsgSize(math.MaxInt32),
		grpc.MaxConcurrentStreams(s.Cfg.MaxConcurrentStreams),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: embed.DefaultGRPCKeepAliveMinTime, PermitWithoutStream: false}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: embed.DefaultGRPCKeepAliveInterval, Timeout: embed.DefaultGRPCKeepAliveTimeout}),
	}
	if cfg.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg.TLS)))
	}
	f.grpc = grpc.NewServer(opts...)
	pb.RegisterKVServer(f.grpc, &kvServer{etcd: v3rpc.NewQuotaKVServer(s), fresh: f.fresh, maxStaleness: cfg.MaxStaleness, strongTimeout: s.Cfg.ReqTimeout(), m: m})
	pb.RegisterWatchServer(f.grpc, &watchServer{WatchServer: v3rpc.NewWatchServer(s), m: m})
	pb.RegisterLeaseServer(f.grpc, v3rpc.NewQuotaLeaseServer(s))
	pb.RegisterClusterServer(f.grpc, v3rpc.NewClusterServer(s))
	pb.RegisterAuthServer(f.grpc, v3rpc.NewAuthServer(s))
	pb.RegisterMaintenanceServer(f.grpc, newMaintenanceServer(s))
	healthpb.RegisterHealthServer(f.grpc, health.NewServer())

	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	f.wg.Add(2)
	go func() {
		defer f.wg.Done()
		f.fresh.Run(ctx)
	}()
	go func() {
		defer f.wg.Done()
		lw.run(ctx)
	}()
	return f, nil
}

// Freshness is the front's freshness tracker.
func (f *Front) Freshness() *Freshness { return f.fresh }

// Serve serves gRPC on l until Stop; it returns nil after Stop.
func (f *Front) Serve(l net.Listener) error {
	if err := f.grpc.Serve(l); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("readpath: serve %s: %w", l.Addr(), err)
	}
	return nil
}

// Stop closes every connection and stream, then stops the freshness loop.
func (f *Front) Stop() {
	f.grpc.Stop()
	f.cancel()
	f.wg.Wait()
}

// watchServer is etcd's watch service on the replica's own mvcc store,
// counted.
type watchServer struct {
	pb.WatchServer
	m *Metrics
}

func (w *watchServer) Watch(stream pb.Watch_WatchServer) error {
	w.m.watchers.Inc()
	defer w.m.watchers.Dec()
	return w.WatchServer.Watch(stream)
}
