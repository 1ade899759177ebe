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
//     index. Linearizable. The leader's cost is per round, not per read:
//     rounds are at least ReadBatchInterval apart, and a round is held up to
//     ReadBatchMaxWait for the readers coming back (readindex's batchPolicy), so a
//     closed-loop client population shares one round per cycle.
//   - weak (serializable=true, no bound): the local store as it is.
//   - bounded (serializable=true with a bound, from the request's
//     "understudy-max-staleness" metadata or the replica's --max-staleness):
//     local if the replica is known fresh within the bound (readindex.Freshness),
//     else after a fresh ReadIndex round, or an Unavailable error at the
//     request's deadline. Never older than the bound.
//
// Every read, watch and forwarded write tells, in its response header, the
// mode that served it, the staleness the replica can prove, whether it
// knows a leader and its store's revision (wire.ReadModeKey and the rest;
// see answer.go).
//
// With no leader (a majority of voters down, or the replica cut off), weak
// reads and watches are still served from the store, strong and bounded
// reads fail at their deadline, and requests that would be raft proposals
// are refused at once (see proposes): nothing is forwarded that could be
// applied after the client's deadline. All of it recovers by itself when a
// leader is heard from again.
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
	"net/http"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/pkg/v3/debugutil"
	"go.etcd.io/etcd/server/v3/etcdserver"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/understudy-kv/understudy/readindex"
)

// Config configures a Front.
type Config struct {
	// Source is what the front serves (see Source).
	Source Source
	// Logger is required.
	Logger *zap.Logger
	// Registerer receives the metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// Clock drives freshness; nil means the real clock.
	Clock clockwork.Clock
	// MaxStaleness bounds serializable reads that carry no bound; 0 serves
	// them locally as they are.
	MaxStaleness time.Duration
	// MaxRequestBytes is the largest request the front takes (etcd's
	// --max-request-bytes; gRPC's overhead is allowed on top, as etcd
	// does); 0 takes what the served member does. A cascaded replica's
	// store takes larger ones, the source's revisions. (--max-txn-ops and
	// --max-concurrent-streams are the served member's: a cascaded
	// replica's store is given the replica's.)
	MaxRequestBytes uint
	// ReadIndex are the ReadIndex machinery's settings (freshness rounds,
	// their batching, rounds through hubs), validated by readindex.
	ReadIndex readindex.Settings
	// TLS, if set, serves the front over TLS.
	TLS *tls.Config
	// Zone, if set, is told to balancers that probe the replica (see
	// wire.ZoneKey), for zone-affine reads.
	Zone string
	// AnswerHeaders says when answers carry the answer headers (see
	// answer.go): wire.HeadersOnRequest (also ""), wire.HeadersAlways or
	// wire.HeadersOff.
	AnswerHeaders string
	// EnablePprof serves Go's runtime profiles under /debug/pprof/ on
	// the client URLs, as etcd's --enable-pprof (and its debug log level)
	// does on a voter's.
	EnablePprof bool
	// RoleState, if set, tells the role loop's state ("waiting: hold 3.1s
	// of 5s"), sent with the freshness in answer to probes (wire.RoleStateKey).
	RoleState func() string
	// Compaction, if set, tells the auto-compaction the replica would run
	// as leader, sent in answer to probes (wire.CompactionKey).
	Compaction func() string
	// Ready says when /readyz admits the replica.
	Ready ReadyConfig
	// KeepAlive is the gRPC server keepalive policy (etcd's
	// --grpc-keepalive-min-time, -interval and -timeout).
	KeepAlive KeepAlive
	// ViaClient and ViaToken make and authenticate the requests to
	// --read-index-via hubs (readindex.Config).
	ViaClient *http.Client
	ViaToken  func(ctx context.Context) (string, error)
}

// KeepAlive is etcd's gRPC keepalive settings.
type KeepAlive struct {
	MinTime, Interval, Timeout time.Duration
}

