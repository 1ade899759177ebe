package replica

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/etcdserver"
	"go.uber.org/zap"

	"github.com/understudy-kv/understudy/config"
	"github.com/understudy-kv/understudy/conn"
	"github.com/understudy-kv/understudy/membership"
	"github.com/understudy-kv/understudy/promotion"
	"github.com/understudy-kv/understudy/readindex"
)

// roleInterval is how often the role loop observes the cluster.
const roleInterval = 200 * time.Millisecond

type roleMetrics struct {
	lag          prometheus.Gauge
	sinceLeader  prometheus.Gauge
	promotions   *prometheus.CounterVec
	removals     *prometheus.CounterVec
	wouldPromote prometheus.Gauge
	silent       prometheus.Gauge
	lockHeld     prometheus.Gauge
	steps        *prometheus.CounterVec
	viewReads    *prometheus.CounterVec
}

func newRoleMetrics(reg prometheus.Registerer) *roleMetrics {
	m := &roleMetrics{
		lag: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "understudy", Subsystem: "replica", Name: "lag_entries",
			Help: "Entries the replica's applied index trails the leader's commit index: from the role loop's last ReadIndex round (an upper bound) while a promotion or failover may come, else from the leader's raft view (at most a second old; see leader_view_reads_total)."}),
		sinceLeader: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "understudy", Subsystem: "replica", Name: "leader_contact_age_seconds",
			Help: "Time since the replica last heard from the leader."}),
		promotions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "understudy", Subsystem: "replica", Name: "promotions_total",
			Help: "Promotions of this replica to voter, by role and outcome."}, []string{"role", "outcome"}),
		removals: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "understudy", Subsystem: "replica", Name: "failover_removals_total",
			Help: "Removals of a dead voter by this replica during a failover, by outcome."}, []string{"outcome"}),
		wouldPromote: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "understudy", Subsystem: "replica", Name: "promotable",
			Help: "1 if the replica meets understudy's promotion rule now (caught up and in contact with the leader), else 0."}),
		silent: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "understudy", Subsystem: "replica", Name: "silent_voters",
			Help: "Voters silent in the last observation by raft's evidence: the leader's progress, or without it this replica's and the other voters' (docs/roles.md)."}),
		lockHeld: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "understudy", Subsystem: "replica", Name: "failover_lock_held",
			Help: "1 while this standby holds the failover lock, else 0."}),
		steps: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "understudy", Subsystem: "replica", Name: "failover_steps_total",
			Help: "Failover actions carried out by this replica, by action and outcome."}, []string{"action", "outcome"}),
		viewReads: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "understudy", Subsystem: "replica", Name: "leader_view_reads_total",
			Help: "Reads of the leader's raft status (its /debug/vars) by the role loop, by outcome: at most one a second while every voter replicates and no failover is under way."}, []string{"outcome"}),
	}
	for _, outcome := range []string{"ok", "error"} {
		m.removals.WithLabelValues(outcome) // exported from the start: an alert on a replacement needs the series before it
	}
	if reg != nil {
		reg.MustRegister(m.lag, m.sinceLeader, m.promotions, m.removals, m.wouldPromote, m.silent, m.lockHeld, m.steps, m.viewReads)
	}
	return m
}

