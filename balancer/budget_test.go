package balancer

import (
	"context"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	grpcbalancer "google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/understudy-kv/understudy/wire"
)

func report(ep *endpoint, bound time.Duration, at time.Time) {
	ep.learn(metadata.Pairs(wire.StalenessBoundKey, bound.String()), at)
}

func TestPickFittingTakesOnlyReplicasWithinTheBudget(t *testing.T) {
	p, eps := testPicker(RoundRobin, "")
	now := time.Unix(1000, 0)
	report(eps["r1"], 50*time.Millisecond, now.Add(-100*time.Millisecond)) // 150ms old at now
	report(eps["r2"], 10*time.Millisecond, now.Add(-time.Second))          // 1.01s old at now
	for range 10 {
		if pe := p.pickFitting(200*time.Millisecond, now); pe == nil || pe.ep != eps["r1"] {
			t.Fatalf("200ms budget picked %v, want r1 (150ms old; r2 is 1.01s old)", pe)
		}
	}
	if pe := p.pickFitting(100*time.Millisecond, now); pe != nil {
		t.Fatalf("100ms budget picked %s, want none: r1's report has aged to 150ms", pe.ep.url)
	}
	seen := map[*endpoint]int{}
	for range 10 {
		seen[p.pickFitting(2*time.Second, now).ep]++
	}
	if seen[eps["r1"]] != 5 || seen[eps["r2"]] != 5 {
		t.Fatalf("a 2s budget both fit: %v, want the read policy (round robin) over both", seen)
	}
	eps["r1"].ejected.Store(true)
	if pe := p.pickFitting(200*time.Millisecond, now); pe != nil {
		t.Fatalf("an ejected replica picked: %s", pe.ep.url)
	}
	if pe := p.pickFitting(time.Hour, now); pe == nil || pe.ep != eps["r2"] {
		t.Fatalf("1h budget with r1 ejected picked %v, want r2", pe)
	}
	if s := (&endpoint{}).staleness(now); s != 1<<63-1 {
		t.Fatalf("a replica that never reported has staleness %v, want the largest", s)
	}
}

func TestPickFittingPrefersTheZoneAmongFitting(t *testing.T) {
	p, eps := testPicker(RoundRobin, "b")
	now := time.Unix(1000, 0)
	report(eps["r1"], 10*time.Millisecond, now)
	report(eps["r2"], 100*time.Millisecond, now)
	if pe := p.pickFitting(time.Second, now); pe == nil || pe.ep != eps["r2"] {
		t.Fatalf("picked %v, want r2, the fitting replica in zone b", pe)
	}
	if pe := p.pickFitting(50*time.Millisecond, now); pe == nil || pe.ep != eps["r1"] {
		t.Fatalf("picked %v, want r1: zone b's replica does not fit 50ms", pe)
	}
}

func TestLearnKeepsTheLatestCallsReport(t *testing.T) {
	ep := &endpoint{}
	now := time.Unix(1000, 0)
	report(ep, time.Second, now)
	report(ep, time.Millisecond, now.Add(-time.Second)) // an older call, answered late
	if s := ep.staleness(now); s != time.Second {
		t.Fatalf("staleness %v, want 1s from the later call", s)
	}
	ep.learn(metadata.Pairs(wire.StalenessBoundKey, "soon"), now.Add(time.Second))
	ep.learn(metadata.MD{}, now.Add(time.Second))
	if s := ep.staleness(now); s != time.Second {
		t.Fatalf("staleness %v after malformed and missing headers, want 1s still", s)
	}
}

// fakeCluster answers calls as the picker routes them: a replica with
// replicaErr (or a header bound of replicaBound), a voter with nothing.
type fakeCluster struct {
	p            *picker
	replicaErr   error
	replicaBound string
	served       []string
	reqs         []any
}

func (f *fakeCluster) invoke(ctx context.Context, _ string, req, _ any, _ *grpc.ClientConn, opts ...grpc.CallOption) error {
	res, err := f.p.Pick(grpcbalancer.PickInfo{FullMethodName: methodRange, Ctx: ctx})
	if err != nil {
		return err
	}
	name := res.SubConn.(*fakeSubConn).name
	f.served = append(f.served, name)
	f.reqs = append(f.reqs, req)
	err = nil
	if name[0] == 'r' {
		err = f.replicaErr
		for _, o := range opts {
			if h, ok := o.(grpc.HeaderCallOption); ok && err == nil {
				*h.HeaderAddr = metadata.Pairs(wire.StalenessBoundKey, f.replicaBound)
			}
		}
	}
	res.Done(grpcbalancer.DoneInfo{Err: err})
	return err
}