// Validate reports every missing or bad field.
func (c Config) Validate() error {
	var problems []error
	if c.Source == nil {
		problems = append(problems, errors.New("readpath: Config.Source is nil"))
	}
	if c.Logger == nil {
		problems = append(problems, errors.New("readpath: Config.Logger is nil"))
	}
	if c.MaxStaleness < 0 {
		problems = append(problems, fmt.Errorf("readpath: MaxStaleness %v: must be 0 or more", c.MaxStaleness))
	}
	if c.Ready.MaxStaleness <= 0 {
		problems = append(problems, fmt.Errorf("readpath: Ready.MaxStaleness %v: must be more than 0", c.Ready.MaxStaleness))
	}
	if c.KeepAlive.MinTime <= 0 || c.KeepAlive.Interval <= 0 || c.KeepAlive.Timeout <= 0 {
		problems = append(problems, fmt.Errorf("readpath: KeepAlive %+v: every duration must be more than 0", c.KeepAlive))
	}
	return errors.Join(problems...)
}

// Front is the replica's client-facing server: etcd's gRPC services and,
// on the same listeners, the HTTP a voter's client URL serves.
type Front struct {
	lg         *zap.Logger
	s          *etcdserver.EtcdServer
	tls        *tls.Config
	grpc       *grpc.Server
	ri         *readindex.Tracker
	fresh      *readindex.Freshness
	contact    *readindex.LeaderContact
	m          *Metrics
	svc        Services
	gw         *gateway
	clientMux  http.Handler
	metricsMux http.Handler

	lw *leaderWatch
	// runCtx ends at Stop: Run's loops end with it, and the goroutines
	// the source's services started (closing svc.Done).
	runCtx context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu struct {
		sync.Mutex
		stopped bool
		closers []func()
	}
}

// New builds the front; Run runs its loops and Serve its listeners; Stop
// ends them all.
func New(cfg Config) (*Front, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	s := cfg.Source.Server()
	f := &Front{lg: cfg.Logger, s: s, tls: cfg.TLS}
	election := time.Duration(s.Cfg.TickMs) * time.Duration(s.Cfg.ElectionTicks) * time.Millisecond
	if err := f.newFreshness(cfg, election); err != nil {
		return nil, err
	}
	f.lw = newLeaderWatch(f.contact, cfg.Clock, election)
	f.runCtx, f.cancel = context.WithCancel(context.Background())
	if err := f.newGRPC(cfg, f.lw); err != nil {
		f.cancel()
		return nil, err
	}
	if err := f.newHTTP(f.runCtx, cfg, election); err != nil {
		f.cancel()
		f.closeServices()
		return nil, err
	}
	return f, nil
}

// closeServices waits for the goroutines the source's services started
// (runCtx has ended) and closes them.
func (f *Front) closeServices() {
	for _, done := range f.svc.Done {
		<-done
	}
	if f.svc.Close != nil {
		f.svc.Close()
	}
}

// newFreshness builds the ReadIndex machinery (package readindex) on the
// member, with leader contact from its raft transport's received bytes, and
// the front's metrics.
func (f *Front) newFreshness(cfg Config, election time.Duration) error {
	s := cfg.Source.Server()
	ri, err := readindex.New(readindex.Config{
		Settings:     cfg.ReadIndex,
		Logger:       cfg.Logger,
		Registerer:   cfg.Registerer,
		Clock:        cfg.Clock,
		RoundTimeout: s.Cfg.ReqTimeout(),
		Election:     election,
		ViaClient:    cfg.ViaClient,
		ViaToken:     cfg.ViaToken,
	}, cfg.Source.Rounds())
	if err != nil {
		return err
	}
	f.ri, f.fresh, f.contact = ri, ri.Freshness(), ri.Contact()
	f.m = NewMetrics(cfg.Registerer)
	return nil
}

