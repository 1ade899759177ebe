package replica

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.etcd.io/etcd/server/v3/etcdserver"
	"go.uber.org/zap"

	"github.com/understudy-kv/understudy/promotion"
)

// failoverLockKey is where standbys take turns: one acts at a time.
const failoverLockKey = "\x00understudy/failover-lock"

// roleInterval is how often the role loop observes the cluster.
const roleInterval = 200 * time.Millisecond

type roleMetrics struct {
	lag          prometheus.Gauge
	sinceLeader  prometheus.Gauge
	promotions   *prometheus.CounterVec
	removals     *prometheus.CounterVec
	wouldPromote prometheus.Gauge
}

func newRoleMetrics(reg prometheus.Registerer) *roleMetrics {
	m := &roleMetrics{
		lag: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "understudy", Subsystem: "replica", Name: "lag_entries",
			Help: "Entries the replica's applied index trails the leader's commit index."}),
		sinceLeader: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "understudy", Subsystem: "replica", Name: "leader_contact_age_seconds",
			Help: "Time since the replica last heard from the leader (the start of its last completed ReadIndex round)."}),
		promotions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "understudy", Subsystem: "replica", Name: "promotions_total",
			Help: "Promotions of this replica to voter, by role and outcome."}, []string{"role", "outcome"}),
		removals: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "understudy", Subsystem: "replica", Name: "failover_removals_total",
			Help: "Dead voters removed by this replica after replacing them, by outcome."}, []string{"outcome"}),
		wouldPromote: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "understudy", Subsystem: "replica", Name: "promotable",
			Help: "1 if the replica meets understudy's promotion rule now (caught up and in contact with the leader), else 0."}),
	}
	if reg != nil {
		reg.MustRegister(m.lag, m.sinceLeader, m.promotions, m.removals, m.wouldPromote)
	}
	return m
}

// roles observes the cluster for the promotion core and carries out what
// it decides. Its loop is the only code that changes membership.
type roles struct {
	lg      *zap.Logger
	cfg     promotion.Config
	srv     *etcdserver.EtcdServer
	cli     *clientv3.Client
	asOf    func() time.Time
	m       *roleMetrics
	decider *promotion.Decider

	unreachableSince map[uint64]time.Time
	unreachable      string // names of unreachable voters, as last logged
	session          *concurrency.Session
	lock             *concurrency.Mutex
	locked           bool
}

