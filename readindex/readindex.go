// Package readindex is a replica's ReadIndex machinery: how fresh its store
// is known to be (Freshness, with the batching of rounds in batchPolicy),
// when it last heard from its leader (LeaderContact), and rounds through
// other replicas (--read-index-via: viaRounds, hubHealth, the protocol in
// protocol.go).
//
// It needs of the member only what Member declares, and of the raft
// transport what ContactSource declares; it links no etcd package. The
// front (package readpath) builds a Tracker on the replica's member, waits
// on its Freshness for strong and bounded reads, and reads its
// LeaderContact for require-leader, /readyz and the answer headers.
package readindex

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Config configures a Tracker.
type Config struct {
	// Logger is required.
	Logger *zap.Logger
	// Registerer receives the metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// Clock drives rounds, batching, leader contact and hub back-offs; nil
	// means the real clock.
	Clock clockwork.Clock
	// Interval is the period of background rounds while bounded reads
	// come (--freshness-interval).
	Interval time.Duration
	// IdleInterval is their period when no bounded read with a bound
	// under twice it has come for idleAfter (--freshness-idle-interval);
	// 0 or less than Interval means Interval.
	IdleInterval time.Duration
	// QuietInterval is their period once no client request has come for
	// as long (--freshness-quiet-interval; see Freshness.Touch); 0 or not
	// more than IdleInterval means never quiet.
	QuietInterval time.Duration
	// BatchInterval is the least time between two round starts
	// (--read-batch-interval), 0 to Interval.
	BatchInterval time.Duration
	// BatchMaxWait is the most a read waits for its round to start while
	// the round is held for the readers coming back (--read-batch-max-wait,
	// see batchPolicy), 0 to Interval.
	BatchMaxWait time.Duration
	// RoundTimeout bounds one round (etcd's request timeout).
	RoundTimeout time.Duration
	// Election is the member's election timeout: leader contact is sampled
	// every quarter of it, and hubs are asked only while the leader was
	// heard from within it.
	Election time.Duration
	// Via, if it names URLs, obtains read indexes from hubs rather than
	// from the leader (see protocol.go).
	Via ViaConfig
}

// Validate reports every missing or bad field.
func (c Config) Validate() error {
	var problems []error
	if c.Logger == nil {
		problems = append(problems, errors.New("readindex: Config.Logger is nil"))
	}
	if c.Interval <= 0 {
		problems = append(problems, fmt.Errorf("readindex: Interval %v (--freshness-interval): must be more than 0", c.Interval))
	}
	if c.QuietInterval < 0 {
		problems = append(problems, fmt.Errorf("readindex: QuietInterval %v (--freshness-quiet-interval): must be 0 (never quiet) or more", c.QuietInterval))
	}
	if c.BatchInterval < 0 || c.BatchInterval > c.Interval {
		problems = append(problems, fmt.Errorf("readindex: BatchInterval %v (--read-batch-interval): must be between 0 and Interval (%v)", c.BatchInterval, c.Interval))
	}
	if c.BatchMaxWait < 0 || c.BatchMaxWait > c.Interval {
		problems = append(problems, fmt.Errorf("readindex: BatchMaxWait %v (--read-batch-max-wait): must be between 0 and Interval (%v)", c.BatchMaxWait, c.Interval))
	}
	if c.RoundTimeout <= 0 {
		problems = append(problems, fmt.Errorf("readindex: RoundTimeout %v: must be more than 0", c.RoundTimeout))
	}
	if c.Election <= 0 {
		problems = append(problems, fmt.Errorf("readindex: Election %v: must be more than 0", c.Election))
	}
	if c.Via.InFlight < 0 {
		problems = append(problems, fmt.Errorf("readindex: Via.InFlight %d (--read-index-via-in-flight): must be 0 (one) or more", c.Via.InFlight))
	}
	if len(c.Via.URLs) > 0 && c.Via.Timeout <= 0 {
		problems = append(problems, fmt.Errorf("readindex: Via.Timeout %v (--read-index-via-timeout): must be more than 0", c.Via.Timeout))
	}
	return errors.Join(problems...)
}

