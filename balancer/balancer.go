package balancer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Balancer owns a balanced client and the loop that keeps its view of the
// cluster current.
type Balancer struct {
	cfg   Config
	lg    *zap.Logger
	clock clockwork.Clock // cfg.Clock
	m     *metrics
	view  *view
	id    string

	ctl *clientv3.Client // discovery, over every known member
	cli *clientv3.Client // the balanced client handed to callers

	term atomic.Uint64 // the raft term of the leader writes go to
	// replicaEPs are the replicas' endpoints, for the interceptor's
	// look at whether any fits a read's staleness budget.
	replicaEPs atomic.Pointer[[]*endpoint]
	kick       chan struct{}
	// budgets are the staleness budgets reads used lately; probeNow asks
	// the loop for a probe at once (a budget not remembered came).
	budgets  budgets
	probeNow chan struct{}
	cancel   context.CancelFunc
	done     chan struct{}

	// Owned by the loop (and by New before the loop starts).
	conns         map[string]*grpc.ClientConn // one per member, for Status and probes
	published     uint64                      // view version last handed to the clients
	lastAnnounced []announced                 // the replicas announced, as announcements last said

	ann *announcements // nil with IgnoreAnnounced
}

// New discovers the cluster from cfg.Endpoints and returns a Balancer whose
// Client routes as the package doc says. The cluster need not be reachable
// yet: until discovery succeeds, calls go to the seeds.
func New(cfg Config) (*Balancer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	b := &Balancer{
		cfg:      cfg,
		lg:       cfg.Logger,
		clock:    cfg.Clock,
		m:        newMetrics(cfg.Registerer),
		view:     newView(),
		kick:     make(chan struct{}, 1),
		probeNow: make(chan struct{}, 1),
		done:     make(chan struct{}),
		conns:    map[string]*grpc.ClientConn{},
	}
	ctlCfg := cfg.Client
	ctlCfg.Endpoints = slices.Clone(cfg.Endpoints)
	ctlCfg.AutoSyncInterval = 0
	if ctlCfg.Logger == nil {
		ctlCfg.Logger = cfg.Logger
	}
	var err error
	if b.ctl, err = clientv3.New(ctlCfg); err != nil {
		return nil, fmt.Errorf("balancer: discovery client: %w", err)
	}
	b.id = register(b)

	// A first look, so that the first calls already go where they should.
	ctx, cancel := context.WithCancel(context.Background())
	first := 5 * time.Second
	if cfg.Client.DialTimeout > 0 {
		first = cfg.Client.DialTimeout
	}
	fctx, fcancel := context.WithTimeout(ctx, first)
	if !cfg.IgnoreAnnounced {
		b.ann = newAnnouncements(b)
		go b.ann.run(ctx)
		select {
		case b.lastAnnounced = <-b.ann.changes:
		case <-fctx.Done():
		}
	}
	if err := b.refresh(fctx); err != nil {
		b.lg.Warn("balancer: cannot discover the cluster yet; calls go to the seeds until it can", zap.Strings("endpoints", cfg.Endpoints), zap.Error(err))
	}
	b.probe(fctx)
	fcancel()

	cliCfg := cfg.Client
	cliCfg.Endpoints = b.view.urls()
	if len(cliCfg.Endpoints) == 0 {
		cliCfg.Endpoints = slices.Clone(cfg.Endpoints)
	}
	cliCfg.AutoSyncInterval = 0 // the loop keeps the endpoints
	if cliCfg.Logger == nil {
		cliCfg.Logger = cfg.Logger
	}
	cliCfg.DialOptions = append(slices.Clone(cfg.Client.DialOptions),
		// The client's resolver asks for round_robin; ours decides instead.
		grpc.WithDisableServiceConfig(),
		grpc.WithDefaultServiceConfig(serviceConfig(b.id)),
		grpc.WithChainUnaryInterceptor(b.unaryInterceptor),
		grpc.WithChainStreamInterceptor(streamInterceptor),
	)
	if b.cli, err = clientv3.New(cliCfg); err != nil {
		cancel()
		b.waitAnnouncements()
		b.closeConns()
		b.ctl.Close()
		unregister(b.id)
		return nil, fmt.Errorf("balancer: client: %w", err)
	}
	_, b.published = b.view.versionNow()
	b.cancel = cancel
	go b.run(ctx)
	return b, nil
}

// Client is the balanced client. It stays valid until Close; do not close
// it yourself.
func (b *Balancer) Client() *clientv3.Client { return b.cli }

// Leader is the client URL that writes go to now; "" if unknown.
func (b *Balancer) Leader() string {
	leader, members := b.view.snapshot()
	if m, ok := members[leader]; ok {
		return m.ep.url
	}
	return ""
}

// Close stops the loop and closes the clients.
func (b *Balancer) Close() error {
	b.cancel()
	<-b.done
	b.waitAnnouncements()
	err := errors.Join(b.cli.Close(), b.ctl.Close())
	b.closeConns()
	unregister(b.id)
	return err
}

// waitAnnouncements waits, once the Balancer's context ended, for the
// announcements to stop following.
func (b *Balancer) waitAnnouncements() {
	if b.ann != nil {
		<-b.ann.done
	}
}