func (r *roles) run(ctx context.Context) {
	t := time.NewTicker(roleInterval)
	defer t.Stop()
	defer func() {
		r.releaseLock()
		if r.session != nil {
			r.session.Close()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		o, err := r.observe(ctx)
		if err != nil {
			if ctx.Err() == nil {
				r.lg.Debug("role: cannot observe the cluster", zap.Error(err))
			}
			continue
		}
		ok, _ := promotion.CaughtUp(r.cfg, o)
		r.m.wouldPromote.Set(map[bool]float64{true: 1, false: 0}[ok && o.IsLearner])
		a := r.decider.Step(o)
		if a.Kind != promotion.None {
			r.act(ctx, o, a)
		}
	}
}

// observe reads what the core needs. With the failover lock held, the
// local membership is brought up to date first (a ReadIndex round), so
// that a standby that takes the lock after another one finished sees that
// the dead voter is gone.
func (r *roles) observe(ctx context.Context) (promotion.Observation, error) {
	if r.locked {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := r.srv.LinearizableReadNotify(rctx)
		cancel()
		if err != nil {
			return promotion.Observation{}, fmt.Errorf("read index: %w", err)
		}
	}
	now := time.Now()
	o := promotion.Observation{
		Now: now, SelfID: uint64(r.srv.MemberID()), IsLearner: r.srv.IsLearner(), Leader: uint64(r.srv.Leader()),
		LastLeaderContact: r.asOf(), Applied: r.srv.AppliedIndex(), HoldsFailoverLock: r.locked,
	}
	r.m.sinceLeader.Set(now.Sub(o.LastLeaderContact).Seconds())
	for _, m := range r.srv.Cluster().Members() {
		if uint64(m.ID) == o.SelfID || m.IsLearner {
			continue
		}
		v := promotion.Voter{ID: uint64(m.ID), Name: m.Name}
		var st *clientv3.StatusResponse
		if len(m.ClientURLs) > 0 {
			sctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			var err error
			st, err = r.cli.Status(sctx, m.ClientURLs[0])
			cancel()
			v.Reachable = err == nil
		}
		if v.Reachable {
			delete(r.unreachableSince, v.ID)
			if uint64(m.ID) == o.Leader {
				o.LeaderCommit = st.RaftIndex
			}
		} else {
			if _, ok := r.unreachableSince[v.ID]; !ok {
				r.unreachableSince[v.ID] = now
			}
			v.UnreachableSince = r.unreachableSince[v.ID]
		}
		o.Voters = append(o.Voters, v)
	}
	var names []string
	for _, v := range o.Voters {
		if !v.Reachable {
			names = append(names, v.Name)
		}
	}
	if now := strings.Join(names, ","); now != r.unreachable {
		r.unreachable = now
		if now == "" {
			r.lg.Info("every voter is reachable")
		} else {
			r.lg.Warn("voters unreachable", zap.Strings("voters", names))
		}
	}
	if o.Leader != 0 && o.LeaderCommit == 0 && o.IsLearner {
		return o, errors.New("the leader did not answer Status")
	}
	r.m.lag.Set(float64(promotion.Lag(o)))
	return o, nil
}

func (r *roles) act(ctx context.Context, o promotion.Observation, a promotion.Action) {
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	lg := r.lg.With(zap.String("action", a.Kind.String()), zap.String("reason", a.Reason))
	switch a.Kind {
	case promotion.Promote:
		if _, err := r.cli.MemberPromote(actx, a.Target); err != nil {
			r.m.promotions.WithLabelValues(string(r.cfg.Role), "error").Inc()
			lg.Warn("promotion refused", zap.Error(err))
			return
		}
		r.m.promotions.WithLabelValues(string(r.cfg.Role), "ok").Inc()
		lg.Info("promoted to voter", zap.Uint64("applied", o.Applied), zap.Uint64("leader-commit", o.LeaderCommit))
	case promotion.RemoveVoter:
		if _, err := r.cli.MemberRemove(actx, a.Target); err != nil {
			r.m.removals.WithLabelValues("error").Inc()
			lg.Warn("removing the dead voter failed", zap.String("voter", fmt.Sprintf("%x", a.Target)), zap.Error(err))
			return
		}
		r.m.removals.WithLabelValues("ok").Inc()
		lg.Info("removed the dead voter it replaced", zap.String("voter", fmt.Sprintf("%x", a.Target)))
	case promotion.AcquireFailoverLock:
		if r.session == nil {
			s, err := concurrency.NewSession(r.cli, concurrency.WithTTL(10), concurrency.WithContext(ctx))
			if err != nil {
				lg.Warn("failover lock: session", zap.Error(err))
				return
			}
			r.session, r.lock = s, concurrency.NewMutex(s, failoverLockKey)
		}
		switch err := r.lock.TryLock(actx); {
		case err == nil:
			r.locked = true
			lg.Info("took the failover lock")
		case errors.Is(err, concurrency.ErrLocked):
			lg.Debug("another standby holds the failover lock")
		default:
			lg.Warn("failover lock", zap.Error(err))
		}
	case promotion.ReleaseFailoverLock:
		r.releaseLock()
		lg.Info("released the failover lock")
	}
}

func (r *roles) releaseLock() {
	if !r.locked {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.lock.Unlock(ctx); err != nil {
		r.lg.Warn("failover lock: unlock", zap.Error(err))
	}
	r.locked = false
}
