package mirror

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	applied    prometheus.Counter
	syncedKeys prometheus.Counter
	resyncs    prometheus.Counter
	txns       prometheus.Counter

	mu sync.Mutex
	// source is the newest source revision seen; appliedRev the newest in
	// the checkpoint; behindSince when the mirror last went from caught up
	// to behind.
	source, appliedRev int64
	behindSince        time.Time
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		applied: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "understudy", Subsystem: "mirror", Name: "applied_revisions_total",
			Help: "Source revisions applied to the destination while streaming.",
		}),
		syncedKeys: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "understudy", Subsystem: "mirror", Name: "synced_keys_total",
			Help: "Keys copied by full syncs.",
		}),
		resyncs: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "understudy", Subsystem: "mirror", Name: "resyncs_total",
			Help: "Full syncs done again because the source compacted past the checkpoint.",
		}),
		txns: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "understudy", Subsystem: "mirror", Name: "transactions_total",
			Help: "Destination transactions committed (each carries the checkpoint).",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.applied, m.syncedKeys, m.resyncs, m.txns,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Namespace: "understudy", Subsystem: "mirror", Name: "lag_revisions",
				Help: "Source revisions seen but not yet in the checkpoint.",
			}, func() float64 { s, a, _ := m.lag(); return float64(max(s-a, 0)) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Namespace: "understudy", Subsystem: "mirror", Name: "lag_seconds",
				Help: "How long the mirror has been behind the newest source revision it has seen; 0 when caught up.",
			}, func() float64 {
				_, _, since := m.lag()
				if since.IsZero() {
					return 0
				}
				return time.Since(since).Seconds()
			}))
	}
	return m
}

func (m *metrics) lag() (source, applied int64, behindSince time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.source, m.appliedRev, m.behindSince
}

func (m *metrics) sourceAt(rev int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rev > m.source {
		m.source = rev
		if m.behindSince.IsZero() && rev > m.appliedRev {
			m.behindSince = time.Now()
		}
	}
}

func (m *metrics) appliedAt(rev int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.appliedRev = rev
	if rev >= m.source {
		m.behindSince = time.Time{}
	}
}