// roles observes the cluster for the promotion core and carries out what
// it decides, feeding every outcome back. Its loop is the only code that
// changes membership.
type roles struct {
	lg   *zap.Logger
	cfg  promotion.Config
	join []string
	srv  *etcdserver.EtcdServer
	cli  *clientv3.Client
	// dial builds a client like cli for other endpoints (the leader's).
	dial dialer
	asOf func() time.Time
	// clock is the replica's one clock, the front's too.
	clock clockwork.Clock
	// gate orders promotions with the quota guard's stop.
	gate    *promotionGate
	m       *roleMetrics
	decider *promotion.Decider
	// leaderHTTP reads the leader's /debug/vars; peerHTTP probes peer URLs.
	leaderHTTP, peerHTTP *http.Client
	lock                 failoverLock
	// silentNames are the silent voters as last logged.
	silentNames []string
	// lastView is the leader's raft status as last read, at viewAt (zero
	// if the last read failed); viewAllActive: the last observation had
	// a view, and it showed every voter active (promotion.ReuseView).
	lastView      membership.RaftStatus
	viewAt        time.Time
	viewAllActive bool
	// lastRound is when the last ReadIndex round that completed began;
	// failoverLikely: the last observation had a silent voter, a record
	// or the lock, so a standby needs the leader's commit index.
	lastRound      time.Time
	failoverLikely bool
	// status publishes what the core says it does, and why.
	status *roleStatus
	// endpoints are the client's endpoints as last set from the member
	// list.
	endpoints []string
	// identity names the credential the client uses, for auth refusals.
	identity string
	// peerSeen: voters one of whose peer URLs has answered this process.
	peerSeen map[uint64]bool
	// peerViews are the other voters' own peer views (witness), as read at
	// peerViewsAt, each nil if it did not answer.
	peerViews   map[uint64]*membership.PeerView
	peerViewsAt time.Time
	// holdSeen is when this process first read each version (ModRevision)
	// of the maintenance holds it still reads: promotion times a hold's
	// For from it.
	holdSeen map[int64]time.Time
	// rtt follows the round trips of the evidence that answered (rounds,
	// view reads, probes), and leaderRTT, if set, is the front's rounds'
	// round trip to the leader: the longer sets the evidence's timeouts
	// (evidenceTimeout).
	rtt readindex.RoundTime
	// lastVoters are the last round's voters: they choose what a round
	// reads at once (observeVoters).
	lastVoters map[uint64]promotion.Voter
	leaderRTT  func() time.Duration
}

// isAuthError tells whether err is the cluster's auth refusing a call.
func isAuthError(err error) bool {
	for _, e := range []error{rpctypes.ErrPermissionDenied, rpctypes.ErrUserEmpty, rpctypes.ErrInvalidAuthToken, rpctypes.ErrAuthFailed, rpctypes.ErrAuthOldRevision} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// credential names what the replica's clients authenticate with.
func credential(cfg config.Front) string {
	if user, _ := cfg.Credentials(); user != "" {
		return fmt.Sprintf("user %q (--user)", user)
	}
	if cfg.ClientTLS.CertFile == "" {
		return "no user (neither --user nor a client certificate)"
	}
	cn, err := conn.CertCN(cfg.ClientTLS.CertFile)
	if err != nil {
		return fmt.Sprintf("the certificate %s (--cert-file)", cfg.ClientTLS.CertFile)
	}
	return fmt.Sprintf("user %q, the CN of its certificate %s (--cert-file)", cn, cfg.ClientTLS.CertFile)
}

// newRoles builds the role loop with its own long-lived client: its
// endpoints are --join plus every voter's client URLs and follow the
// replica's own member list (followMembers), so a dead or unreachable voter
// that was the only --join endpoint does not stop the failover.
func newRoles(lg *zap.Logger, cfg learnerConfig, srv *etcdserver.EtcdServer, clock clockwork.Clock, asOf func() time.Time, gate *promotionGate, status *roleStatus, reg prometheus.Registerer) (*roles, error) {
	eps := rolesEndpoints(cfg.Join, srv)
	base, err := replicaClientConfig(cfg.Front, "--join", eps, lg.Named("client"))
	if err != nil {
		return nil, err
	}
	cliTLS := base.TLS
	peerTLS, err := clientTLS(cfg.PeerTLS, cfg.TLSVersions, cfg.AdvertisePeerURLs)
	if err != nil {
		return nil, err
	}
	// Keep-alive pings find a connection whose peer went silent (a cut
	// client URL), so that calls move to an endpoint that answers; etcd
	// refuses pings more often than its --grpc-keepalive-min-time (5s).
	dial := func(ctx context.Context, eps []string) (*clientv3.Client, error) {
		c := base
		c.Context, c.Endpoints = ctx, eps
		c.DialKeepAliveTime, c.DialKeepAliveTimeout = 5*time.Second, 3*time.Second
		return clientv3.New(c)
	}
	cli, err := dial(context.Background(), eps)
	if err != nil {
		return nil, fmt.Errorf("replica: roles: client for %v: %w", eps, err)
	}
	return &roles{
		lg: lg, cfg: cfg.Promotion, join: cfg.Join, srv: srv, cli: cli, dial: dial, clock: clock, asOf: asOf, gate: gate, m: newRoleMetrics(reg),
		decider:    promotion.NewDecider(cfg.Promotion),
		leaderHTTP: httpClient(cliTLS), peerHTTP: httpClient(peerTLS),
		failoverLikely: true, status: status, endpoints: eps, identity: credential(cfg.Front), peerSeen: map[uint64]bool{},
	}, nil
}

// rolesEndpoints are the --join endpoints and every voter's client URLs in
// the replica's own (raft-replicated) member list: membership calls and
// the lock go through whichever of them answers.
func rolesEndpoints(join []string, srv *etcdserver.EtcdServer) []string {
	eps := slices.Clone(join)
	for _, m := range srv.Cluster().Members() {
		if !m.IsLearner {
			eps = append(eps, m.ClientURLs...)
		}
	}
	slices.Sort(eps)
	return slices.Compact(eps)
}

// followMembers points the client at the member list as it is now, without
// a network call (the client's own auto-sync asks a voter, which may be
// the one that is gone).
func (r *roles) followMembers(join []string) {
	eps := rolesEndpoints(join, r.srv)
	if slices.Equal(eps, r.endpoints) {
		return
	}
	r.endpoints = eps
	r.cli.SetEndpoints(eps...)
}

func httpClient(c *tls.Config) *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: c, MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute}}
}

