package source

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/understudy-kv/understudy/cascade"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/server/v3/etcdserver/txn"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// forwardedKV is a cascaded replica's KV: reads from the local store (the
// read modes are kvServer's), writes forwarded to the upstreams and
// answered once the store holds their revision (read-your-writes, as a
// learner replica's forwarded writes are).
type forwardedKV struct {
	pb.UnsafeKVServer
	permit Permit
	local  pb.KVServer
	up     pb.KVClient
	rev    func() int64
	check  func(atForward int64, h *pb.ResponseHeader) error
	wait   func(ctx context.Context, rev int64) error
	// compact compacts the local store at rev, once it holds rev.
	compact func(ctx context.Context, rev int64) error
	// limits are what a write must fit to be forwarded.
	limits limits
}

// limits are the front's --max-request-bytes and --max-txn-ops, which a
// write must fit before it is forwarded: a learner replica's member checks
// its own proposals against its own, whatever the leader's.
type limits struct{ maxBytes, maxOps int }

// check refuses a write as a member refuses a proposal: a transaction with
// more operations than maxOps as etcd's handlers count them (v3rpc's
// checkTxnRequest: the most of its compares, success and failure
// operations, a nested transaction within what its parent leaves), and a
// raft request larger than maxBytes (measured with a header as large as a
// member's, less the user name, which only the upstream knows). etcd's
// checks of the request itself (an empty key, duplicate keys) are the
// upstream's: a request both invalid and over a limit is refused for the
// limit here.
func (l limits) check(r *pb.InternalRaftRequest) error {
	if r.Txn != nil && tooManyOps(r.Txn, l.maxOps) {
		return rpctypes.ErrGRPCTooManyOps
	}
	r.Header = &pb.RequestHeader{ID: math.MaxUint64, AuthRevision: math.MaxUint64}
	if proto.Size(r) > l.maxBytes {
		return rpctypes.ErrGRPCRequestTooLarge
	}
	return nil
}

func tooManyOps(r *pb.TxnRequest, maxOps int) bool {
	n := max(len(r.Compare), len(r.Success), len(r.Failure))
	if n > maxOps {
		return true
	}
	for _, op := range append(slices.Clip(r.Success), r.Failure...) {
		if t := op.GetRequestTxn(); t != nil && tooManyOps(t, maxOps-n) {
			return true
		}
	}
	return false
}

var _ pb.KVServer = (*forwardedKV)(nil)

func (k *forwardedKV) Range(ctx context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	if err := k.permit.rangeOK(ctx, r.Key, r.RangeEnd); err != nil {
		return nil, err
	}
	return k.local.Range(ctx, r)
}

func (k *forwardedKV) RangeStream(r *pb.RangeRequest, rs pb.KV_RangeStreamServer) error {
	if err := k.permit.rangeOK(rs.Context(), r.Key, r.RangeEnd); err != nil {
		return err
	}
	return k.local.RangeStream(r, rs)
}

func (k *forwardedKV) Put(ctx context.Context, r *pb.PutRequest) (*pb.PutResponse, error) {
	if err := k.limits.check(&pb.InternalRaftRequest{Put: r}); err != nil {
		return nil, err
	}
	at := k.rev()
	resp, err := k.up.Put(forwardMD(ctx), r)
	return resp, k.applied(ctx, at, resp.GetHeader(), err)
}

func (k *forwardedKV) DeleteRange(ctx context.Context, r *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	if err := k.limits.check(&pb.InternalRaftRequest{DeleteRange: r}); err != nil {
		return nil, err
	}
	at := k.rev()
	resp, err := k.up.DeleteRange(forwardMD(ctx), r)
	return resp, k.applied(ctx, at, resp.GetHeader(), err)
}

// Txn serves a read-only transaction from the local store (kvServer has
// made it fresh enough for its read mode) and forwards the others.
func (k *forwardedKV) Txn(ctx context.Context, r *pb.TxnRequest) (*pb.TxnResponse, error) {
	if txn.IsTxnReadonly(r) {
		if err := k.permit.txnOK(ctx, r); err != nil {
			return nil, err
		}
		return k.local.Txn(ctx, r)
	}
	if err := k.limits.check(&pb.InternalRaftRequest{Txn: r}); err != nil {
		return nil, err
	}
	at := k.rev()
	resp, err := k.up.Txn(forwardMD(ctx), r)
	return resp, k.applied(ctx, at, resp.GetHeader(), err)
}

func (k *forwardedKV) Compact(ctx context.Context, r *pb.CompactionRequest) (*pb.CompactionResponse, error) {
	resp, err := k.up.Compact(forwardMD(ctx), r)
	if err == nil {
		err = k.compact(ctx, r.Revision)
	}
	return resp, err
}

// applied checks the answer of a write forwarded when the store was at
// revision at and, if it succeeded, waits until the store holds its
// revision. A write applied that this replica cannot show says it was
// applied (Unavailable: the client must not take it for a failed one).
func (k *forwardedKV) applied(ctx context.Context, at int64, h *pb.ResponseHeader, err error) error {
	if err != nil {
		return err
	}
	if err := k.check(at, h); err != nil {
		err = fmt.Errorf("readpath: the write was applied upstream at revision %d, but its answer is of another history than this replica's store: %w", h.GetRevision(), err)
		return status.Error(codes.Unavailable, err.Error())
	}
	if err := k.wait(ctx, h.GetRevision()); err != nil {
		return status.Error(codes.Unavailable, fmt.Sprintf("readpath: the write was applied upstream at revision %d, but this replica did not hold it in time: %v", h.GetRevision(), err))
	}
	return nil
}

