package readpath

import (
	"context"
	"errors"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/server/v3/auth"
	"go.etcd.io/etcd/server/v3/etcdserver"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3rpc"
)

// maintenanceServer is etcd's Maintenance service (with its auth checks)
// acting on the replica's own store: Status describes the replica (learner,
// applied index, leader).
//
// Status goes through etcd's handler, then reports the applied index a
// snapshot moves too (AppliedIndex): etcd's stays where it was until the
// next entry, and a replica caught up by a snapshot in a quiet cluster
// would look thousands of entries behind to `replica status`, `replica
// promote` and `etcdctl endpoint status` for as long as the cluster stays
// quiet.
//
// Defragment alone cannot go through etcd's handler: it calls a health
// notifier that only etcd's own gRPC server can supply (given nil it panics
// and takes the process down). So Defragment makes the check etcd's
// authMaintenanceServer makes for it (the caller must be an admin: root, or
// anyone with auth off) and then defragments, as etcd's handler does.
type maintenanceServer struct {
	pb.MaintenanceServer
	srv *etcdserver.EtcdServer
}

// NewMaintenanceServer is etcd's Maintenance on srv, as a front serves it
// (see maintenanceServer).
func NewMaintenanceServer(srv *etcdserver.EtcdServer) pb.MaintenanceServer {
	return &maintenanceServer{MaintenanceServer: v3rpc.NewMaintenanceServer(srv, nil), srv: srv}
}

func (m *maintenanceServer) Status(ctx context.Context, r *pb.StatusRequest) (*pb.StatusResponse, error) {
	resp, err := m.MaintenanceServer.Status(ctx, r)
	if err != nil {
		return nil, err
	}
	resp.RaftAppliedIndex = max(resp.RaftAppliedIndex, AppliedIndex(m.srv))
	return resp, nil
}

func (m *maintenanceServer) Defragment(ctx context.Context, _ *pb.DefragmentRequest) (*pb.DefragmentResponse, error) {
	ai, err := m.srv.AuthInfoFromCtx(ctx)
	if err == nil {
		err = m.srv.AuthStore().IsAdminPermitted(ai)
	}
	if err != nil {
		return nil, AuthError(err)
	}
	if err := m.srv.Defragment(); err != nil {
		return nil, rpctypes.Error(err)
	}
	return &pb.DefragmentResponse{Header: m.header()}, nil
}

// AuthError is etcd's togRPCError for the errors of an auth check.
func AuthError(err error) error {
	for _, e := range []struct{ auth, grpc error }{
		{auth.ErrUserEmpty, rpctypes.ErrGRPCUserEmpty},
		{auth.ErrPermissionDenied, rpctypes.ErrGRPCPermissionDenied},
		{auth.ErrInvalidAuthToken, rpctypes.ErrGRPCInvalidAuthToken},
		{auth.ErrAuthOldRevision, rpctypes.ErrGRPCAuthOldRevision},
		{auth.ErrUserNotFound, rpctypes.ErrGRPCUserNotFound},
		{auth.ErrAuthNotEnabled, rpctypes.ErrGRPCAuthNotEnabled},
	} {
		if errors.Is(err, e.auth) {
			return e.grpc
		}
	}
	return rpctypes.Error(err)
}

func (m *maintenanceServer) header() *pb.ResponseHeader {
	return &pb.ResponseHeader{
		ClusterId: uint64(m.srv.Cluster().ID()),
		MemberId:  uint64(m.srv.MemberID()),
		Revision:  m.srv.KV().Rev(),
		RaftTerm:  m.srv.Term(),
	}
}
