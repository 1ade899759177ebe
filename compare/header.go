package compare

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/understudy-kv/understudy/wire"
)

// A replica reports, in the header of every answer, the staleness bound it
// can prove (wire.StalenessBoundKey). compare records it with each read and
// checks it against the staleness it measures (see reportedBoundViolated):
// a bound smaller than what the read missed is a lie.

// DialOptions are the gRPC options of every client compare reads through:
// they let a read collect its answer's header (see withHeader). Give them
// to clientv3.Config.DialOptions of clients made outside this package.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(collectHeader)}
}

type headerSlotKey struct{}

// withHeader returns a context whose unary calls ask for a replica's
// answer header (wire.FreshnessKey: replicas send it only when asked, by
// default) and store their response header in *md.
func withHeader(ctx context.Context, md *metadata.MD) context.Context {
	ctx = metadata.AppendToOutgoingContext(ctx, wire.FreshnessKey, "1")
	return context.WithValue(ctx, headerSlotKey{}, md)
}

func collectHeader(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if md, ok := ctx.Value(headerSlotKey{}).(*metadata.MD); ok {
		opts = append(opts, grpc.Header(md))
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// reportedBound is the staleness bound in an answer's header, if it has
// one that parses.
func reportedBound(md metadata.MD) (time.Duration, bool) {
	v := md.Get(wire.StalenessBoundKey)
	if len(v) != 1 {
		return 0, false
	}
	d, err := time.ParseDuration(v[0])
	if err != nil || d < 0 {
		return 0, false
	}
	return d, true
}

// reportedBoundViolated says whether a read that missed writes acknowledged
// up to stalenessMS before it was sent reported a smaller bound. The bound
// is computed at the replica between the read's call and its return, so it
// claims at least every write acknowledged before call − bound: missing one
// of those is a violation.
func reportedBoundViolated(r Read, stalenessMS float64) bool {
	return r.Reported && stalenessMS > ms(r.Bound)
}
