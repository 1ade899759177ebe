package cascade

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are a cascaded replica's (docs/metrics.md). They outlive the
// stores a replica bootstraps in turn: NewMetrics once, then Config.Metrics
// of every Open; the gauges read the store open now.
type Metrics struct {
	bootstraps     prometheus.Counter
	bootstrapBytes prometheus.Gauge
	switches       prometheus.Counter
	divergences    prometheus.Counter
	historyChanges prometheus.Counter
	agedRounds     prometheus.Counter
	applySeconds   prometheus.Histogram
	proofSeconds   *prometheus.HistogramVec
	authCopies     prometheus.Counter
	current        atomic.Pointer[Store]
}

// NewMetrics creates the metrics and registers them on reg (nil: none).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		bootstraps: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "understudy", Subsystem: "cascade", Name: "bootstraps_total",
			Help: "Bootstraps of the cascaded replica's store from an upstream's snapshot: the first, and one after every divergence or compaction past it."}),
		bootstrapBytes: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "understudy", Subsystem: "cascade", Name: "bootstrap_bytes",
			Help: "Bytes of the upstream's snapshot received by the last bootstrap (so far, while it runs)."}),
		switches: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "understudy", Subsystem: "cascade", Name: "upstream_switches_total",
			Help: "Watch sessions on an upstream that delivered and then ended (the upstream lost, silent, restarted or compacted past the store): the replica resumed on the next one, after checking its history."}),
		divergences: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "understudy", Subsystem: "cascade", Name: "divergences_total",
			Help: "Source revisions after which the local store was found to differ from the source: the replica stopped serving and bootstrapped again."}),
		historyChanges: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "understudy", Subsystem: "cascade", Name: "history_changes_total",
			Help: "Times an upstream was found to hold another history than the store (another cluster ID, or a linearizable revision below the store's, or other changes at the store's revision: the source restored from a backup): the replica stopped serving the store at once and bootstrapped again."}),
		agedRounds: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "understudy", Subsystem: "cascade", Name: "aged_rounds_total",
			Help: "Background freshness rounds answered from an upstream's own last round (a bounded read within the background period, which costs the upstream and the leader no ReadIndex round): the store is then fresh as of that round's start."}),
		authCopies: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "understudy", Subsystem: "cascade", Name: "auth_copies_total",
			Help: "Copies made of the source cluster's auth (users, roles, permissions): one at every bootstrap, and one whenever its auth revision moved."}),
		proofSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "understudy", Subsystem: "cascade", Name: "proof_seconds",
			Help:    "Where a strong read's proof spends its time: phase=upstream, the upstream's answer to a linearizable read (its own round, on a replica upstream); phase=apply, then until the store holds the revision it answered (the upstream's watch delivering it, and this replica applying it).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}, []string{"phase"}),
		applySeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "understudy", Subsystem: "cascade", Name: "apply_seconds",
			Help: "Time to apply (and check) one watch response of the upstream, one local transaction per source revision in it.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}),
	}
	if reg == nil {
		return m
	}
	store := func(f func(*Store) float64) func() float64 {
		return func() float64 {
			if s := m.current.Load(); s != nil && s.e != nil {
				return f(s)
			}
			return 0
		}
	}
	reg.MustRegister(m.bootstraps, m.bootstrapBytes, m.switches, m.divergences, m.historyChanges, m.proofSeconds, m.agedRounds, m.applySeconds, m.authCopies,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "understudy", Subsystem: "cascade", Name: "revision",
			Help: "The source revision the cascaded replica's store holds."}, store(func(s *Store) float64 { return float64(s.Revision()) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "understudy", Subsystem: "cascade", Name: "lag_revisions",
			Help: "Revisions the cascaded replica's store is behind the newest its upstreams reported."},
			store(func(s *Store) float64 { return float64(max(0, s.SourceRevision()-s.Revision())) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "understudy", Subsystem: "cascade", Name: "following",
			Help: "1 while the cascaded replica follows an upstream's watch, 0 while it has none."}, store(func(s *Store) float64 { return float64(min(s.lead.Load(), 1)) })),
	)
	return m
}