// Tracker is the machinery on one member: its freshness rounds (own, or
// through hubs) and its leader contact. Run is its only loop pair.
type Tracker struct {
	fresh    *Freshness
	contact  *LeaderContact
	election time.Duration
	// roundTook follows how long own rounds take (for hub timeouts).
	roundTook RoundTime
}

// RoundTime follows the durations of round trips that succeeded, erring
// long, for timeouts that must not take a far peer for a dead one: a
// longer one is taken at once, a shorter one lowers it by an eighth of the
// difference. Zero until the first. Safe for concurrent use.
type RoundTime struct{ ns atomic.Int64 }

// Observe records a round trip that took d.
func (r *RoundTime) Observe(d time.Duration) {
	for {
		old := r.ns.Load()
		next := int64(d)
		if old > next {
			next = old - (old-next)/8
		}
		if r.ns.CompareAndSwap(old, next) {
			return
		}
	}
}

// Get is the round-trip time followed so far.
func (r *RoundTime) Get() time.Duration { return time.Duration(r.ns.Load()) }

// New builds the machinery on m, with leader contact told by src; Run
// starts it.
func New(cfg Config, m Member, src ContactSource) (*Tracker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	t := &Tracker{election: cfg.Election}
	t.contact = NewLeaderContact(cfg.Clock, m.Lead, src)
	met := newMetrics(cfg.Registerer, func() float64 { return min(t.fresh.Age().Seconds(), math.MaxInt32) },
		func() float64 { return t.fresh.Period().Seconds() })
	t.fresh = NewFreshness(cfg.Logger, cfg.Clock, cfg.Interval, cfg.BatchInterval, cfg.RoundTimeout, m.LinearizableReadNotify,
		func(d time.Duration, own bool, err error) {
			met.observeRound(d.Seconds(), err)
			if own && err == nil { // the leader answered a round that started d ago
				t.contact.Heard(cfg.Clock.Now().Add(-d))
				t.roundTook.Observe(d)
			}
		})
	if len(cfg.Via.URLs) > 0 {
		local := memberLocal(m, t.contact, cfg.Election)
		local.roundTook = t.roundTook.Get
		v := newViaRounds(cfg.Logger.Named("via"), cfg.Via, cfg.Clock, local, m.LinearizableReadNotify, cfg.Registerer)
		registerHubRounds(cfg.Registerer, t.fresh.HubRounds)
		t.fresh.via, t.fresh.shared, t.fresh.hubMax = v.round, v.useHub, cfg.Via.InFlight
	}
	t.fresh.idleInterval = cfg.IdleInterval
	t.fresh.quietInterval = cfg.QuietInterval
	t.fresh.batch.maxWait = cfg.BatchMaxWait
	return t, nil
}

// RoundTime is how long the member's own ReadIndex rounds take lately (its
// round trip to the leader, followed erring long; see RoundTime), 0 before
// the first.
func (t *Tracker) RoundTime() time.Duration { return t.roundTook.Get() }

// Freshness is the member's freshness tracker.
func (t *Tracker) Freshness() *Freshness { return t.fresh }

// Contact is the member's leader-contact tracker.
func (t *Tracker) Contact() *LeaderContact { return t.contact }

// Run runs the freshness loop and leader-contact sampling until ctx ends,
// and returns once both have.
func (t *Tracker) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// A sample every quarter election timeout: a lost leader shows
		// within 1.25 election timeouts at most.
		t.contact.Run(ctx, t.election/4)
	}()
	t.fresh.Run(ctx)
	wg.Wait()
}

// memberLocal is what m knows, for rounds through hubs: the cluster and its
// member list (replicated by raft), its term, commit index and applied
// index, and whether its raft heard from the leader within an election
// timeout.
func memberLocal(m Member, contact *LeaderContact, election time.Duration) viaLocal {
	return viaLocal{
		cluster:   idHex(m.ClusterID()),
		members:   m.Peers,
		term:      m.Term,
		committed: m.CommittedIndex,
		applyWait: m.ApplyWait,
		contact:   func() bool { return contact.HeardWithin(election) },
	}
}
