package balancer

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.uber.org/zap"
	grpcbalancer "google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func rangeOp() *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("k")}}}
}

func putOp() *pb.RequestOp {
	return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("k")}}}
}

func TestClassify(t *testing.T) {
	nested := func(ops ...*pb.RequestOp) *pb.RequestOp {
		return &pb.RequestOp{Request: &pb.RequestOp_RequestTxn{RequestTxn: &pb.TxnRequest{Success: ops}}}
	}
	for _, c := range []struct {
		name   string
		method string
		req    any
		want   route
	}{
		{"range", methodRange, &pb.RangeRequest{}, routeRead},
		{"read-only txn", methodTxn, &pb.TxnRequest{Success: []*pb.RequestOp{rangeOp()}, Failure: []*pb.RequestOp{rangeOp()}}, routeRead},
		{"empty txn", methodTxn, &pb.TxnRequest{}, routeRead},
		{"txn with a put on failure", methodTxn, &pb.TxnRequest{Success: []*pb.RequestOp{rangeOp()}, Failure: []*pb.RequestOp{putOp()}}, routeWrite},
		{"nested read-only txn", methodTxn, &pb.TxnRequest{Success: []*pb.RequestOp{nested(rangeOp())}}, routeRead},
		{"nested txn with a put", methodTxn, &pb.TxnRequest{Success: []*pb.RequestOp{nested(rangeOp(), putOp())}}, routeWrite},
		{"put", "/etcdserverpb.KV/Put", &pb.PutRequest{}, routeWrite},
		{"lease grant", "/etcdserverpb.Lease/LeaseGrant", &pb.LeaseGrantRequest{}, routeWrite},
		{"member list", "/etcdserverpb.Cluster/MemberList", &pb.MemberListRequest{}, routeWrite},
	} {
		if got := classify(c.method, c.req); got != c.want {
			t.Errorf("%s: route %v, want %v", c.name, got, c.want)
		}
	}
}

func TestLearnerRefusalIsRecognised(t *testing.T) {
	if !isLearnerRefusal(rpctypes.ErrGRPCNotSupportedForLearner) {
		t.Error("etcd's learner refusal not recognised")
	}
	// As a client receives it: rebuilt from the wire.
	wire := status.Error(codes.Unavailable, rpctypes.ErrorDesc(rpctypes.ErrGRPCNotSupportedForLearner))
	if !isLearnerRefusal(wire) {
		t.Error("learner refusal from the wire not recognised")
	}
	if isLearnerRefusal(status.Error(codes.Unavailable, "connection refused")) || isLearnerRefusal(nil) {
		t.Error("other errors taken for a learner refusal")
	}
}

// fakeSubConn stands for a connection; the picker only hands it back.
type fakeSubConn struct {
	grpcbalancer.SubConn
	name string
}

func testPicker(policy Policy, zone string) (*picker, map[string]*endpoint) {
	b := &Balancer{cfg: Config{Policy: policy, Zone: zone}, lg: zap.NewNop(), clock: clockwork.NewRealClock(), m: newMetrics(nil), kick: make(chan struct{}, 1)}
	eps := map[string]*endpoint{}
	pe := func(name, zone string) pickEndpoint {
		eps[name] = &endpoint{url: "http://" + name, addr: name}
		return pickEndpoint{sc: &fakeSubConn{name: name}, ep: eps[name], zone: zone}
	}
	p := &picker{owner: b, rr: new(atomic.Uint64), leader: 1,
		voters:   []pickEndpoint{pe("v1", ""), pe("v2", ""), pe("v3", "")},
		replicas: []pickEndpoint{pe("r1", "a"), pe("r2", "b")},
	}
	return p, eps
}

// pick picks for a route and reports the endpoint's name, finishing the
// call at once unless keep is set.
func pick(t *testing.T, p *picker, r route, keep bool) string {
	t.Helper()
	res, err := p.Pick(grpcbalancer.PickInfo{FullMethodName: methodRange, Ctx: withRoute(context.Background(), r)})
	if err != nil {
		t.Fatalf("pick %v: %v", r, err)
	}
	if !keep {
		res.Done(grpcbalancer.DoneInfo{})
	}
	return res.SubConn.(*fakeSubConn).name
}

func TestWritesGoToTheLeaderAndReadsToReplicas(t *testing.T) {
	p, _ := testPicker(RoundRobin, "")
	seen := map[string]int{}
	for range 100 {
		if got := pick(t, p, routeWrite, false); got != "v2" {
			t.Fatalf("write went to %s, want the leader v2", got)
		}
		seen[pick(t, p, routeRead, false)]++
	}
	if seen["r1"] != 50 || seen["r2"] != 50 {
		t.Fatalf("round-robin reads: %v, want 50 on each replica and none on voters", seen)
	}
}