func (r *roles) run(ctx context.Context) {
	t := r.clock.NewTicker(roleInterval)
	defer t.Stop()
	defer func() {
		r.lock.release(r.lg)
		r.m.lockHeld.Set(0)
		r.cli.Close()
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.lock.done():
			// The lock's lease expired (a pause, a partition): the lock is
			// gone, and another standby may hold it. Start over from the
			// persisted record.
			r.lg.Warn("failover lock lost: its session expired; starting over from the failover record")
			r.lock.forget()
			r.m.lockHeld.Set(0)
			continue
		case <-t.Chan():
		}
		o, err := r.observe(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			lg := r.lg.Debug
			if r.lock.held() {
				lg = r.lg.Warn
			}
			lg("role: cannot observe the cluster; every hold starts over", zap.Error(err))
			a := r.decider.Blind(r.clock.Now(), r.lock.held(), err)
			r.status.set(r.decider.Status())
			if a.Kind != promotion.None {
				r.act(ctx, o, a)
			}
			continue
		}
		r.followMembers(r.join)
		ok, _ := promotion.CaughtUp(r.cfg, o)
		r.m.wouldPromote.Set(map[bool]float64{true: 1, false: 0}[ok && o.IsLearner])
		a := r.decider.Step(o)
		r.status.set(r.decider.Status())
		if a.Kind != promotion.None {
			r.act(ctx, o, a)
		}
	}
}

// act carries out a and feeds its outcome back to the core.
func (r *roles) act(ctx context.Context, o promotion.Observation, a promotion.Action) {
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	lg := r.lg.With(zap.String("action", a.Kind.String()), zap.String("reason", a.Reason))
	if a.Record != nil {
		lg = lg.With(zap.Stringer("failover", a.Record))
	}
	err := r.do(actx, lg, o, a)
	if isAuthError(err) {
		err = fmt.Errorf("%w: %w (the role loop acts as %s; the failover lock and membership changes need the root role)", promotion.ErrRefused, err, r.identity)
		lg.Warn("refused by the cluster's auth", zap.Error(err))
	}
	if errors.Is(err, errFenced) {
		// Not the owner any more, or someone else moved the failover on:
		// let go, and start over from the record.
		r.lock.release(r.lg)
	}
	r.decider.Done(r.clock.Now(), a, err)
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	r.m.steps.WithLabelValues(a.Kind.String(), outcome).Inc()
	r.m.lockHeld.Set(map[bool]float64{true: 1, false: 0}[r.lock.held()])
}

