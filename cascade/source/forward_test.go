package source

import (
	"errors"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// A write is refused before it is forwarded as a member with the front's
// --max-txn-ops and --max-request-bytes refuses its proposal, counting a
// transaction's operations as etcd's handlers do.
func TestForwardedWritesFitTheFrontsLimits(t *testing.T) {
	put := func(k string) *pb.RequestOp {
		return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte(k)}}}
	}
	nested := func(ops ...*pb.RequestOp) *pb.RequestOp {
		return &pb.RequestOp{Request: &pb.RequestOp_RequestTxn{RequestTxn: &pb.TxnRequest{Success: ops}}}
	}
	cmp := &pb.Compare{Key: []byte("a")}
	txn := func(cmps int, success ...*pb.RequestOp) *pb.TxnRequest {
		t := &pb.TxnRequest{Success: success}
		for range cmps {
			t.Compare = append(t.Compare, cmp)
		}
		return t
	}
	l := limits{maxBytes: 100, maxOps: 3}
	for _, c := range []struct {
		name string
		r    *pb.InternalRaftRequest
		want error
	}{
		{"a put within both", &pb.InternalRaftRequest{Put: &pb.PutRequest{Key: []byte("k"), Value: []byte("v")}}, nil},
		// The raft request's header counts, as a member measures it.
		{"a put of 80 bytes", &pb.InternalRaftRequest{Put: &pb.PutRequest{Key: []byte("k"), Value: []byte(strings.Repeat("v", 80))}}, rpctypes.ErrGRPCRequestTooLarge},
		{"a delete over the bytes", &pb.InternalRaftRequest{DeleteRange: &pb.DeleteRangeRequest{Key: []byte(strings.Repeat("k", 101))}}, rpctypes.ErrGRPCRequestTooLarge},
		{"3 puts", &pb.InternalRaftRequest{Txn: txn(0, put("a"), put("b"), put("c"))}, nil},
		{"4 puts", &pb.InternalRaftRequest{Txn: txn(0, put("a"), put("b"), put("c"), put("d"))}, rpctypes.ErrGRPCTooManyOps},
		{"4 compares", &pb.InternalRaftRequest{Txn: txn(4, put("a"))}, rpctypes.ErrGRPCTooManyOps},
		{"4 failure operations", &pb.InternalRaftRequest{Txn: &pb.TxnRequest{Failure: []*pb.RequestOp{put("a"), put("b"), put("c"), put("d")}}}, rpctypes.ErrGRPCTooManyOps},
		// etcd: a nested transaction has what its parent leaves.
		{"a nested txn of 1 in 2", &pb.InternalRaftRequest{Txn: txn(0, put("a"), nested(put("b")))}, nil},
		{"a nested txn of 2 in 2", &pb.InternalRaftRequest{Txn: &pb.TxnRequest{Failure: []*pb.RequestOp{put("a"), nested(put("b"), put("c"))}}}, rpctypes.ErrGRPCTooManyOps},
		{"a nested txn of 2 under 2 compares", &pb.InternalRaftRequest{Txn: txn(2, nested(put("b"), put("c")))}, rpctypes.ErrGRPCTooManyOps},
		{"two deep within", &pb.InternalRaftRequest{Txn: txn(0, nested(nested(put("a"))))}, nil},
		{"two deep over", &pb.InternalRaftRequest{Txn: txn(0, put("x"), nested(put("y"), nested(put("a"))))}, rpctypes.ErrGRPCTooManyOps},
	} {
		if err := l.check(c.r); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}
