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
	// resyncWritten and resyncUnchanged: keys of full syncs into an image
	// the mirror wrote before, written because they differ, or left.
	resyncWritten, resyncUnchanged prometheus.Counter
	txns                           prometheus.Counter
	conflicts                      prometheus.Counter
	// mirroredSkipped: source key versions another mirror wrote.
	mirroredSkipped prometheus.Counter
	// adopted: destination keys a failback took over.
	adopted   prometheus.Counter
	leaseLost prometheus.Counter
	restored  prometheus.Counter
	stalled   prometheus.Gauge

	mu sync.Mutex
	// source is the newest source revision seen; appliedRev the newest in
	// the checkpoint; behindSince when the mirror last went from caught up
	// to behind.
	source, appliedRev int64
	behindSince        time.Time
	// lastProgress is the last commit, or the last moment the mirror had
	// nothing to do; lastErr the error of the last failed attempt since.
	lastProgress time.Time
	lastErr      error
	isStalled    bool
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
		resyncWritten: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "understudy", Subsystem: "mirror", Name: "resync_keys_written_total",
			Help: "Keys a full sync into an image the mirror wrote before (a resync) wrote because the destination's copy differed in value, lease or ownership, or was missing.",
		}),
		resyncUnchanged: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "understudy", Subsystem: "mirror", Name: "resync_keys_unchanged_total",
			Help: "Keys a resync left alone because the destination already held them as the source has them.",
		}),
		txns: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "understudy", Subsystem: "mirror", Name: "transactions_total",
			Help: "Destination transactions committed (each carries the checkpoint).",
		}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "understudy", Subsystem: "mirror", Name: "conflicts_total",
			Help: "Source keys not copied because the destination has a key of the same name that the mirror did not write.",
		}),
		mirroredSkipped: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "understudy", Subsystem: "mirror", Name: "mirrored_keys_skipped_total",
			Help: "Source key versions not copied because another mirror wrote them into the source (its ownership records say so).",
		}),
		adopted: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "understudy", Subsystem: "mirror", Name: "failback_adopted_keys_total",
			Help: "Destination keys a failback (--failback) took over because the mirror it fails back from had copied them.",
		}),
		leaseLost: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "understudy", Subsystem: "mirror", Name: "dest_leases_lost_total",
			Help: "Destination leases that ended while their source lease lived (their keys are restored).",
		}),
		restored: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "understudy", Subsystem: "mirror", Name: "lease_keys_restored_total",
			Help: "Leased keys written again because their destination lease had ended while the source lease lived.",
		}),
		stalled: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "understudy", Subsystem: "mirror", Name: "stalled",
			Help: "1 while the mirror has had work to do for longer than --stall-timeout without committing any.",
		}),
		lastProgress: time.Now(),
	}
	if reg != nil {
		reg.MustRegister(m.applied, m.syncedKeys, m.resyncs, m.resyncWritten, m.resyncUnchanged, m.txns, m.conflicts, m.mirroredSkipped, m.adopted, m.leaseLost, m.restored, m.stalled,
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

// committed records progress: a destination transaction went through.
func (m *metrics) committed(now time.Time) {
	m.txns.Inc()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lastProgress, m.lastErr = now, nil
}

// failing records an attempt that did not go through.
func (m *metrics) failing(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lastErr = err
}

// stall is the stall decision at now: the mirror is stalled when it has
// had work to do (behind the newest source revision it has seen, or its
// last attempt failed) for at least after without a commit. It reports
// whether that changed since the last call, and the last error.
func (m *metrics) stall(now time.Time, after time.Duration) (stalled, changed bool, lastErr error, idleFor time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lastErr == nil && m.appliedRev >= m.source {
		m.lastProgress = now // nothing to do is not a stall
	}
	idleFor = now.Sub(m.lastProgress)
	stalled = idleFor >= after
	changed = stalled != m.isStalled
	m.isStalled = stalled
	if stalled {
		m.stalled.Set(1)
	} else {
		m.stalled.Set(0)
	}
	return stalled, changed, m.lastErr, idleFor
}