// run is the Balancer's only loop: it refreshes the view every
// RefreshInterval (or when a write saw its endpoint fail, or the announced
// replicas changed) and probes the
// replicas every ProbeInterval.
func (b *Balancer) run(ctx context.Context) {
	defer close(b.done)
	refresh := b.clock.NewTicker(b.cfg.RefreshInterval)
	defer refresh.Stop()
	probe := b.clock.NewTicker(b.cfg.ProbeInterval)
	defer probe.Stop()
	var changes chan []announced // nil with IgnoreAnnounced: never ready
	if b.ann != nil {
		changes = b.ann.changes
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-refresh.Chan():
			b.refreshFor(ctx)
		case <-b.kick:
			b.refreshFor(ctx)
		case b.lastAnnounced = <-changes:
			b.refreshFor(ctx)
		case <-probe.Chan():
			b.probe(ctx)
		case <-b.probeNow:
			b.probe(ctx)
		}
		b.publish()
	}
}

// refreshFor is one refresh of the loop, within ProbeTimeout: a failure is
// only logged (at debug, unless the loop is stopping), since the view keeps
// what it knew and the next tick or kick tries again.
func (b *Balancer) refreshFor(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, b.cfg.ProbeTimeout)
	defer cancel()
	if err := b.refresh(rctx); err != nil && ctx.Err() == nil {
		b.lg.Debug("balancer: refresh failed", zap.Error(err))
	}
}

// publish hands a changed view to both clients: the balanced client's
// gRPC balancer then rebuilds its connections and picker.
func (b *Balancer) publish() {
	urls, version := b.view.versionNow()
	if version == b.published || len(urls) == 0 {
		return
	}
	b.published = version
	b.cli.SetEndpoints(urls...)
	b.ctl.SetEndpoints(urls...)
}

// refresh looks up the members, and the leader from every voter: the
// answer with the highest term wins, so a deposed leader that has not yet
// heard of its successor is outvoted.
func (b *Balancer) refresh(ctx context.Context) error {
	resp, err := b.ctl.MemberList(ctx)
	if err != nil {
		return fmt.Errorf("member list: %w", err)
	}
	var ms []member
	var urls []string
	for _, m := range resp.Members {
		if len(m.ClientURLs) == 0 {
			continue // not started yet: clients cannot reach it
		}
		ms = append(ms, member{id: m.ID, name: m.Name, learner: m.IsLearner})
		urls = append(urls, m.ClientURLs[0])
	}
	// Cascaded replicas, which are no members, announce themselves.
	for _, a := range b.lastAnnounced {
		if !slices.Contains(urls, a.url) {
			ms = append(ms, member{name: a.name, learner: true})
			urls = append(urls, a.url)
		}
	}
	b.view.setMembers(ms, urls)
	b.pruneConns(urls)
	var eps []*endpoint
	for _, m := range b.view.learners() {
		eps = append(eps, m.ep)
	}
	b.replicaEPs.Store(&eps)

	var (
		mu   sync.Mutex
		best *pb.StatusResponse
		wg   sync.WaitGroup
	)
	for i, m := range ms {
		if m.learner {
			continue
		}
		conn, err := b.conn(urls[i])
		if err != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := pb.NewMaintenanceClient(conn).Status(ctx, &pb.StatusRequest{})
			if err != nil || st.Leader == 0 {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if best == nil || st.RaftTerm > best.RaftTerm {
				best = st
			}
		}()
	}
	wg.Wait()
	if best == nil {
		return errors.New("no voter knows a leader")
	}
	addr, ok := b.view.byID(best.Leader)
	if !ok {
		return fmt.Errorf("leader %x is not among the members with client URLs", best.Leader)
	}
	b.term.Store(best.RaftTerm)
	if b.view.setLeader(addr) {
		b.lg.Info("balancer: writes go to the leader", zap.String("leader", addr), zap.Uint64("term", best.RaftTerm))
		b.m.leaderSeen.WithLabelValues(addr).Inc()
	}
	return nil
}

// finished is told the outcome of every call.
func (b *Balancer) finished(r route, ep *endpoint, err error) {
	b.m.requests.WithLabelValues(r.String(), ep.url).Inc()
	switch {
	case isLearnerRefusal(err):
		b.eject(ep, "learner-refusal", err)
	case r == routeWrite && status.Code(err) == codes.Unavailable:
		// The leader may have gone: look again now, not at the next tick.
		b.lookNow()
	}
}

// lookNow asks the loop to refresh the view now.
func (b *Balancer) lookNow() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// conn returns the loop's own connection to one member.
func (b *Balancer) conn(url string) (*grpc.ClientConn, error) {
	if c, ok := b.conns[url]; ok {
		return c, nil
	}
	c, err := b.ctl.Dial(url)
	if err != nil {
		return nil, err
	}
	b.conns[url] = c
	return c, nil
}

// pruneConns closes the loop's connections to members not in keep (the
// client URLs of the current members), so that a removed member's
// connection does not linger.
func (b *Balancer) pruneConns(keep []string) {
	for url, c := range b.conns {
		if !slices.Contains(keep, url) {
			c.Close()
			delete(b.conns, url)
		}
	}
}

// closeConns closes every connection of the loop, once it has stopped (or
// New gives up).
func (b *Balancer) closeConns() { b.pruneConns(nil) }
