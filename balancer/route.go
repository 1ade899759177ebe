package balancer

import (
	"context"
	"time"

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
	// routeVoterRead is a read that a learner refused, or one with a
	// staleness budget that no replica fits: it goes to a voter.
	routeVoterRead
	// routeBoundedRead is a serializable read with a staleness budget: it
	// goes to a replica whose reported staleness fits the budget, or the
	// picker fails it so that it is sent to a voter.
	routeBoundedRead
)

func (r route) String() string {
	switch r {
	case routeRead:
		return "read"
	case routeVoterRead:
		return "voter-read"
	case routeBoundedRead:
		return "bounded-read"
	}
	return "write"
}

// call is one call's route, its staleness budget (routeBoundedRead), and
// the endpoint the picker chose for it, which the interceptor reads once
// the call is done (picks happen in the caller's goroutine).
type call struct {
	r      route
	budget time.Duration
	picked *endpoint
}

type callKey struct{}

func withRoute(ctx context.Context, r route) context.Context {
	return withCall(ctx, &call{r: r})
}

func withCall(ctx context.Context, c *call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

// callOf is the call's note; an unmarked call is a write.
func callOf(ctx context.Context) *call {
	if c, ok := ctx.Value(callKey{}).(*call); ok {
		return c
	}
	return &call{r: routeWrite}
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
//
// A serializable read with a staleness budget (WithMaxStaleness) is a
// bounded read (boundedRead); every read learns the staleness bound that
// the replica which served it reports.
func (b *Balancer) unaryInterceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	r := classify(method, req)
	if r == routeRead && serializableRead(req) {
		if budget, ok := budgetOf(ctx); ok {
			return b.boundedRead(ctx, budget, method, req, reply, cc, invoker, opts)
		}
	}
	var err error
	if r == routeRead {
		c := &call{r: r}
		err = b.invokeRead(withCall(ctx, c), c, method, req, reply, cc, invoker, opts)
	} else {
		err = invoker(withRoute(ctx, r), method, req, reply, cc, opts...)
	}
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
