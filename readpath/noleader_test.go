package readpath

import (
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

func TestProposes(t *testing.T) {
	rangeOp := &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{}}}
	putOp := &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{}}}
	for _, c := range []struct {
		method string
		req    any
		want   bool
	}{
		{"/etcdserverpb.KV/Range", &pb.RangeRequest{}, false},
		{"/etcdserverpb.KV/Put", &pb.PutRequest{}, true},
		{"/etcdserverpb.KV/DeleteRange", &pb.DeleteRangeRequest{}, true},
		{"/etcdserverpb.KV/Txn", &pb.TxnRequest{Success: []*pb.RequestOp{rangeOp}}, false},
		{"/etcdserverpb.KV/Txn", &pb.TxnRequest{Success: []*pb.RequestOp{rangeOp}, Failure: []*pb.RequestOp{putOp}}, true},
		{"/etcdserverpb.Lease/LeaseGrant", &pb.LeaseGrantRequest{}, true},
		{"/etcdserverpb.Lease/LeaseTimeToLive", &pb.LeaseTimeToLiveRequest{}, false},
		{"/etcdserverpb.Maintenance/Status", &pb.StatusRequest{}, false},
		{"/etcdserverpb.Maintenance/Alarm", &pb.AlarmRequest{Action: pb.AlarmRequest_GET}, false},
		{"/etcdserverpb.Maintenance/Alarm", &pb.AlarmRequest{Action: pb.AlarmRequest_DEACTIVATE}, true},
		{"/etcdserverpb.Cluster/MemberList", &pb.MemberListRequest{}, false},
		{"/etcdserverpb.Cluster/MemberAdd", &pb.MemberAddRequest{}, true},
		{"/etcdserverpb.Auth/Authenticate", &pb.AuthenticateRequest{}, true},
		{"/v3lockpb.Lock/Lock", nil, true},
		{"/v3electionpb.Election/Leader", nil, false},
	} {
		if got := proposes(c.method, c.req); got != c.want {
			t.Errorf("proposes(%s, %v) = %v, want %v", c.method, c.req, got, c.want)
		}
	}
}
