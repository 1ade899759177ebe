package balancer

import (
	"context"
	"errors"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/understudy-kv/understudy/wire"
)

// WithMaxStaleness gives the serializable reads made with ctx a staleness
// budget d: each goes to a replica whose last reported bound, aged by the
// time since it was reported, is within d, and the replica itself refuses
// to answer older than d (it is sent d as wire.MaxStalenessKey: a bounded
// read). When no replica fits, or the one tried cannot prove d in time, the
// read goes to a voter as a linearizable read. So no read made with a
// budget returns state older than d. Strong (default) reads ignore it.
// Setting wire.MaxStalenessKey in the outgoing metadata yourself does the
// same. d of 0 or less returns ctx as it is, and so does a ctx that has a
// budget already: the first one set counts, as on the replica.
func WithMaxStaleness(ctx context.Context, d time.Duration) context.Context {
	if md, ok := metadata.FromOutgoingContext(ctx); d <= 0 || (ok && len(md.Get(wire.MaxStalenessKey)) > 0) {
		return ctx
	}
	v := d.String()
	return context.WithValue(metadata.AppendToOutgoingContext(ctx, wire.MaxStalenessKey, v), budgetKey{}, v)
}

// budgetKey holds the budget WithMaxStaleness set, as sent, so that the
// interceptor need not copy the outgoing metadata to find it.
type budgetKey struct{}

// budgetOf is the call's staleness budget, as the replica reads it (the
// first value of wire.MaxStalenessKey); false if none, or not a duration
// of more than 0 (a replica refuses a malformed one itself).
func budgetOf(ctx context.Context) (time.Duration, bool) {
	v, ok := ctx.Value(budgetKey{}).(string)
	if !ok {
		md, _ := metadata.FromOutgoingContext(ctx)
		vs := md.Get(wire.MaxStalenessKey)
		if len(vs) == 0 {
			return 0, false
		}
		v = vs[0]
	}
	d, err := time.ParseDuration(v)
	return d, err == nil && d > 0
}

// serializableRead reports a Range or read-only Txn that asks to be
// serializable (every range in it, as etcd's txn.IsTxnSerializable).
func serializableRead(req any) bool {
	switch r := req.(type) {
	case *pb.RangeRequest:
		return r.Serializable
	case *pb.TxnRequest:
		return txnSerializable(r)
	}
	return false
}

func txnSerializable(t *pb.TxnRequest) bool {
	for _, ops := range [][]*pb.RequestOp{t.Success, t.Failure} {
		for _, op := range ops {
			switch r := op.Request.(type) {
			case *pb.RequestOp_RequestRange:
				if !r.RequestRange.Serializable {
					return false
				}
			case *pb.RequestOp_RequestTxn:
				if !txnSerializable(r.RequestTxn) {
					return false
				}
			}
		}
	}
	return true
}

// linearizable is a copy of a serializable read that asks for a
// linearizable one: what a voter must serve for a read with a budget, since
// a voter's serializable read has no bound at all.
func linearizable(req any) any {
	switch r := req.(type) {
	case *pb.RangeRequest:
		c := proto.Clone(r).(*pb.RangeRequest)
		c.Serializable = false
		return c
	case *pb.TxnRequest:
		c := proto.Clone(r).(*pb.TxnRequest)
		makeLinearizable(c)
		return c
	}
	return req
}

func makeLinearizable(t *pb.TxnRequest) {
	for _, ops := range [][]*pb.RequestOp{t.Success, t.Failure} {
		for _, op := range ops {
			switch r := op.Request.(type) {
			case *pb.RequestOp_RequestRange:
				r.RequestRange.Serializable = false
			case *pb.RequestOp_RequestTxn:
				makeLinearizable(r.RequestTxn)
			}
		}
	}
}

// boundedRead serves a serializable read with a staleness budget: on a
// replica that fits it (routeBoundedRead), else, or if that replica could
// not answer, linearizably on a voter. The replica's attempt gets half of
// what is left of the call's deadline (ProbeTimeout if it has none), so
// that the voter still has time.
func (b *Balancer) boundedRead(ctx context.Context, budget time.Duration, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts []grpc.CallOption) error {
	if b.cfg.Policy != VotersOnly && budget < b.cfg.MaxStaleness && b.budgets.used(budget, b.clock.Now()) {
		// The tightest budget yet: probe at once, so that a replica asked
		// for it starts proving it.
		select {
		case b.probeNow <- struct{}{}:
		default:
		}
	}
	reason := "none-fits"
	if b.cfg.Policy == VotersOnly {
		reason = "voters-only"
	} else if b.anyFits(budget, b.clock.Now()) {
		timeout := b.cfg.ProbeTimeout
		if dl, ok := ctx.Deadline(); ok {
			timeout = dl.Sub(b.clock.Now()) / 2
		}
		actx, cancel := context.WithTimeout(ctx, timeout)
		c := &call{r: routeBoundedRead, budget: budget}
		err := b.invokeRead(withCall(actx, c), c, method, req, reply, cc, invoker, opts)
		cancel()
		if err == nil || ctx.Err() != nil || !worthAVoter(err) {
			if err == nil {
				b.m.bounded.WithLabelValues("replica").Inc()
			}
			return err
		}
		reason = "replica-failed"
		if c.picked == nil {
			reason = "none-fits" // the picker found none when it came to pick
		}
	}
	b.m.bounded.WithLabelValues("voter-" + reason).Inc()
	return invoker(withCall(ctx, &call{r: routeVoterRead}), method, linearizable(req), reply, cc, opts...)
}

// invokeRead makes a read, asking for the answer header (wire.FreshnessKey:
// a replica sends it only when asked, by default), and learns from it the
// staleness bound of the replica that served it.
func (b *Balancer) invokeRead(ctx context.Context, c *call, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts []grpc.CallOption) error {
	var hdr metadata.MD
	ctx = metadata.AppendToOutgoingContext(ctx, wire.FreshnessKey, "1")
	start := b.clock.Now()
	err := invoker(ctx, method, req, reply, cc, append(opts[:len(opts):len(opts)], grpc.Header(&hdr))...)
	if c.picked != nil && err == nil {
		c.picked.learn(hdr, start)
	}
	return err
}

// worthAVoter reports a replica's failure that a voter may not have:
// unreachable, too stale to prove the bound in time, or refusing as a
// learner. A bad request or a denied one would fail on a voter too.
func worthAVoter(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Unknown, codes.Internal, codes.ResourceExhausted:
		return true
	}
	return isLearnerRefusal(err) || errors.Is(err, context.DeadlineExceeded)
}

// anyFits reports a replica in the rotation whose staleness, as last
// reported and aged since, is within budget at now.
func (b *Balancer) anyFits(budget time.Duration, now time.Time) bool {
	eps := b.replicaEPs.Load()
	if eps == nil {
		return false
	}
	for _, ep := range *eps {
		if !ep.ejected.Load() && ep.staleness(now) <= budget {
			return true
		}
	}
	return false
}