func (r *roles) do(ctx context.Context, lg *zap.Logger, o promotion.Observation, a promotion.Action) error {
	switch a.Kind {
	case promotion.Promote:
		if a.Record != nil {
			// A standby stopped between deciding and acting (a pause past
			// its lock) must not promote on a stale decision.
			if err := r.checkFence(ctx, a.Record, o.HoldsRev); err != nil {
				lg.Warn("promotion not attempted: the failover lock or record changed", zap.Error(err))
				return err
			}
		}
		if err := r.gate.promote(func() error { return r.promote(ctx, lg, a.Target) }); err != nil {
			r.m.promotions.WithLabelValues(string(r.cfg.Role), "error").Inc()
			lg.Warn("promotion refused", zap.Error(err))
			return fmt.Errorf("MemberPromote %x: %w", a.Target, err)
		}
		r.m.promotions.WithLabelValues(string(r.cfg.Role), "ok").Inc()
		lg.Info("promoted to voter", zap.Uint64("applied", o.Applied), zap.Uint64("leader-commit", o.LeaderCommit))
	case promotion.RemoveVoter:
		if err := r.checkFence(ctx, a.Record, o.HoldsRev); err != nil {
			lg.Warn("removal not attempted: the failover lock or record changed", zap.Error(err))
			return err
		}
		// Through any voter, each attempt bounded: a voter found gone
		// (an attempt whose answer was lost, applied) is done.
		ch, err := r.changer(lg, r.cli.Cluster, r.attempt())
		if err == nil {
			var res membership.Result
			if res, err = ch.Remove(ctx, a.Target); err == nil && res.Already {
				lg.Info("the dead voter was already removed", zap.String("voter", fmt.Sprintf("%x", a.Target)))
			}
		}
		if err != nil {
			r.m.removals.WithLabelValues("error").Inc()
			lg.Warn("removing the dead voter failed; will retry", zap.String("voter", fmt.Sprintf("%x", a.Target)), zap.Error(err))
			return fmt.Errorf("MemberRemove %x: %w", a.Target, err)
		}
		r.m.removals.WithLabelValues("ok").Inc()
		lg.Info("removed the dead voter it replaced", zap.String("voter", fmt.Sprintf("%x", a.Target)))
	case promotion.WriteRecord:
		if err := r.lock.write(ctx, o.Failover, a.Record, o.HoldsRev); err != nil {
			lg.Warn("failover record not written", zap.Error(err))
			return err
		}
		lg.Info("failover record written")
	case promotion.ClearRecord:
		if err := r.lock.clear(ctx, a.Record); err != nil {
			lg.Warn("failover record not cleared", zap.Error(err))
			return err
		}
		lg.Info("failover record cleared")
	case promotion.AcquireFailoverLock:
		took, err := r.lock.acquire(ctx, r.cli)
		if err != nil || !took {
			// No session outlives an attempt that did not take the lock:
			// a waiter key left under a live lease would become the owner
			// unknowingly once the holder lets go, and block every other
			// standby.
			r.lock.release(r.lg)
		}
		switch {
		case err != nil:
			lg.Warn("failover lock", zap.Error(err))
			return err
		case !took:
			lg.Debug("another standby holds the failover lock")
			return promotion.ErrLockBusy
		}
		lg.Info("took the failover lock")
	case promotion.ReleaseFailoverLock:
		r.lock.release(r.lg)
		lg.Info("released the failover lock")
	}
	return nil
}

// checkFence is lock.check, each attempt bounded (retryUnanswered): it
// only compares.
func (r *roles) checkFence(ctx context.Context, rec *promotion.Record, holdsRev int64) error {
	return retryUnanswered(ctx, r.clock, r.attempt(), func(ctx context.Context) error {
		return r.lock.check(ctx, rec, holdsRev)
	})
}
