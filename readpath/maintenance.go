package readpath

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/server/v3/etcdserver"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3rpc"
)

// maintenanceServer is etcd's Maintenance service acting on the replica's
// own store (Status describes the replica: learner, applied index, leader).
// Defragment is served here because etcd's handler calls a health notifier
// that only etcd's own gRPC server can supply: given nil it panics and takes
// the process down.
type maintenanceServer struct {
	pb.MaintenanceServer
	srv *etcdserver.EtcdServer
}

func newMaintenanceServer(srv *etcdserver.EtcdServer) *maintenanceServer {
	return &maintenanceServer{MaintenanceServer: v3rpc.NewMaintenanceServer(srv, nil), srv: srv}
}

func (m *maintenanceServer) Defragment(ctx context.Context, _ *pb.DefragmentRequest) (*pb.DefragmentResponse, error) {
	if err := m.srv.Defragment(); err != nil {
		return nil, rpctypes.Error(err)
	}
	return &pb.DefragmentResponse{Header: m.header()}, nil
}

func (m *maintenanceServer) header() *pb.ResponseHeader {
	return &pb.ResponseHeader{
		ClusterId: uint64(m.srv.Cluster().ID()),
		MemberId:  uint64(m.srv.MemberID()),
		Revision:  m.srv.KV().Rev(),
		RaftTerm:  m.srv.Term(),
	}
}
