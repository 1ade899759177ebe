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
	boundedWaits prometheus.Counter
	forwarded    *prometheus.CounterVec
	watchers     prometheus.Gauge
}

// NewMetrics creates the metrics and registers them on reg (which may be
// nil, for tests). The ReadIndex machinery's (freshness rounds and age,
// hub rounds) are package readindex's.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "understudy", Subsystem: "replica", Name: "requests_total",
			Help: "Requests served by the replica front, by gRPC service, method and read mode (strong, weak, bounded; empty for non-reads).",
		}, []string{"service", "method", "mode"}),
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
		reg.MustRegister(m.requests, m.boundedWaits, m.forwarded, m.watchers)
	}
	return m
}
