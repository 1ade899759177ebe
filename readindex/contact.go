package readindex

import (
	"context"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// contactSample is one look at the member: whom its raft takes for leader,
// and how much raft traffic its transport has received from that member.
type contactSample struct {
	leader   uint64
	received float64
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
	clock clockwork.Clock
	lead  func() uint64
	src   ContactSource

	mu struct {
		sync.Mutex
		prev contactSample
		last time.Time
	}
}

// NewLeaderContact returns a tracker that counts the member as having heard
// from its leader now (it has just caught up) and learns more from samples:
// whom lead (raft: Member.Lead) names leader, and src's count for it.
func NewLeaderContact(clock clockwork.Clock, lead func() uint64, src ContactSource) *LeaderContact {
	c := &LeaderContact{clock: clock, lead: lead, src: src}
	c.mu.prev = c.sample()
	c.mu.last = clock.Now()
	return c
}

func (c *LeaderContact) sample() contactSample {
	s := contactSample{leader: c.lead()}
	if s.leader != 0 {
		s.received = c.src.ReceivedFrom(s.leader)
	}
	return s
}

// Observe takes one sample.
func (c *LeaderContact) Observe() {
	s := c.sample()
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.leader != 0 && (s.leader != c.mu.prev.leader || s.received != c.mu.prev.received) {
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
	return c.mu.prev.leader, c.mu.last
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