// forwardMD carries the request's metadata (require-leader, understudy's
// keys) on to the upstream.
func forwardMD(ctx context.Context) context.Context {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return ctx
	}
	out := metadata.MD{}
	for k, v := range md {
		if strings.HasPrefix(k, ":") || strings.HasPrefix(k, "grpc-") || k == "content-type" || k == "user-agent" || k == "authority" {
			continue
		}
		out[k] = v
	}
	return metadata.NewOutgoingContext(ctx, out)
}

// cascadeMaintenance is a cascaded replica's Maintenance: the local
// store's (status, snapshot, defragment, hashes), with alarms, leader moves
// and downgrades forwarded to the upstreams, and a Status that says the
// replica is no voter and names the source's leader. The local store runs
// with auth off: every method is written out here with the source's check
// (Unsafe…: a method etcd adds breaks the build instead of being served
// unchecked).
type cascadeMaintenance struct {
	pb.UnsafeMaintenanceServer
	local  pb.MaintenanceServer
	permit Permit
	up     pb.MaintenanceClient
	leader func() uint64
	quota  func() int64
}

var _ pb.MaintenanceServer = (*cascadeMaintenance)(nil)

func (m *cascadeMaintenance) Status(ctx context.Context, r *pb.StatusRequest) (*pb.StatusResponse, error) {
	if err := m.permit.userOK(ctx); err != nil {
		return nil, err
	}
	resp, err := m.local.Status(ctx, r)
	if err != nil {
		return nil, err
	}
	resp.IsLearner, resp.Leader, resp.DbSizeQuota = true, m.leader(), m.quota()
	return resp, nil
}

// Snapshot, Hash, HashKV and Defragment are an admin's, as on a member.
func (m *cascadeMaintenance) Snapshot(r *pb.SnapshotRequest, srv pb.Maintenance_SnapshotServer) error {
	if err := m.permit.adminOK(srv.Context()); err != nil {
		return err
	}
	return m.local.Snapshot(r, srv)
}

func (m *cascadeMaintenance) Hash(ctx context.Context, r *pb.HashRequest) (*pb.HashResponse, error) {
	if err := m.permit.adminOK(ctx); err != nil {
		return nil, err
	}
	return m.local.Hash(ctx, r)
}

func (m *cascadeMaintenance) HashKV(ctx context.Context, r *pb.HashKVRequest) (*pb.HashKVResponse, error) {
	if err := m.permit.adminOK(ctx); err != nil {
		return nil, err
	}
	return m.local.HashKV(ctx, r)
}

func (m *cascadeMaintenance) Defragment(ctx context.Context, r *pb.DefragmentRequest) (*pb.DefragmentResponse, error) {
	if err := m.permit.adminOK(ctx); err != nil {
		return nil, err
	}
	return m.local.Defragment(ctx, r)
}

func (m *cascadeMaintenance) Alarm(ctx context.Context, r *pb.AlarmRequest) (*pb.AlarmResponse, error) {
	return m.up.Alarm(forwardMD(ctx), r)
}

func (m *cascadeMaintenance) MoveLeader(ctx context.Context, r *pb.MoveLeaderRequest) (*pb.MoveLeaderResponse, error) {
	return m.up.MoveLeader(forwardMD(ctx), r)
}

func (m *cascadeMaintenance) Downgrade(ctx context.Context, r *pb.DowngradeRequest) (*pb.DowngradeResponse, error) {
	return m.up.Downgrade(forwardMD(ctx), r)
}

// header is what every answer of the front carries in its header.
type headered interface{ GetHeader() *pb.ResponseHeader }

// clusterHeaderUnary and clusterHeaderStream put the source cluster's ID in
// every answer's header: the local store is a cluster of its own, whose ID
// means nothing to a client.
func clusterHeaderUnary(cluster uint64) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		if h, ok := resp.(headered); ok && h.GetHeader() != nil {
			h.GetHeader().ClusterId = cluster
		}
		return resp, err
	}
}

func clusterHeaderStream(cluster uint64) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		return handler(srv, clusterStream{ServerStream: ss, cluster: cluster})
	}
}

type clusterStream struct {
	grpc.ServerStream
	cluster uint64
}

func (s clusterStream) SendMsg(m any) error {
	if h, ok := m.(headered); ok && h.GetHeader() != nil {
		h.GetHeader().ClusterId = s.cluster
	}
	return s.ServerStream.SendMsg(m)
}

// fenceUnary and fenceStream admit a call to the store until it is fenced
// (cascade.Store.Enter), refuse every call after, and end every stream
// open then, saying why: Unavailable, on which clients try again (clientv3
// resumes a watch).
func fenceUnary(st *cascade.Store) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, leave, err := st.Enter(ctx)
		if err != nil {
			return nil, fenced(st.Fence())
		}
		defer leave()
		resp, err := handler(ctx, req)
		if _, isStatus := status.FromError(err); err != nil && !isStatus && fenced(st.Fence()) != nil {
			// The fence's, said as such (an error that already has a
			// status stays: a forwarded write's says it was applied).
			err = fenced(st.Fence())
		}
		return resp, err
	}
}

func fenceStream(st *cascade.Store) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, leave, err := st.Enter(ss.Context())
		if err != nil {
			return fenced(st.Fence())
		}
		defer leave()
		err = handler(srv, fencedStream{ServerStream: ss, ctx: ctx})
		if ferr := fenced(st.Fence()); ferr != nil {
			return ferr
		}
		return err
	}
}

// fencedStream is a stream whose context ends at the fence.
type fencedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s fencedStream) Context() context.Context { return s.ctx }

// fenced is the refusal of a fenced store's calls, nil while it may be
// served.
func fenced(fence context.Context) error {
	if fence.Err() == nil {
		return nil
	}
	return status.Error(codes.Unavailable, "understudy: this cascaded replica does not serve its store: "+context.Cause(fence).Error())
}
