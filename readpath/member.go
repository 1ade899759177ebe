package readpath

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/etcdserver"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3election"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3lock"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3rpc"
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

// Member is a learner replica's member as the front's Source: a store that
// raft keeps, proved fresh by ReadIndex rounds through the leader, whose
// writes, leases, auth and member calls etcd's own handlers serve (raft
// forwards their proposals to the leader; they check auth themselves).
type Member struct {
	srv     *etcdserver.EtcdServer
	contact readindex.ContactSource
}

var _ Source = (*Member)(nil)

// NewMember is srv as the front's Source; leader contact is read from
// etcd's raft transport's metrics on g (nil: prometheus.DefaultGatherer,
// where etcd registers them).
func NewMember(srv *etcdserver.EtcdServer, g prometheus.Gatherer) *Member {
	if g == nil {
		g = prometheus.DefaultGatherer
	}
	return &Member{srv: srv, contact: newMetricContact(g)}
}

func (m *Member) Server() *etcdserver.EtcdServer { return m.srv }

func (m *Member) Rounds() readindex.Source {
	return readindex.Source{Prover: etcdMember{m.srv}, Lead: m.srv.Lead, Contact: m.contact, Raft: etcdMember{m.srv}}
}

// Progress is the member's applied index (a snapshot counted) and the
// commit index the leader told it.
func (m *Member) Progress() (applied, committed uint64) {
	return AppliedIndex(m.srv), m.srv.CommittedIndex()
}

// Services are etcd's own, on the member, as embed serves them on a voter:
// lock and election over an in-process client of the member; AuthStatus
// answered in the read mode asked (authServer).
func (m *Member) Services(h Host) (Services, error) {
	s := m.srv
	v3c := v3client.New(s)
	return Services{
		KV:          v3rpc.NewQuotaKVServer(s),
		Lease:       v3rpc.NewQuotaLeaseServer(s),
		Cluster:     v3rpc.NewClusterServer(s),
		Auth:        &authServer{AuthServer: v3rpc.NewAuthServer(s), readMode: h.ReadMode, srv: s},
		Maintenance: NewMaintenanceServer(s),
		Lock:        v3lock.NewLockServer(v3c),
		Election:    v3election.NewElectionServer(v3c),
		Chain:       func() []string { return []string{s.MemberID().String()} },
		// etcd's linearizable_read is a ReadIndex through the leader, as
		// the member's own rounds are.
		ProvesFreshness: true,
		ServesHubs:      true,
		Close:           func() { _ = v3c.Close() },
	}, nil
}

// authServer is a learner replica's Auth service: etcd's, but AuthStatus
// is answered by the replica in the read mode the caller asks (strong by
// default; bounded with wire.MaxStalenessKey, as a replica fed by this one
// asks every period), where etcd proposes it through raft, an entry for
// the leader and every member.
type authServer struct {
	pb.AuthServer
	readMode func(ctx context.Context, bounded bool) error
	srv      *etcdserver.EtcdServer
}

func (a *authServer) AuthStatus(ctx context.Context, _ *pb.AuthStatusRequest) (*pb.AuthStatusResponse, error) {
	bound, err := stalenessBound(ctx, 0)
	if err != nil {
		return nil, grpcError(err)
	}
	if err := a.readMode(ctx, bound > 0); err != nil {
		return nil, err
	}
	as := a.srv.AuthStore()
	return &pb.AuthStatusResponse{Header: &pb.ResponseHeader{ClusterId: uint64(a.srv.Cluster().ID()), MemberId: uint64(a.srv.MemberID()),
		Revision: a.srv.KV().Rev(), RaftTerm: a.srv.Term()}, Enabled: as.IsAuthEnabled(), AuthRevision: as.Revision()}, nil
}
