package readpath

import (
	"context"
	"fmt"
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/etcdserver/txn"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/understudy-kv/understudy/readindex"
)

// Cascade is what the front serves a cascaded replica's store with
// (package cascade): the store is a private member that only its Applier
// writes, so every client write, lease, auth, member and alarm call goes
// to the upstreams, and every answer names the source cluster.
type Cascade struct {
	// Rounds is the store as the ReadIndex machinery needs it: a round
	// asks an upstream for a linearizable revision.
	Rounds readindex.Source
	// Upstream is a client of the upstreams, for what is forwarded.
	Upstream *clientv3.Client
	// Cluster is the source cluster's ID, in every answer's header.
	Cluster uint64
	// Leader is the source's leader as the upstream last said (Status);
	// Quota the source's backend quota (Status's DbSizeQuota).
	Leader func() uint64
	Quota  func() int64
	// WaitRevision returns once the store holds revision rev.
	WaitRevision func(ctx context.Context, rev int64) error
	// CheckWrite checks the answer of a write forwarded when the store was
	// at revision atForward (another history's is refused, and fences the
	// store).
	CheckWrite func(atForward int64, h *pb.ResponseHeader) error
	// Progress is the store's revision and the source's newest reported
	// (/readyz's caught_up compares them, as entries for a learner).
	Progress func() (applied, source int64)
	// Chain names the replica and its upstreams (wire.UpstreamChainKey).
	Chain func() []string
	// Fence is cancelled, with the reason as its cause, once the store
	// must not be served (another history, a divergence, a bootstrap
	// again): every call is refused with it (Unavailable), and every
	// stream open then ends with it. Enter admits each call to the store
	// until then: its context ends at the fence, and its leave lets the
	// store close once every call has left.
	Fence context.Context
	Enter func(ctx context.Context) (context.Context, func(), error)
	// Stalled is nil while the store follows an upstream, else why not
	// (/readyz's upstream check).
	Stalled func() error
	// Permit checks a call served from the store against the source's
	// auth; IssueAt, called before an Authenticate is forwarded, returns
	// what records the token the source issued (cascade.Store's).
	Permit  Permit
	IssueAt func(ctx context.Context) (func(token, user string), error)
}

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
	at := k.rev()
	resp, err := k.up.Put(forwardMD(ctx), r)
	return resp, k.applied(ctx, at, resp.GetHeader(), err)
}

func (k *forwardedKV) DeleteRange(ctx context.Context, r *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
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

// fenceUnary and fenceStream refuse every call once the store must not be
// served (Cascade.Fence), and end every stream open then, saying why:
// Unavailable, on which clients try again (clientv3 resumes a watch).
func fenceUnary(c *Cascade) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, leave, err := c.Enter(ctx)
		if err != nil {
			return nil, fenced(c.Fence)
		}
		defer leave()
		resp, err := handler(ctx, req)
		if _, isStatus := status.FromError(err); err != nil && !isStatus && fenced(c.Fence) != nil {
			// The fence's, said as such (an error that already has a
			// status stays: a forwarded write's says it was applied).
			err = fenced(c.Fence)
		}
		return resp, err
	}
}

func fenceStream(c *Cascade) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, leave, err := c.Enter(ss.Context())
		if err != nil {
			return fenced(c.Fence)
		}
		defer leave()
		ctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		stop := context.AfterFunc(c.Fence, func() { cancel(fenced(c.Fence)) })
		defer stop()
		err = handler(srv, &leaderStream{ServerStream: ss, ctx: causeContext{ctx}, cancel: cancel})
		if ferr := fenced(c.Fence); ferr != nil {
			return ferr
		}
		return err
	}
}

// fenced is the refusal of a fenced store's calls, nil while it may be
// served.
func fenced(fence context.Context) error {
	if fence.Err() == nil {
		return nil
	}
	return status.Error(codes.Unavailable, "understudy: this cascaded replica does not serve its store: "+context.Cause(fence).Error())
}