func TestBudgetedReadsGoToAFittingReplicaOrLinearizablyToAVoter(t *testing.T) {
	p, eps := testPicker(RoundRobin, "")
	b := p.owner
	b.replicaEPs.Store(&[]*endpoint{eps["r1"], eps["r2"]})
	f := &fakeCluster{p: p, replicaBound: "20ms"}
	ctx := WithMaxStaleness(context.Background(), time.Hour)
	read := func(ctx context.Context, req *pb.RangeRequest) error {
		return b.unaryInterceptor(ctx, methodRange, req, &pb.RangeResponse{}, nil, f.invoke)
	}
	weak := &pb.RangeRequest{Key: []byte("k"), Serializable: true}

	// No replica has reported: none fits, a voter serves it linearizably.
	if err := read(ctx, weak); err != nil {
		t.Fatal(err)
	}
	if got := f.served[0]; got[0] != 'v' || f.reqs[0].(*pb.RangeRequest).Serializable || !weak.Serializable {
		t.Fatalf("with no report: served by %s, request %v (caller's %v); want a voter, linearizable, the caller's request untouched", got, f.reqs[0], weak)
	}

	// A replica that fits serves it, and its answer's bound is learned.
	report(eps["r1"], time.Millisecond, time.Now())
	f.served, f.reqs = nil, nil
	if err := read(ctx, weak); err != nil {
		t.Fatal(err)
	}
	if f.served[0] != "r1" || !f.reqs[0].(*pb.RangeRequest).Serializable {
		t.Fatalf("served by %v with %v, want r1, serializable", f.served, f.reqs[0])
	}
	if r := eps["r1"].fresh.Load(); r.bound != 20*time.Millisecond {
		t.Fatalf("r1's bound %v after its answer, want 20ms from the header", r.bound)
	}

	// The replica cannot prove the bound in time: a voter serves it.
	f.replicaErr = status.Error(codes.Unavailable, "readpath: replica is staler than the read's bound")
	f.served, f.reqs = nil, nil
	if err := read(ctx, weak); err != nil {
		t.Fatal(err)
	}
	if len(f.served) != 2 || f.served[1][0] != 'v' || f.reqs[1].(*pb.RangeRequest).Serializable {
		t.Fatalf("served by %v, want the replica then a voter, linearizably", f.served)
	}

	// A request the replica refuses as bad would fail on a voter too.
	f.replicaErr = status.Error(codes.InvalidArgument, "bad")
	f.served = nil
	if err := read(ctx, weak); status.Code(err) != codes.InvalidArgument || len(f.served) != 1 {
		t.Fatalf("bad request: %v, served by %v; want the replica's refusal, no voter", err, f.served)
	}

	// A strong read ignores the budget; a weak read without one is as before.
	f.replicaErr = nil
	f.served, f.reqs = nil, nil
	if err := read(ctx, &pb.RangeRequest{Key: []byte("k")}); err != nil || f.served[0][0] != 'r' || f.reqs[0].(*pb.RangeRequest).Serializable {
		t.Fatalf("strong read with a budget: %v, served by %v", err, f.served)
	}
	eps["r1"].ejected.Store(true)
	f.served = nil
	if err := read(context.Background(), weak); err != nil || f.served[0] != "r2" {
		t.Fatalf("weak read without a budget: %v, served by %v; want r2 (r1 ejected), however stale", err, f.served)
	}
}

func TestBudgetOf(t *testing.T) {
	bg := context.Background()
	for _, c := range []struct {
		name string
		ctx  context.Context
		want time.Duration
		ok   bool
	}{
		{"none", bg, 0, false},
		{"WithMaxStaleness", WithMaxStaleness(bg, 200*time.Millisecond), 200 * time.Millisecond, true},
		{"the metadata key", metadata.AppendToOutgoingContext(bg, wire.MaxStalenessKey, "1s"), time.Second, true},
		{"the first set counts", WithMaxStaleness(WithMaxStaleness(bg, time.Second), time.Millisecond), time.Second, true},
		{"malformed", metadata.AppendToOutgoingContext(bg, wire.MaxStalenessKey, "soon"), 0, false},
		{"zero", WithMaxStaleness(bg, 0), 0, false},
	} {
		d, ok := budgetOf(c.ctx)
		if d != c.want || ok != c.ok {
			t.Errorf("%s: %v %v, want %v %v", c.name, d, ok, c.want, c.ok)
		}
	}
}

func TestVoterReadsWaitForAVoterStillConnecting(t *testing.T) {
	p, _ := testPicker(RoundRobin, "")
	p.voters, p.leader = nil, -1
	p.connecting = true
	if _, err := p.Pick(grpcbalancer.PickInfo{Ctx: withRoute(context.Background(), routeVoterRead)}); err != grpcbalancer.ErrNoSubConnAvailable {
		t.Fatalf("voter read with voters connecting: %v, want to wait for the next picker", err)
	}
	p.connecting = false
	if _, err := p.Pick(grpcbalancer.PickInfo{Ctx: withRoute(context.Background(), routeVoterRead)}); status.Code(err) != codes.Unavailable {
		t.Fatalf("voter read with no voter reachable: %v, want Unavailable", err)
	}
}
