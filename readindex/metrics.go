package readindex

import "github.com/prometheus/client_golang/prometheus"

// metrics are the machinery's Prometheus metrics (docs/metrics.md); their
// names are the replica's, as before they moved here from the front.
type metrics struct {
	round *prometheus.HistogramVec
}

// newMetrics creates them and registers them on reg (nil: none);
// freshnessAge and the background period are exported as gauges read at
// scrape time.
func newMetrics(reg prometheus.Registerer, freshnessAge, period func() float64) *metrics {
	m := &metrics{
		round: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "understudy", Subsystem: "replica", Name: "freshness_round_seconds",
			Help:    "Latency of the replica's ReadIndex rounds that keep its freshness, by outcome.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}, []string{"outcome"}),
	}
	if reg != nil {
		reg.MustRegister(m.round, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "understudy", Subsystem: "replica", Name: "freshness_age_seconds",
			Help: "Upper bound on the staleness of the replica's store: time since the start of its last completed ReadIndex round.",
		}, freshnessAge), prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "understudy", Subsystem: "replica", Name: "freshness_period_seconds",
			Help: "Period of the replica's background ReadIndex rounds now: --freshness-interval while bounded reads with a bound under twice --freshness-idle-interval come, --freshness-idle-interval while other requests come, --freshness-quiet-interval while none has come for as long. The freshness age stays below about this plus a round.",
		}, period))
	}
	return m
}

func (m *metrics) observeRound(seconds float64, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	m.round.WithLabelValues(outcome).Observe(seconds)
}

// registerHubRounds exports, read at scrape time, the rounds through hubs
// in flight and the count of those that overlapped another (see
// batchPolicy); nil reg registers nothing.
func registerHubRounds(reg prometheus.Registerer, hubRounds func() (int, uint64)) {
	if reg == nil {
		return
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "understudy", Subsystem: "replica", Name: "read_index_via_in_flight",
			Help: "--read-index-via requests in flight now (at most --read-index-via-in-flight).",
		}, func() float64 { n, _ := hubRounds(); return float64(n) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "understudy", Subsystem: "replica", Name: "read_index_via_overlapping_total",
			Help: "--read-index-via requests started while another was in flight, for strong reads that arrived after it started.",
		}, func() float64 { _, o := hubRounds(); return float64(o) }),
	)
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
			Help: "Read indexes from a --read-index-via hub that were not used, by reason (not_member, wrong_member, wrong_cluster, wrong_nonce, stale_term, index_behind, catch_up, slow, unreachable, refused, unauthorized, no_token, malformed, tls_unverified, no_leader_contact).",
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
