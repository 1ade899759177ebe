package cascade

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/readindex"
)

// member is the store as the ReadIndex machinery needs it
// (readindex.Member): a round asks an upstream for a linearizable revision
// (a strong Range: on a replica upstream, one of its own rounds, shared by
// every read waiting there; on a member, a linearizable read) and waits
// until the store holds it. Every write acknowledged before the round began
// is at or below that revision, so a local read after it is linearizable,
// as after a learner replica's round.
type member struct{ s *Store }

var (
	_ readindex.Member        = member{}
	_ readindex.ContactSource = member{}
)

// Member is the store as the front's ReadIndex machinery needs it.
func (s *Store) Member() readindex.Member { return member{s} }

// Contact counts what the upstreams send (events, progress): readindex's
// LeaderContact reads it for Lead's traffic.
func (s *Store) Contact() readindex.ContactSource { return member{s} }

// followingLead is the leader a cascaded replica names while it follows an
// upstream: the upstream stands for the source's leader (readindex's
// LeaderContact and the require-leader checks read it).
const followingLead = 1

func (m member) LinearizableReadNotify(ctx context.Context) error {
	if readindex.Background(ctx) {
		ctx = background(ctx)
	}
	resp, err := m.s.fwd.Get(ctx, probeKey, clientv3.WithCountOnly())
	if err != nil {
		return fmt.Errorf("cascade: a linearizable revision from the upstreams: %w", err)
	}
	return m.s.WaitRevision(ctx, resp.Header.Revision)
}

// Lead is followingLead while an upstream is followed, else 0.
func (m member) Lead() uint64 { return m.s.lead.Load() }

// Term and CommittedIndex are raft's, which a cascaded replica has none of:
// rounds through hubs (their only readers) are not offered to it.
func (m member) Term() uint64           { return 0 }
func (m member) CommittedIndex() uint64 { return uint64(m.s.SourceRevision()) }

// ApplyWait is closed once the store holds revision index.
func (m member) ApplyWait(index uint64) <-chan struct{} { return m.s.applied.Wait(index) }

func (m member) ClusterID() uint64           { return m.s.cluster }
func (m member) Peers() []readindex.Peer     { return nil }
func (m member) ReceivedFrom(uint64) float64 { return float64(m.s.contact.Load()) }