func TestReadsGoToVotersWhenNoReplicaIsHealthy(t *testing.T) {
	p, eps := testPicker(RoundRobin, "")
	eps["r1"].ejected.Store(true)
	for range 10 {
		if got := pick(t, p, routeRead, false); got != "r2" {
			t.Fatalf("read went to %s with r1 ejected, want r2", got)
		}
	}
	eps["r2"].ejected.Store(true)
	seen := map[string]int{}
	for range 30 {
		seen[pick(t, p, routeRead, false)]++
	}
	if seen["v1"] != 10 || seen["v2"] != 10 || seen["v3"] != 10 {
		t.Fatalf("reads with no healthy replica: %v, want them spread over the voters", seen)
	}
}

func TestVotersOnlyAndRefusedReadsSkipReplicas(t *testing.T) {
	p, _ := testPicker(VotersOnly, "")
	for range 30 {
		if got := pick(t, p, routeRead, false); strings.HasPrefix(got, "r") {
			t.Fatalf("voters-only read went to replica %s", got)
		}
	}
	p, _ = testPicker(RoundRobin, "")
	for range 30 {
		if got := pick(t, p, routeVoterRead, false); strings.HasPrefix(got, "r") {
			t.Fatalf("a read a learner refused went to replica %s", got)
		}
	}
}

func TestWritesGoToAVoterWhenTheLeaderIsUnknown(t *testing.T) {
	p, _ := testPicker(RoundRobin, "")
	p.leader = -1
	for range 30 {
		if got := pick(t, p, routeWrite, false); !strings.HasPrefix(got, "v") {
			t.Fatalf("write went to %s with no leader known, want a voter", got)
		}
	}
}

func TestLeastOutstandingAvoidsTheBusyReplica(t *testing.T) {
	p, _ := testPicker(LeastOutstanding, "")
	first := pick(t, p, routeRead, true) // stays in flight
	for range 20 {
		if got := pick(t, p, routeRead, false); got == first {
			t.Fatalf("read went to %s, which has a call in flight, while the other is idle", got)
		}
	}
}

func TestZoneAffinityPrefersTheLocalZone(t *testing.T) {
	p, eps := testPicker(ZoneAffinity, "b")
	for range 20 {
		if got := pick(t, p, routeRead, false); got != "r2" {
			t.Fatalf("read went to %s, want r2, the replica in zone b", got)
		}
	}
	eps["r2"].ejected.Store(true)
	if got := pick(t, p, routeRead, false); got != "r1" {
		t.Fatalf("with zone b's replica ejected, read went to %s, want r1", got)
	}
}

func TestLatencyWeightedFavoursTheFastReplica(t *testing.T) {
	p, eps := testPicker(LatencyWeighted, "")
	eps["r1"].observe(time.Millisecond)
	eps["r2"].observe(50 * time.Millisecond)
	seen := map[string]int{}
	for range 100 {
		seen[pick(t, p, routeRead, true)]++ // in flight: the fast one fills up
	}
	if seen["r1"] <= seen["r2"] || seen["r2"] == 0 {
		t.Fatalf("latency-weighted reads: %v, want most on the fast r1 and some on r2", seen)
	}
}

func TestLearnerRefusalEjects(t *testing.T) {
	p, eps := testPicker(RoundRobin, "")
	res, err := p.Pick(grpcbalancer.PickInfo{Ctx: withRoute(context.Background(), routeRead)})
	if err != nil {
		t.Fatal(err)
	}
	name := res.SubConn.(*fakeSubConn).name
	res.Done(grpcbalancer.DoneInfo{Err: rpctypes.ErrGRPCNotSupportedForLearner})
	if !eps[name].ejected.Load() {
		t.Fatalf("%s refused as a learner and was not ejected", name)
	}
	if eps[name].inflight.Load() != 0 {
		t.Fatal("a finished call is still counted in flight")
	}
}

func TestConfigValidateNamesEveryProblem(t *testing.T) {
	err := Config{Endpoints: []string{"127.0.0.1:2379", "http://ok:2379"}, Policy: "nearest", MaxStaleness: -time.Second}.Validate()
	if err == nil {
		t.Fatal("bad config accepted")
	}
	for _, want := range []string{`Endpoints "127.0.0.1:2379"`, `Policy "nearest": want one of round-robin, least-outstanding, latency-weighted, zone-affinity, voters-only`, "MaxStaleness -1s"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if err := (Config{Policy: ZoneAffinity, Endpoints: []string{"http://a:1"}}).Validate(); err == nil || !strings.Contains(err.Error(), "Zone is empty") {
		t.Errorf("zone-affinity without a zone: %v", err)
	}
	if err := (Config{Endpoints: []string{"https://a:1"}}).Validate(); err != nil {
		t.Errorf("good config refused: %v", err)
	}
}
