package readindex

import "context"

// Member is what the ReadIndex machinery needs of the replica's etcd member,
// declared here, where it is used, as etcd's read package declares the
// server it needs. *etcdserver.EtcdServer has the first five methods; the
// front's adapter (readpath/member.go) adds the cluster's identity and
// member list, which etcd gives as its own types. Nothing here links an
// etcd server package.
type Member interface {
	// LinearizableReadNotify returns once a ReadIndex through the leader,
	// requested after the call, is applied here: an own round.
	LinearizableReadNotify(ctx context.Context) error
	// Lead is the member raft takes for leader; 0 for none.
	Lead() uint64
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

// ContactSource tells how much raft traffic the member has received from
// another member: a count that moves with every raft message from it,
// heartbeats included, and stops when the link does. LeaderContact reads it
// for the member raft names leader.
//
// etcd keeps this in its raft transport (rafthttp), which the member does not
// expose; in a replica it is read from the transport's
// etcd_network_peer_received_bytes_total (readpath/contact_metric.go says
// why, and what else was looked at).
type ContactSource interface {
	// ReceivedFrom is the count for member id; 0 if none is known.
	ReceivedFrom(id uint64) float64
}
