package replica

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/server/v3/etcdserver"
	"go.uber.org/zap"

	"github.com/understudy-kv/understudy/membership"
)

const (
	// learnerCheckInterval is how often a replica asks the other learners'
	// peer URLs whether a member answers there.
	learnerCheckInterval = 30 * time.Second
	// learnerProbeTimeout bounds one learner's probe.
	learnerProbeTimeout = 5 * time.Second
)

// learnerWatch finds learner entries that no process answers for: a
// replica scaled away or uninstalled without leaving, a lost volume, a
// crashed first start. Such an entry never counts for quorum, but it takes
// one of the voters' --max-learners slots until someone runs `replica
// leave`. Every replica asks the other learners' peer URLs, as a member
// checks a peer (membership.PeerAnswers), and exports how many did not
// answer (understudy_cluster_learners_unanswered; the alert
// UnderstudyStaleLearner), logging each entry when it stops or starts
// answering. It only reports: removing a learner is the operator's or its
// own preStop hook's decision. It also exports how many learner entries
// there are (understudy_cluster_learners), which etcd does not: a cluster
// out of --max-learners slots refuses the next replica
// (UnderstudyLearnerSlotsNearlyUsed).
type learnerWatch struct {
	lg    *zap.Logger
	srv   *etcdserver.EtcdServer
	hc    *http.Client
	clock clockwork.Clock
	// silent are the learners that did not answer at the last check.
	silent     map[uint64]bool
	unanswered prometheus.Gauge
	learners   prometheus.Gauge
}

func newLearnerWatch(lg *zap.Logger, srv *etcdserver.EtcdServer, hc *http.Client, clock clockwork.Clock, reg prometheus.Registerer) *learnerWatch {
	w := &learnerWatch{lg: lg, srv: srv, hc: hc, clock: clock, silent: map[uint64]bool{},
		unanswered: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "understudy_cluster_learners_unanswered",
			Help: "Learner entries of the cluster (other than this replica) whose peer URLs did not answer as a member at the last check, every 30s: entries no replica runs for take a --max-learners slot.",
		}),
		learners: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "understudy_cluster_learners",
			Help: "Learner entries in the cluster's member list at the last check, every 30s, this replica's among them while it is a learner: each takes one of the voters' --max-learners slots.",
		})}
	reg.MustRegister(w.unanswered, w.learners)
	return w
}

// run checks every learnerCheckInterval until ctx ends.
func (w *learnerWatch) run(ctx context.Context) {
	t := w.clock.NewTicker(learnerCheckInterval)
	defer t.Stop()
	for {
		w.check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		}
	}
}

// check probes every other learner once and feeds the outcome back.
func (w *learnerWatch) check(ctx context.Context) {
	self := uint64(w.srv.MemberID())
	cluster := w.srv.Cluster().ID().String()
	now := map[uint64]bool{}
	learners := 0
	for _, m := range w.srv.Cluster().Members() {
		id := uint64(m.ID)
		if m.IsLearner {
			learners++
		}
		if !m.IsLearner || id == self {
			continue
		}
		answered := slices.ContainsFunc(m.PeerURLs, func(u string) bool {
			pctx, cancel := context.WithTimeout(ctx, learnerProbeTimeout)
			defer cancel()
			return membership.PeerAnswers(pctx, w.hc, u, cluster) == nil
		})
		if ctx.Err() != nil {
			return
		}
		name := m.Name
		if name == "" {
			name = "(never started)"
		}
		switch {
		case !answered && !w.silent[id]:
			w.lg.Warn("a learner entry's peer URLs do not answer: if no replica will run as it again, `replica leave` it, or it keeps a --max-learners slot",
				zap.String("member-id", fmt.Sprintf("%x", id)), zap.String("name", name), zap.String("peer-urls", strings.Join(m.PeerURLs, ",")))
		case answered && w.silent[id]:
			w.lg.Info("a learner entry answers again", zap.String("member-id", fmt.Sprintf("%x", id)), zap.String("name", name))
		}
		if !answered {
			now[id] = true
		}
	}
	w.silent = now
	w.unanswered.Set(float64(len(now)))
	w.learners.Set(float64(learners))
}
