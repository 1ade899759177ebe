package readpath

import (
	"context"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.etcd.io/etcd/client/pkg/v3/types"
)

// peerReceivedBytes is etcd's count of raft bytes a member has received,
// labelled by the sending member (rafthttp: every message of the stream and
// pipeline transports, heartbeats included).
const peerReceivedBytes = "etcd_network_peer_received_bytes_total"

// ContactSample is one look at the member's raft transport: whom it takes
// for leader, and how many raft bytes it has received from that member.
type ContactSample struct {
	Leader   uint64
	Received float64
}

// LeaderContact knows when the replica last heard from its leader, by raft's
// own traffic rather than by any request of the replica's: a learner never
// campaigns, so its raft keeps naming the last leader it heard from however
// long ago that was, but the bytes its transport receives from that member
// stop when the link does. Every heartbeat (each --heartbeat-interval) moves
// them, whatever --freshness-interval is.
//
// Invariant: Last is the latest time at which a sample saw the leader's
// received-bytes count move (or the leader change, which raft does only on a
// message from the new leader), or at which a freshness round that reached
// the leader started — whichever is later.
type LeaderContact struct {
	clock  clockwork.Clock
	sample func() ContactSample

	mu struct {
		sync.Mutex
		prev ContactSample
		last time.Time
	}
}

// NewLeaderContact returns a tracker that counts the member as having heard
// from its leader now (it has just caught up) and learns more from sample.
func NewLeaderContact(clock clockwork.Clock, sample func() ContactSample) *LeaderContact {
	c := &LeaderContact{clock: clock, sample: sample}
	c.mu.prev = sample()
	c.mu.last = clock.Now()
	return c
}

// Observe takes one sample.
func (c *LeaderContact) Observe() {
	s := c.sample()
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.Leader != 0 && (s.Leader != c.mu.prev.Leader || s.Received != c.mu.prev.Received) {
		c.mu.last = now
	}
	c.mu.prev = s
}

// Heard records other proof of contact, such as a completed ReadIndex round
// that started at t.
func (c *LeaderContact) Heard(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.mu.last) {
		c.mu.last = t
	}
}

// Last returns the leader the member knows (0 for none) and when it was last
// heard from.
func (c *LeaderContact) Last() (leader uint64, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.prev.Leader, c.mu.last
}

// HeardWithin reports a known leader heard from within d.
func (c *LeaderContact) HeardWithin(d time.Duration) bool {
	leader, at := c.Last()
	return leader != 0 && c.clock.Since(at) <= d
}

// Run samples every period until ctx ends; the caller owns the loop.
func (c *LeaderContact) Run(ctx context.Context, period time.Duration) {
	t := c.clock.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
			c.Observe()
		}
	}
}

// etcdContactSample samples a member through etcd's own metrics in g (the
// registry etcd's rafthttp registers on: prometheus.DefaultGatherer).
func etcdContactSample(g prometheus.Gatherer, leader func() uint64) func() ContactSample {
	return func() ContactSample {
		s := ContactSample{Leader: leader()}
		if s.Leader == 0 {
			return s
		}
		s.Received = receivedFrom(g, types.ID(s.Leader).String())
		return s
	}
}

func receivedFrom(g prometheus.Gatherer, from string) float64 {
	mfs, err := g.Gather()
	if err != nil && len(mfs) == 0 {
		return 0
	}
	for _, mf := range mfs {
		if mf.GetName() != peerReceivedBytes {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labelIs(m, "From", from) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func labelIs(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue() == value
		}
	}
	return false
}
