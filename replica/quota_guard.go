package replica

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/understudy-kv/understudy/membership"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// errQuotaPassed ends a learner whose backend quota every voter's has
// passed since it started.
var errQuotaPassed = errors.New("replica: every voter's backend quota is now above this learner's")

// belowEveryVoter tells whether own would stop this member's database
// before any voter's stops theirs: only then does this member add a way
// for the cluster to run out of space. (At start a replica takes the
// largest voter's quota; while the voters are raised one at a time, the
// smallest still stops the cluster first.)
func belowEveryVoter(own int64, voters map[string]int64) (who string, quota int64, below bool) {
	who, _ = voterBounds(voters)
	quota = voters[who]
	return who, quota, who != "" && limit(own) < limit(quota)
}

// promotionGate orders the two things that may end this member's time as
// a learner: the role loop's promotion of it, and the quota guard's stop.
// The guard stops the process only while no promotion of this member can
// be under way or in doubt; once it has decided to stop, no promotion
// starts. A voter that stops could cost the cluster its quorum; a learner
// costs it nothing. The two never wait for each other and no network call
// runs under the gate's lock: each claims the gate, calls out, and reports
// back; whoever finds the gate claimed declines and tries again on its
// next tick.
type promotionGate struct {
	mu sync.Mutex
	// busy is what holds the gate: gateFree, gatePromoting or
	// gateChecking.
	busy     gateUse
	stopping bool
	// below: the quota guard's last check found this member's quota
	// below every voter's; a learner is not promoted then.
	below bool
	// inDoubt: a promotion ended in an error that does not say nothing
	// changed (membership.Unchanged); its proposal may still commit.
	inDoubt bool
}

type gateUse int

const (
	gateFree gateUse = iota
	gatePromoting
	gateChecking
)

var (
	errStopping      = errors.New("replica: stopping (backend quota below every voter's): no promotion")
	errQuotaBelow    = errors.New("replica: backend quota below every voter's: no promotion (restart the replica to take the voters' quota)")
	errQuotaChecking = errors.New("replica: the quota guard is checking whether this learner must stop: no promotion until it has decided")
	errPromoting     = errors.New("a promotion of this member is under way")
)

// setBelow records the quota guard's last finding.
func (g *promotionGate) setBelow(below bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.below = below
}

// promote calls f, which promotes this member, unless the replica stops
// or the quota guard is deciding whether it must.
func (g *promotionGate) promote(f func() error) error {
	if err := g.claim(gatePromoting); err != nil {
		return err
	}
	err := f()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.busy = gateFree
	if err != nil && !membership.Unchanged(err) {
		g.inDoubt = true
	}
	return err
}

// claim takes the gate for use, or says why not.
func (g *promotionGate) claim(use gateUse) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.stopping:
		return errStopping
	case use == gatePromoting && g.below:
		return errQuotaBelow
	case use == gateChecking && g.inDoubt:
		return errors.New("a promotion of this member ended in doubt")
	case g.busy == gatePromoting:
		return errPromoting
	case g.busy == gateChecking:
		return errQuotaChecking
	}
	g.busy = use
	return nil
}

// stop decides, with no promotion under way, whether the replica may stop:
// it may while this member is a learner (learner reads the member list,
// linearizably) and no promotion of it is in doubt. Once it says yes, no
// promotion starts.
func (g *promotionGate) stop(learner func() (bool, error)) (bool, error) {
	if err := g.claim(gateChecking); err != nil {
		return false, err
	}
	ok, err := learner()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.busy = gateFree
	if err != nil || !ok {
		return false, err
	}
	g.stopping = true
	return true, nil
}

// quotaGuard asks the voters for their quotas again every interval, as
// long as the replica runs. Once every voter's quota is above this
// member's (voters restarted with a larger --quota-backend-bytes), this
// member's database would pass its quota first, and one member over its
// quota stops writes cluster-wide (NOSPACE). A learner then stops: it
// counts for no quorum, and started again it takes the voters' quota. A
// member that is a voter, or whose promotion is in doubt, stays and
// reports the gap (log and metric), as it would any voter's smaller quota.
type quotaGuard struct {
	lg       *zap.Logger
	cli      *clientv3.Client
	name     string
	id       uint64
	quota    int64
	explicit bool // --quota-backend-bytes was given
	every    time.Duration
	clock    clockwork.Clock
	gate     *promotionGate
	below    prometheus.Gauge
	checks   *prometheus.CounterVec
}

