package mirror

import (
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/mirror/core"
)

// TestSkipped reads which puts a transaction left out from the shape of
// its nested answers: owned (outer then), absent (inner then), or someone
// else's key (neither).
func TestSkipped(t *testing.T) {
	txn := func(ok bool, inner ...*pb.ResponseOp) *pb.ResponseOp {
		return &pb.ResponseOp{Response: &pb.ResponseOp_ResponseTxn{ResponseTxn: &pb.TxnResponse{Succeeded: ok, Responses: inner}}}
	}
	ops := []owned{{key: "owned", put: true}, {key: "absent", put: true}, {key: "theirs", put: true}, {key: "deleted"}}
	resp := []*pb.ResponseOp{txn(true), txn(false, txn(true)), txn(false, txn(false)), txn(false)}
	got := skipped(ops, resp)
	if len(got) != 1 || got[0] != "theirs" {
		t.Fatalf("skipped %q, want [theirs]", got)
	}
}

// TestSkipReserved: scans of an image that holds the reserved prefix jump
// over the mirrors' own keys, and only those.
func TestSkipReserved(t *testing.T) {
	rend := clientv3.GetPrefixRangeEnd(ReservedPrefix)
	for _, c := range []struct{ next, end, want string }{
		{ReservedPrefix + "a/own/x\x00", "\x00", rend},                             // whole keyspace: jump
		{"a/b\x00", "\x00", "a/b\x00"},                                             // outside: unchanged
		{ReservedPrefix + "a\x00", ReservedPrefix + "b", ReservedPrefix + "a\x00"}, // a range inside the reserved prefix: unchanged
	} {
		if got := skipReserved(c.next, c.end); got != c.want {
			t.Errorf("skipReserved(%q, %q) = %q, want %q", c.next, c.end, got, c.want)
		}
	}
}

// TestPolicyOps: under Keep, a put is conditional on ownership or absence
// and a delete on ownership; under Prune neither is.
func TestPolicyOps(t *testing.T) {
	keep := &mirror{cfg: Config{}, ownPrefix: ownPrefix("m")}
	prune := &mirror{cfg: Config{Settings: core.Settings{Prune: true}}, ownPrefix: ownPrefix("m")}
	if cmps, _, els := keep.putOwned("k", "v", 0).op.Txn(); len(cmps) != 1 || len(els) != 1 {
		t.Fatalf("Keep put: %d compares, %d else ops; want 1 and 1 (the absent-key branch)", len(cmps), len(els))
	}
	if cmps, _, _ := keep.deleteOwned("k").op.Txn(); len(cmps) != 1 {
		t.Fatalf("Keep delete: %d compares, want 1", len(cmps))
	}
	if cmps, thn, _ := prune.deleteOwned("k").op.Txn(); len(cmps) != 0 || len(thn) != 2 {
		t.Fatalf("Prune delete: %d compares and %d ops, want 0 and 2", len(cmps), len(thn))
	}
}
