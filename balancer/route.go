package balancer

import (
	"context"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
)

// route is where a call should go.
type route int

const (
	// routeWrite goes to the leader (the default for anything unmarked).
	routeWrite route = iota
	// routeRead goes to a replica, or to the voters if none is healthy.
	routeRead
	// routeVoterRead is a read that a learner refused: it goes to a voter.
	routeVoterRead
)

func (r route) String() string {
	switch r {
	case routeRead:
		return "read"
	case routeVoterRead:
		return "voter-read"
	}
	return "write"
}

type routeKey struct{}

func withRoute(ctx context.Context, r route) context.Context {
	return context.WithValue(ctx, routeKey{}, r)
}

func routeOf(ctx context.Context) route {
	r, _ := ctx.Value(routeKey{}).(route)
	return r
}

const (
	methodRange = "/etcdserverpb.KV/Range"
	methodTxn   = "/etcdserverpb.KV/Txn"
	methodWatch = "/etcdserverpb.Watch/Watch"
)

// classify says where a unary call goes: Range and read-only Txn are reads.
func classify(method string, req any) route {
	switch method {
	case methodRange:
		return routeRead
	case methodTxn:
		if t, ok := req.(*pb.TxnRequest); ok && readOnly(t) {
			return routeRead
		}
	}
	return routeWrite
}

// readOnly reports a transaction with nothing but ranges in either branch,
// nested transactions included: etcd's own rule (txn.IsTxnReadonly).
func readOnly(t *pb.TxnRequest) bool {
	for _, ops := range [][]*pb.RequestOp{t.Success, t.Failure} {
		for _, op := range ops {
			switch r := op.Request.(type) {
			case *pb.RequestOp_RequestRange:
			case *pb.RequestOp_RequestTxn:
				if !readOnly(r.RequestTxn) {
					return false
				}
			default:
				return false
			}
		}
	}
	return true
}

// unaryInterceptor marks each call's route for the picker, and sends a read
// that a learner refused (a stock etcd learner refuses linearizable reads)
// again to the voters: reads are safe to repeat. A response from a newer
// raft term than the balancer knows means a new leader: it looks at once.
func (b *Balancer) unaryInterceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	r := classify(method, req)
	err := invoker(withRoute(ctx, r), method, req, reply, cc, opts...)
	if r == routeRead && isLearnerRefusal(err) {
		err = invoker(withRoute(ctx, routeVoterRead), method, req, reply, cc, opts...)
	}
	if h, ok := reply.(interface{ GetHeader() *pb.ResponseHeader }); ok && err == nil {
		if known := b.term.Load(); known != 0 && h.GetHeader().GetRaftTerm() > known {
			b.lookNow()
		}
	}
	return err
}

// streamInterceptor marks watches as reads; other streams (lease
// keep-alives, snapshots) go to the leader.
func streamInterceptor(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	r := routeWrite
	if method == methodWatch {
		r = routeRead
	}
	return streamer(withRoute(ctx, r), desc, cc, method, opts...)
}

// isLearnerRefusal reports etcd's "rpc not supported for learner".
func isLearnerRefusal(err error) bool {
	return err != nil && rpctypes.ErrorDesc(err) == rpctypes.ErrorDesc(rpctypes.ErrGRPCNotSupportedForLearner)
}
