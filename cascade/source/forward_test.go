package source

import (
	"errors"
	"strings"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/protobuf/proto"
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
	l := limits{maxBytes: 100, maxOps: 3}
	for _, c := range []struct {
		name string
		r    proto.Message
		want error
	}{
		{"a put within both", &pb.PutRequest{Key: []byte("k"), Value: []byte("v")}, nil},
		{"a put over the bytes", &pb.PutRequest{Key: []byte("k"), Value: []byte(strings.Repeat("v", 100))}, rpctypes.ErrGRPCRequestTooLarge},
		{"a delete over the bytes", &pb.DeleteRangeRequest{Key: []byte(strings.Repeat("k", 101))}, rpctypes.ErrGRPCRequestTooLarge},
		{"3 puts", &pb.TxnRequest{Success: []*pb.RequestOp{put("a"), put("b"), put("c")}}, nil},
		{"4 puts", &pb.TxnRequest{Success: []*pb.RequestOp{put("a"), put("b"), put("c"), put("d")}}, rpctypes.ErrGRPCTooManyOps},
		{"4 compares", &pb.TxnRequest{Compare: []*pb.Compare{cmp, cmp, cmp, cmp}, Success: []*pb.RequestOp{put("a")}}, rpctypes.ErrGRPCTooManyOps},
		{"4 failure operations", &pb.TxnRequest{Failure: []*pb.RequestOp{put("a"), put("b"), put("c"), put("d")}}, rpctypes.ErrGRPCTooManyOps},
		// etcd: a nested transaction has what its parent leaves (3 - 2).
		{"a nested txn of 1 in 2", &pb.TxnRequest{Success: []*pb.RequestOp{put("a"), nested(put("b"))}}, nil},
		{"a nested txn of 2 in 2", &pb.TxnRequest{Failure: []*pb.RequestOp{put("a"), nested(put("b"), put("c"))}}, rpctypes.ErrGRPCTooManyOps},
	} {
		if err := l.check(c.r); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}
