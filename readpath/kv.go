package readpath

import (
	"context"
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/server/v3/etcdserver/txn"
	"google.golang.org/grpc/metadata"

	"github.com/understudy-kv/understudy/readindex"
)

// kvServer serves etcd's KV service from the replica's own store. Reads are
// strong, weak or bounded (see the package doc); writes go to etcd's own
// handler, whose raft proposal the learner forwards to the leader and which
// answers only once the entry is applied here — so every write through a
// replica is read-your-writes on that replica.
type kvServer struct {
	// Unsafe: a KV method etcd adds (as RangeStream came in v3.7) breaks
	// the build here, rather than answering "Unimplemented" on replicas.
	pb.UnsafeKVServer
	etcd         pb.KVServer
	clock        clockwork.Clock
	fresh        *readindex.Freshness
	maxStaleness time.Duration
	// reqTimeout bounds a strong or bounded read's wait for a round, as
	// etcd's request timeout bounds its own ReadIndex wait, whether or not
	// the client set a deadline.
	reqTimeout time.Duration
	m          *Metrics
	// answer, if set, tells how each answer was served (wire.ReadModeKey
	// and the rest) in its response header.
	answer *answerHeader
}

var _ pb.KVServer = (*kvServer)(nil)

func (s *kvServer) Range(ctx context.Context, r *pb.RangeRequest) (*pb.RangeResponse, error) {
	mode, err := s.readMode(ctx, r.Serializable)
	if err != nil {
		return nil, err
	}
	s.m.requests.WithLabelValues(shortService(kvService), "Range", mode).Inc()
	// readMode has made the local store fresh enough for every mode: the
	// read itself is local.
	r.Serializable = true
	ans := s.answer.begin(ctx, mode)
	resp, err := s.etcd.Range(ctx, r)
	ans.set(ctx, resp.GetHeader().GetRevision())
	return resp, err
}

// RangeStream (etcd v3.7) is Range in chunks, in the same read modes.
func (s *kvServer) RangeStream(r *pb.RangeRequest, rs pb.KV_RangeStreamServer) error {
	mode, err := s.readMode(rs.Context(), r.Serializable)
	if err != nil {
		return err
	}
	s.m.requests.WithLabelValues(shortService(kvService), "RangeStream", mode).Inc()
	s.answer.begin(rs.Context(), mode).setStream(rs)
	r.Serializable = true
	return s.etcd.RangeStream(r, rs)
}

func (s *kvServer) Txn(ctx context.Context, r *pb.TxnRequest) (*pb.TxnResponse, error) {
	if !txn.IsTxnReadonly(r) {
		s.m.requests.WithLabelValues(shortService(kvService), "Txn", modeNone).Inc()
		resp, err := s.etcd.Txn(ctx, r)
		s.forwarded(ctx, "Txn", resp.GetHeader(), err)
		return resp, err
	}
	// etcd serves a read-only txn linearizably unless every range in it
	// asks to be serializable; the replica keeps that rule.
	mode, err := s.readMode(ctx, txn.IsTxnSerializable(r))
	if err != nil {
		return nil, err
	}
	s.m.requests.WithLabelValues(shortService(kvService), "Txn", mode).Inc()
	for _, ops := range [][]*pb.RequestOp{r.Success, r.Failure} {
		for _, op := range ops {
			op.GetRequestRange().Serializable = true // read-only: all ranges
		}
	}
	ans := s.answer.begin(ctx, mode)
	resp, err := s.etcd.Txn(ctx, r)
	ans.set(ctx, resp.GetHeader().GetRevision())
	return resp, err
}

func (s *kvServer) Put(ctx context.Context, r *pb.PutRequest) (*pb.PutResponse, error) {
	s.m.requests.WithLabelValues(shortService(kvService), "Put", modeNone).Inc()
	resp, err := s.etcd.Put(ctx, r)
	s.forwarded(ctx, "Put", resp.GetHeader(), err)
	return resp, err
}

func (s *kvServer) DeleteRange(ctx context.Context, r *pb.DeleteRangeRequest) (*pb.DeleteRangeResponse, error) {
	s.m.requests.WithLabelValues(shortService(kvService), "DeleteRange", modeNone).Inc()
	resp, err := s.etcd.DeleteRange(ctx, r)
	s.forwarded(ctx, "DeleteRange", resp.GetHeader(), err)
	return resp, err
}

func (s *kvServer) Compact(ctx context.Context, r *pb.CompactionRequest) (*pb.CompactionResponse, error) {
	s.m.requests.WithLabelValues(shortService(kvService), "Compact", modeNone).Inc()
	resp, err := s.etcd.Compact(ctx, r)
	s.forwarded(ctx, "Compact", resp.GetHeader(), err)
	return resp, err
}

// forwarded counts a forwarded write and, once it is applied here, says so
// in its answer's header.
func (s *kvServer) forwarded(ctx context.Context, method string, h *pb.ResponseHeader, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	} else {
		s.answer.begin(ctx, modeForwarded).set(ctx, h.GetRevision())
	}
	s.m.forwarded.WithLabelValues(method, result).Inc()
}

// readMode decides how a read is served and waits until the local store may
// serve it: for a strong read, until a ReadIndex round that started after
// the read arrived has been applied here (shared with every read waiting for
// one); for a bounded read, until the store is known fresh within the bound.
// A replica's upkeep (wire.BackgroundKey) waits as such
// (readindex.ForUpkeep): a round only it waits for is upkeep here too.
func (s *kvServer) readMode(ctx context.Context, serializable bool) (string, error) {
	background := isBackground(ctx)
	wait := func() (context.Context, context.CancelFunc) {
		wctx, cancel := context.WithTimeout(ctx, s.reqTimeout)
		if background {
			wctx = readindex.ForUpkeep(wctx)
		}
		return wctx, cancel
	}
	if !serializable {
		wctx, cancel := wait()
		defer cancel()
		if err := s.fresh.WaitRound(wctx); err != nil {
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
			return "", rpctypes.ErrGRPCTimeout
		}
		return modeStrong, nil
	}
	bound, err := stalenessBound(ctx, s.maxStaleness)
	if err != nil {
		return "", grpcError(err)
	}
	if bound == 0 {
		return modeWeak, nil
	}
	if !background {
		// A replica's upkeep (wire.BackgroundKey: a bounded read a
		// replica fed by this one answers from its last round) is no
		// client's demand for rounds.
		s.fresh.Demand(bound)
	}
	need := s.clock.Now().Add(-bound)
	if s.fresh.AsOf().Before(need) {
		s.m.boundedWaits.Inc()
		wctx, cancel := wait()
		defer cancel()
		if err := s.fresh.WaitFresh(wctx, need); err != nil {
			return "", grpcError(fmt.Errorf("%w (bound %v, fresh as of %v ago): %v", ErrTooStale, bound, s.fresh.Age().Round(time.Millisecond), err))
		}
	}
	return modeBounded, nil
}

// stalenessBound is the request's own bound if it set one, else def.
func stalenessBound(ctx context.Context, def time.Duration) (time.Duration, error) {
	vs := metadata.ValueFromIncomingContext(ctx, MaxStalenessKey)
	if len(vs) == 0 {
		return def, nil
	}
	d, err := time.ParseDuration(vs[0])
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%w: %q is not a duration of 0 or more (such as 100ms)", ErrBadStaleness, vs[0])
	}
	return d, nil
}
