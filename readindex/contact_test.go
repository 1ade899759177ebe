package readindex

import (
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// fakeTransport is raft's leader and the transport's count of what came
// from each member.
type fakeTransport struct {
	mu       sync.Mutex
	leader   uint64
	received map[uint64]float64
}

var _ ContactSource = (*fakeTransport)(nil)

func (f *fakeTransport) set(leader uint64, received float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leader = leader
	if f.received == nil {
		f.received = map[uint64]float64{}
	}
	f.received[leader] = received
}

func (f *fakeTransport) lead() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leader
}

func (f *fakeTransport) ReceivedFrom(id uint64) float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.received[id]
}

func TestLeaderContactFollowsRaftTrafficNotRounds(t *testing.T) {
	clock := clockwork.NewFakeClock()
	tr := &fakeTransport{}
	tr.set(7, 100)
	c := NewLeaderContact(clock, tr.lead, tr)
	election := time.Second

	if !c.HeardWithin(election) {
		t.Fatal("a replica that has just caught up counts as in contact")
	}
	// Heartbeats keep arriving: bytes move every sample.
	for i := range 20 {
		clock.Advance(250 * time.Millisecond)
		tr.set(7, float64(200+i))
		c.Observe()
		if !c.HeardWithin(election) {
			t.Fatalf("sample %d: in contact while bytes arrive, no freshness round needed", i)
		}
	}
	// The link is cut: the member still names leader 7, but nothing arrives.
	for range 4 {
		clock.Advance(250 * time.Millisecond)
		c.Observe()
	}
	if !c.HeardWithin(election) {
		t.Fatal("lost contact after exactly one election timeout; want lost only after more")
	}
	clock.Advance(250 * time.Millisecond)
	c.Observe()
	if c.HeardWithin(election) {
		t.Fatal("still in contact 1.25 election timeouts after the last byte from the leader")
	}
	if leader, _ := c.Last(); leader != 7 {
		t.Fatalf("leader = %x, want 7", leader)
	}
	// A completed round proves contact as of its start.
	c.Heard(clock.Now().Add(-100 * time.Millisecond))
	if !c.HeardWithin(election) {
		t.Fatal("a completed round did not count as contact")
	}
	// A new leader is contact: raft changes leader only on its message.
	clock.Advance(5 * time.Second)
	tr.set(9, 0)
	c.Observe()
	if !c.HeardWithin(election) {
		t.Fatal("a leader change did not count as contact")
	}
	// No leader known is never contact.
	tr.set(0, 0)
	c.Observe()
	if c.HeardWithin(time.Hour) {
		t.Fatal("in contact with no leader known")
	}
}