// quotaBlind is how many checks in a row may learn no voter's quota
// before the guard warns.
const quotaBlind = 3

func newQuotaGuard(lg *zap.Logger, cli *clientv3.Client, name string, id uint64, quota int64, explicit bool, every time.Duration, clock clockwork.Clock, gate *promotionGate, reg prometheus.Registerer) *quotaGuard {
	q := &quotaGuard{lg: lg, cli: cli, name: name, id: id, quota: quota, explicit: explicit, every: every, clock: clock, gate: gate,
		below: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "understudy", Subsystem: "replica", Name: "quota_below_voters",
			Help: "1 while this member's backend quota is below every voter's, so that it would raise NOSPACE for the cluster first (a learner stops then; see --quota-check-interval), else 0."}),
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "understudy", Subsystem: "replica", Name: "quota_checks_total",
			Help: "Checks of this member's backend quota against the voters', by outcome: ok, below (every voter's is larger), partial (every voter that answered has a larger one, but not every voter answered: no stop) or blind (no voter told its quota)."}, []string{"outcome"})}
	if reg != nil {
		reg.MustRegister(q.below, q.checks)
	}
	return q
}

// run checks every interval until ctx ends, or returns errQuotaPassed
// once this learner must stop.
func (q *quotaGuard) run(ctx context.Context) error {
	t := q.clock.NewTicker(q.every)
	defer t.Stop()
	blind, reported := 0, false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.Chan():
		}
		voters, others, _, err := voterQuotas(ctx, q.cli, q.name, q.id)
		if err != nil || len(voters) == 0 {
			q.checks.WithLabelValues("blind").Inc()
			if blind++; blind == quotaBlind {
				q.lg.Warn("could not learn any voter's backend quota; a voter's larger quota would go unnoticed", zap.Int("checks", blind), zap.Error(err))
			}
			continue
		}
		blind = 0
		who, theirs, below := belowEveryVoter(q.quota, voters)
		if !below {
			q.checks.WithLabelValues("ok").Inc()
			q.below.Set(0)
			q.gate.setBelow(false)
			reported = false
			continue
		}
		q.below.Set(1)
		q.gate.setBelow(true)
		if len(voters) < others {
			// A voter that did not answer may keep a smaller quota.
			q.checks.WithLabelValues("partial").Inc()
			continue
		}
		q.checks.WithLabelValues("below").Inc()
		stop, err := q.gate.stop(func() (bool, error) { return q.isLearner(ctx) })
		if stop {
			how := "to take the voters' quota"
			_, most := voterBounds(voters)
			if largest := voters[most]; q.explicit && largest > 0 {
				how = fmt.Sprintf("with --quota-backend-bytes of at least %d (the largest voter's), or without it to take the voters' quota", largest)
			} else if q.explicit {
				how = "without --quota-backend-bytes: a voter has no quota, so neither may this member"
			}
			return fmt.Errorf("%w: the smallest is voter %s's %s, this learner's %s; its database would pass its quota first and stop the cluster's writes (NOSPACE), so it stops: start it again %s",
				errQuotaPassed, who, quotaText(theirs), quotaText(q.quota), how)
		}
		if !reported {
			q.lg.Error("this member's backend quota is below every voter's, so its database would stop the cluster's writes first (NOSPACE); it is not a learner that may stop (or could not tell): restart it with at least the voters' quota",
				zap.String("smallest-voter", who), zap.Int64("voter-quota", theirs), zap.Int64("quota-backend-bytes", q.quota), zap.NamedError("not-stopping", err))
			reported = true
		}
	}
}

// isLearner reads, linearizably, whether this member is still a learner.
func (q *quotaGuard) isLearner(ctx context.Context) (bool, error) {
	mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ml, err := q.cli.MemberList(mctx)
	if err != nil {
		return false, fmt.Errorf("member list: %w", err)
	}
	for _, m := range ml.Members {
		if m.ID == q.id {
			return m.IsLearner, nil
		}
	}
	return false, fmt.Errorf("member %x is not in the member list", q.id)
}