// newHTTP builds what the client URL serves over HTTP (the JSON gateway,
// health, readiness, the read index for hubs) and the metrics URL's mux.
func (f *Front) newHTTP(ctx context.Context, cfg Config, election time.Duration) error {
	s := cfg.Source.Server()
	gw, err := newGateway(ctx, f.grpc)
	if err != nil {
		return err
	}
	f.gw = gw
	ready := &readiness{cfg: cfg.Ready, clock: cfg.Clock, election: election, contact: f.contact, fresh: f.fresh,
		applied: cfg.Source.Progress, extra: f.svc.Ready, proves: f.svc.ProvesFreshness}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(ready.gauge()); err != nil {
			return fmt.Errorf("readpath: understudy_replica_ready: %w", err)
		}
	}
	mux := clientMux(cfg.Logger, s, gw, ready)
	if cfg.EnablePprof {
		for p, h := range debugutil.PProfHandlers() {
			mux.Handle(p, h)
		}
		cfg.Logger.Info("pprof is enabled", zap.String("path", debugutil.HTTPPrefixPProf))
	}
	f.clientMux, f.metricsMux = mux, metricsMux(cfg.Logger, s, ready)
	if !f.svc.ServesHubs {
		// No raft index to answer with (a replica fed by this one asks it
		// for a linearizable revision instead).
		return nil
	}
	mux.Handle(readindex.Path, readIndexHandler(f.fresh, func(nonce string) readindex.Answer {
		// AppliedIndex, not etcd's: after a snapshot and before the next
		// entry, etcd's trails the state by the snapshot, and an asker
		// behind the same snapshot would serve its old state as current.
		return readindex.NewAnswer(uint64(s.Cluster().ID()), uint64(s.MemberID()), s.Term(), AppliedIndex(s), nonce)
	}, authorizeRead(s), s.Cfg.ReqTimeout()))
	return nil
}

// Run runs the front's loops until ctx ends or Stop: the ReadIndex
// machinery's (freshness rounds, leader-contact samples), the leader watch
// and the in-memory gRPC server the JSON gateway dials. Strong and bounded
// reads, the gateway and /readyz wait on them: run it beside Serve. It
// returns nil once they have stopped.
func (f *Front) Run(ctx context.Context) error {
	f.mu.Lock()
	if f.mu.stopped {
		f.mu.Unlock()
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(f.runCtx, cancel)
	defer stop()
	f.wg.Add(3)
	f.mu.Unlock()
	go func() {
		defer f.wg.Done()
		f.ri.Run(ctx)
	}()
	go func() {
		defer f.wg.Done()
		f.lw.run(ctx)
	}()
	go func() {
		defer f.wg.Done()
		f.gw.serve(f.grpc) // ends when Stop stops the gRPC server
	}()
	<-ctx.Done()
	return nil
}

// Freshness is the front's freshness tracker.
func (f *Front) Freshness() *readindex.Freshness { return f.fresh }

// RoundTime is how long the replica's own ReadIndex rounds take lately: its
// round trip to the leader.
func (f *Front) RoundTime() time.Duration { return f.ri.RoundTime() }

// Contact is the front's leader-contact tracker.
func (f *Front) Contact() *readindex.LeaderContact { return f.contact }

// LastLeaderContact is when the replica last heard from its leader (by raft
// traffic or a completed ReadIndex round); zero with no leader known.
func (f *Front) LastLeaderContact() time.Time {
	leader, at := f.contact.Last()
	if leader == 0 {
		return time.Time{}
	}
	return at
}

// Stop closes every listener, connection and stream, then stops the loops.
func (f *Front) Stop() {
	f.mu.Lock()
	f.mu.stopped = true
	closers := f.mu.closers
	f.mu.closers = nil
	f.mu.Unlock()
	for _, c := range closers {
		c()
	}
	f.grpc.Stop()
	f.gw.close()
	f.cancel()
	f.wg.Wait()
	f.closeServices()
}

// watchServer is etcd's watch service on the replica's own mvcc store,
// counted.
type watchServer struct {
	pb.UnsafeWatchServer
	etcd   pb.WatchServer
	m      *Metrics
	answer *answerHeader
	// wrap, if set, wraps each stream (the source's check of each watch).
	wrap func(pb.Watch_WatchServer) pb.Watch_WatchServer
}

var _ pb.WatchServer = (*watchServer)(nil)

// Watch serves from the local store as it is: a weak read, whose header
// is sent when the stream opens, before its first response.
func (w *watchServer) Watch(stream pb.Watch_WatchServer) error {
	w.m.watchers.Inc()
	defer w.m.watchers.Dec()
	if ans := w.answer.begin(stream.Context(), modeWeak); ans.h != nil {
		_ = stream.SendHeader(ans.header(0)) // fails only if the stream is gone
	}
	if w.wrap != nil {
		stream = w.wrap(stream)
	}
	return shardedWatch(w.etcd, stream)
}
