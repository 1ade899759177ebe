package replica

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/understudy-kv/understudy/promotion"
)

// roleStatus is the role loop's last promotion.Status, published for the
// front (which tells it to `replica status` in probe answers), the logs
// (each time it changes) and a metric.
type roleStatus struct {
	lg    *zap.Logger
	gauge *prometheus.GaugeVec
	cur   atomic.Pointer[promotion.Status]
	// logged is the last status logged (only the role loop's goroutine
	// calls set).
	logged promotion.Status
}

func newRoleStatus(lg *zap.Logger, reg prometheus.Registerer) *roleStatus {
	s := &roleStatus{lg: lg, gauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "understudy", Subsystem: "replica", Name: "role_state",
		Help: "1 for the role loop's current state and reason (replica status shows the detail): idle, waiting (silence, hold, retry), blocked (not-caught-up, no-quorum-after-promotion, no-quorum-after-removal, no-leader, lock-busy, refused, unproven), blind (cannot-observe, no-read-index-round) or acting (the action)."},
		[]string{"state", "reason"})}
	if reg != nil {
		reg.MustRegister(s.gauge)
	}
	return s
}

// String is the current status for people ("waiting: hold 3.1s of 5s"); ""
// before the first observation.
func (s *roleStatus) String() string {
	if c := s.cur.Load(); c != nil {
		return c.String()
	}
	return ""
}

// set publishes st, and logs it when its state or reason is not the last
// logged one. Acting is not logged here (each action logs its outcome), so
// a step retried after each back-off logs its reason once.
func (s *roleStatus) set(st promotion.Status) {
	prev := s.cur.Swap(&st)
	if prev == nil || !prev.Same(st) {
		if prev != nil {
			s.gauge.DeleteLabelValues(string(prev.State), prev.Reason)
		}
		s.gauge.WithLabelValues(string(st.State), st.Reason).Set(1)
	}
	if st.State == promotion.StateActing || s.logged.Same(st) {
		return
	}
	s.logged = st
	log := s.lg.Info
	if st.State == promotion.StateBlocked || st.State == promotion.StateBlind {
		log = s.lg.Warn
	}
	log("role state changed", zap.String("state", string(st.State)), zap.String("reason", st.Reason), zap.String("detail", st.Detail))
}
