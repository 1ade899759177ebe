package readindex

import (
	"context"
	"time"
)

// What the ReadIndex machinery needs of the store it proves fresh,
// declared here, where it is used, as etcd's read package declares the
// server it needs: a Source. A learner replica's member and a cascaded
// replica's store are its two kinds (readpath adapts the first, cascade
// the second); nothing here links an etcd package.

// Source is a store the machinery proves fresh.
type Source struct {
	// Prover proves the store fresh (own rounds).
	Prover Prover
	// Lead is who proves it, as a number: raft's leader for a learner's
	// member, the upstream followed for a cascaded replica; 0 for none.
	// Contact counts what was received from it: LeaderContact reads both.
	Lead    func() uint64
	Contact ContactSource
	// Raft, of a learner's member only (nil otherwise), is what rounds
	// through hubs (--read-index-via) need.
	Raft Raft
}

// Prover proves the store fresh: Prove returns once a proof asked after
// the call holds here. Every write acknowledged before the call is then
// visible in the store — or, for an aged proof, every write acknowledged
// Proof.Age before it.
type Prover interface {
	Prove(ctx context.Context, req ProofRequest) (Proof, error)
}

// ProofRequest says what a round may take for a proof.
type ProofRequest struct {
	// Background: no client's read waited for the round when it began
	// (freshness only, or replicas' upkeep: ForUpkeep). A prover that
	// asks another replica says so, so that the one asked does not count
	// it as client demand (wire.BackgroundKey).
	Background bool
	// AcceptAged is how much older than the request the proof may be: a
	// quiet replica's background round, which an upstream may answer from
	// its own last round (see Freshness). 0: the proof must be as of the
	// request.
	AcceptAged time.Duration
}

// Proof is what a round proved.
type Proof struct {
	// Aged: the proof is Age older than the request (taken under
	// ProofRequest.AcceptAged); it moves the store's freshness to the
	// round's start less Age, and serves no strong read (a read may have
	// begun waiting after the round began, and the proof predates it).
	Aged bool
	Age  time.Duration
}

// ProverFunc is a Prover whose proofs are as of the request: a ReadIndex
// round through the leader (etcd's LinearizableReadNotify).
type ProverFunc func(ctx context.Context) error

// Prove runs f.
func (f ProverFunc) Prove(ctx context.Context, _ ProofRequest) (Proof, error) { return Proof{}, f(ctx) }

// Raft is what rounds through hubs need of a learner's member: its raft
// term, commit and apply, and its cluster and member list (replicated by
// raft). *etcdserver.EtcdServer has the first three; readpath adapts the
// rest.
type Raft interface {
	// Term and CommittedIndex are the member's raft term and commit index.
	Term() uint64
	CommittedIndex() uint64
	// ApplyWait is closed once index is applied here.
	ApplyWait(index uint64) <-chan struct{}
	// ClusterID is the cluster's ID.
	ClusterID() uint64
	// Peers are the cluster's other members, by the member's own member
	// list (replicated through raft).
	Peers() []Peer
}

// Peer is a member of the replica's cluster as its own member list
// (replicated through raft) names it.
type Peer struct {
	ID         uint64
	ClientURLs []string
}

// ContactSource tells how much traffic the store has received from who
// proves it (Source.Lead): for a learner's member, raft traffic from a
// member — a count that moves with every raft message from it, heartbeats
// included, and stops when the link does; for a cascaded replica, what the
// upstream followed sent. LeaderContact reads it for Lead.
//
// etcd keeps the raft count in its transport (rafthttp), which the member
// does not expose; in a replica it is read from the transport's
// etcd_network_peer_received_bytes_total (readpath/contact_metric.go says
// why, and what else was looked at).
type ContactSource interface {
	// ReceivedFrom is the count for id; 0 if none is known.
	ReceivedFrom(id uint64) float64
}
