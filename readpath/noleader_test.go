package readpath

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"

	"github.com/understudy-kv/understudy/readindex"
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

// silentTransport is a raft transport that receives nothing.
type silentTransport struct{}

func (silentTransport) ReceivedFrom(uint64) float64 { return 0 }

func TestNoLeaderRefusesProposalsOnly(t *testing.T) {
	clock := clockwork.NewFakeClock()
	leader := uint64(1)
	lw := newLeaderWatch(readindex.NewLeaderContact(clock, func() uint64 { return leader }, silentTransport{}), clock, time.Second)
	ic := unaryInterceptor(lw, NewMetrics(nil), probeAnswer{freshness: func() time.Duration { return 0 }, contact: func() (time.Duration, bool) { return 0, false }}, func() {})
	call := func(method string, req any) (bool, error) {
		called := false
		_, err := ic(context.Background(), req, &grpc.UnaryServerInfo{FullMethod: method}, func(context.Context, any) (any, error) {
			called = true
			return nil, nil
		})
		return called, err
	}
	if called, err := call("/etcdserverpb.KV/Put", &pb.PutRequest{}); !called || err != nil {
		t.Fatalf("put with a leader heard from: handled %v, %v", called, err)
	}
	clock.Advance(3 * time.Second) // nothing heard for three election timeouts
	if called, err := call("/etcdserverpb.KV/Put", &pb.PutRequest{}); called || !errors.Is(err, rpctypes.ErrGRPCNoLeader) {
		t.Fatalf("put with no leader: handled %v, %v; want refused with %v, not forwarded", called, err, rpctypes.ErrGRPCNoLeader)
	}
	if called, err := call("/etcdserverpb.KV/Range", &pb.RangeRequest{Serializable: true}); !called || err != nil {
		t.Fatalf("weak read with no leader: handled %v, %v; want served", called, err)
	}
}
