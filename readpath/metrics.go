package readpath

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/understudy-kv/understudy/wire"
)

// Read modes, as the metrics label them.
const (
	modeStrong    = wire.ReadModeStrong
	modeWeak      = wire.ReadModeWeak
	modeBounded   = wire.ReadModeBounded
	modeForwarded = wire.ReadModeForwarded // in answer headers only
	modeNone      = ""                     // not a read
)

// Metrics are the replica front's Prometheus metrics.
type Metrics struct {
	requests     *prometheus.CounterVec
	readIndex    *prometheus.HistogramVec
	boundedWaits prometheus.Counter
	forwarded    *prometheus.CounterVec
	watchers     prometheus.Gauge
}

// NewMetrics creates the metrics and registers them on reg (which may be
// nil, for tests); freshnessAge is exported as a gauge read at scrape time.
func NewMetrics(reg prometheus.Registerer, freshnessAge func() float64) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "understudy", Subsystem: "replica", Name: "requests_total",
			Help: "Requests served by the replica front, by gRPC service, method and read mode (strong, weak, bounded; empty for non-reads).",
		}, []string{"service", "method", "mode"}),
		readIndex: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "understudy", Subsystem: "replica", Name: "freshness_round_seconds",
			Help:    "Latency of the replica's ReadIndex rounds that keep its freshness, by outcome.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}, []string{"outcome"}),
		boundedWaits: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "understudy", Subsystem: "replica", Name: "bounded_read_waits_total",
			Help: "Bounded reads that had to wait for a fresh ReadIndex round.",
		}),
		forwarded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "understudy", Subsystem: "replica", Name: "forwarded_total",
			Help: "Writes, lease and membership requests forwarded to the leader through raft, by method and result.",
		}, []string{"method", "result"}),
		watchers: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "understudy", Subsystem: "replica", Name: "watch_streams",
			Help: "Open watch streams served from the replica's store.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.readIndex, m.boundedWaits, m.forwarded, m.watchers,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Namespace: "understudy", Subsystem: "replica", Name: "freshness_age_seconds",
				Help: "Upper bound on the staleness of the replica's store: time since the start of its last completed ReadIndex round.",
			}, freshnessAge))
	}
	return m
}

func (m *Metrics) observeRound(seconds float64, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	m.readIndex.WithLabelValues(outcome).Observe(seconds)
}

// viaMetrics are the metrics of rounds through hubs (--read-index-via).
type viaMetrics struct {
	rounds     *prometheus.CounterVec
	rejections *prometheus.CounterVec
}

// newViaMetrics creates them and registers them on reg (nil: none);
// avoided is read at scrape time.
func newViaMetrics(reg prometheus.Registerer, avoided func() float64) *viaMetrics {
	m := &viaMetrics{
		rounds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "understudy", Subsystem: "replica", Name: "read_index_rounds_total",
			Help: "ReadIndex rounds by where the read index came from: via (another replica, --read-index-via) or own (the leader; also after a hub failed or was refused).",
		}, []string{"source"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "understudy", Subsystem: "replica", Name: "read_index_via_rejections_total",
			Help: "Read indexes from a --read-index-via hub that were not used, by reason (not_member, wrong_member, wrong_cluster, stale_term, index_behind, catch_up, slow, unreachable, refused, unauthorized, no_token, malformed, tls_unverified, no_leader_contact).",
		}, []string{"reason"}),
	}
	if reg != nil {
		reg.MustRegister(m.rounds, m.rejections, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "understudy", Subsystem: "replica", Name: "read_index_via_hubs_avoided",
			Help: "--read-index-via hubs this replica keeps away from now (backing off after a failed, refused or slow answer).",
		}, avoided))
	}
	return m
}
