package mirror

import (
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/understudy-kv/understudy/mirror/core"
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
	// feederChecks: how the feeders were known before versions were
	// copied: by "read" (the source's checkpoints) or "watch" (the link
	// follower confirmed them unchanged).
	feederChecks *prometheus.CounterVec

	clock clockwork.Clock
	mu    sync.Mutex
	// progress is the stall rule's and the lag gauges' state (core).
	progress core.Progress
}

func newMetrics(reg prometheus.Registerer, clock clockwork.Clock) *metrics {
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
		feederChecks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "understudy", Subsystem: "mirror", Name: "feeder_checks_total",
			Help: "Checks, before source versions are copied, of which mirrors write into the source under the prefix: how=read read the source's mirror checkpoints (a round trip to the source), how=watch found them unchanged through the watch of those checkpoints.",
		}, []string{"how"}),
		clock:    clock,
		progress: core.NewProgress(clock.Now()),
	}
	if reg != nil {
		reg.MustRegister(m.applied, m.syncedKeys, m.resyncs, m.resyncWritten, m.resyncUnchanged, m.txns, m.conflicts, m.mirroredSkipped, m.adopted, m.leaseLost, m.restored, m.stalled, m.feederChecks,
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
				return m.clock.Since(since).Seconds()
			}))
	}
	return m
}

func (m *metrics) lag() (source, applied int64, behindSince time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.progress.Lag()
}

func (m *metrics) sourceAt(rev int64, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.progress.SourceAt(rev, now)
}

func (m *metrics) appliedAt(rev int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.progress.AppliedAt(rev)
}

// committed records progress: a destination transaction went through.
func (m *metrics) committed(now time.Time) {
	m.txns.Inc()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.progress.Committed(now)
}

// failing records an attempt that did not go through.
func (m *metrics) failing(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.progress.Failing(err)
}

// stall applies the stall rule (core.Progress.Check) at now and sets the
// stalled gauge.
func (m *metrics) stall(now time.Time, after time.Duration) core.Verdict {
	m.mu.Lock()
	defer m.mu.Unlock()
	v := m.progress.Check(now, after)
	if v.Stalled {
		m.stalled.Set(1)
	} else {
		m.stalled.Set(0)
	}
	return v
}
