// Package readindex is a replica's ReadIndex machinery: how fresh its store
// is known to be (Freshness, with the batching of rounds in batchPolicy),
// when it last heard from its leader (LeaderContact), and rounds through
// other replicas (--read-index-via: viaRounds, hubHealth, the protocol in
// protocol.go).
//
// It needs of the store it proves fresh only what Source declares; it links
// no etcd package. The front (package readpath) builds a Tracker on its
// source (a learner's member, or a cascaded replica's store), waits on its
// Freshness for strong and bounded reads, and reads its LeaderContact for
// require-leader, /readyz and the answer headers.
package readindex

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
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
	// Settings are the operator's (see Settings).
	Settings
	// RoundTimeout bounds one round (etcd's request timeout).
	RoundTimeout time.Duration
	// Election is the member's election timeout: leader contact is sampled
	// every quarter of it, and hubs are asked only while the leader was
	// heard from within it.
	Election time.Duration
	// ViaClient makes the requests to hubs (TLS as the replica's towards
	// its cluster: a hub's certificate must verify against the cluster's
	// CA); nil means http.DefaultClient.
	ViaClient *http.Client
	// ViaToken, if set, logs the replica in (--user) for its requests to
	// hubs of an auth-enabled cluster; it is sent in the Authorization
	// header, as etcd's JSON gateway takes it. Without it, a hub with auth
	// on admits the replica by its client certificate only.
	ViaToken func(ctx context.Context) (string, error)
}

// via is the hubs' configuration the rounds through them run by.
func (c Config) via() ViaConfig {
	return ViaConfig{URLs: c.ViaURLs, Timeout: c.ViaTimeout, InFlight: c.ViaInFlight, Client: c.ViaClient, Token: c.ViaToken}
}

// Validate reports every missing or bad field.
func (c Config) Validate() error {
	var problems []error
	if c.Logger == nil {
		problems = append(problems, errors.New("readindex: Config.Logger is nil"))
	}
	if err := c.Settings.Validate(); err != nil {
		problems = append(problems, err)
	}
	if c.RoundTimeout <= 0 {
		problems = append(problems, fmt.Errorf("readindex: RoundTimeout %v: must be more than 0", c.RoundTimeout))
	}
	if c.Election <= 0 {
		problems = append(problems, fmt.Errorf("readindex: Election %v: must be more than 0", c.Election))
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

// New builds the machinery on src; Run starts it.
func New(cfg Config, src Source) (*Tracker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if src.Prover == nil || src.Lead == nil || src.Contact == nil {
		return nil, errors.New("readindex: Source needs a Prover, Lead and Contact")
	}
	if len(cfg.ViaURLs) > 0 && src.Raft == nil {
		return nil, errors.New("readindex: --read-index-via: rounds through hubs need a learner's raft (Source.Raft)")
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	t := &Tracker{election: cfg.Election}
	t.contact = NewLeaderContact(cfg.Clock, src.Lead, src.Contact)
	met := newMetrics(cfg.Registerer, func() float64 { return min(t.fresh.Age().Seconds(), math.MaxInt32) },
		func() float64 { return t.fresh.Period().Seconds() })
	t.fresh = NewFreshness(cfg.Logger, cfg.Clock, cfg.Interval, cfg.BatchInterval, cfg.RoundTimeout, src.Prover,
		func(d time.Duration, own bool, err error) {
			met.observeRound(d.Seconds(), err)
			if own && err == nil { // the leader answered a round that started d ago
				t.contact.Heard(cfg.Clock.Now().Add(-d))
				t.roundTook.Observe(d)
			}
		})
	if len(cfg.ViaURLs) > 0 {
		local := memberLocal(src.Raft, t.contact, cfg.Election)
		local.roundTook = t.roundTook.Get
		own := func(ctx context.Context) error { _, err := src.Prover.Prove(ctx, ProofRequest{}); return err }
		v := newViaRounds(cfg.Logger.Named("via"), cfg.via(), cfg.Clock, local, own, cfg.Registerer)
		registerHubRounds(cfg.Registerer, t.fresh.HubRounds)
		t.fresh.via, t.fresh.shared, t.fresh.hubMax = v.round, v.useHub, cfg.ViaInFlight
	}
	t.fresh.idleInterval = cfg.IdleInterval
	t.fresh.quietInterval = cfg.Quiet()
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
func memberLocal(m Raft, contact *LeaderContact, election time.Duration) viaLocal {
	return viaLocal{
		cluster:   idHex(m.ClusterID()),
		members:   m.Peers,
		term:      m.Term,
		committed: m.CommittedIndex,
		applyWait: m.ApplyWait,
		contact:   func() bool { return contact.HeardWithin(election) },
	}
}
