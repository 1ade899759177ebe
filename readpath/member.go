package readpath

import (
	"context"

	"go.etcd.io/etcd/server/v3/etcdserver"
	"go.etcd.io/etcd/server/v3/storage/schema"

	"github.com/understudy-kv/understudy/readindex"
)

// etcdMember is the replica's embedded member as the ReadIndex machinery
// needs it: its proofs (readindex.Prover: a ReadIndex round through the
// leader) and its raft (readindex.Raft: *etcdserver.EtcdServer has the raft
// methods, and the cluster's identity and member list are turned from
// etcd's types into readindex's here).
type etcdMember struct{ *etcdserver.EtcdServer }

var (
	_ readindex.Prover = etcdMember{}
	_ readindex.Raft   = etcdMember{}
)

// Prove does a ReadIndex round through the leader and waits until it is
// applied here (etcd's LinearizableReadNotify): a proof as of the request.
func (m etcdMember) Prove(ctx context.Context, _ readindex.ProofRequest) (readindex.Proof, error) {
	return readindex.Proof{}, m.LinearizableReadNotify(ctx)
}

// ClusterID is the cluster's ID.
func (m etcdMember) ClusterID() uint64 { return uint64(m.Cluster().ID()) }

// Peers are the cluster's members other than this one, with their client
// URLs, by the member's raft-replicated member list.
func (m etcdMember) Peers() []readindex.Peer {
	ms := m.Cluster().Members()
	self := m.MemberID()
	out := make([]readindex.Peer, 0, len(ms))
	for _, p := range ms {
		if p.ID != self {
			out = append(out, readindex.Peer{ID: uint64(p.ID), ClientURLs: p.ClientURLs})
		}
	}
	return out
}

// AppliedIndex is how far member s has applied its raft log, a snapshot
// included. etcd's own AppliedIndex() moves only with applied entries:
// applySnapshot leaves it where it was (v3.7.3, server.go), so after a
// snapshot and before the next entry it trails the member's state by the
// whole snapshot. The backend's consistent index is the snapshot's index
// as soon as it is applied (etcd checks so, verifySnapshotIndex), and
// trails applied entries only until the backend's next commit: the larger
// of the two is the applied index exactly.
func AppliedIndex(s *etcdserver.EtcdServer) uint64 {
	ci, _ := schema.ReadConsistentIndex(s.Backend().ReadTx())
	return max(s.AppliedIndex(), ci)
}
