package balancer

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/understudy-kv/understudy/wire"
)

// farReplica answers probes as a replica far from the voters does: a bound
// of at least prove it serves (reporting that bound), a tighter one it
// cannot prove before the deadline.
type farReplica struct {
	pb.UnimplementedKVServer
	prove time.Duration
	mu    sync.Mutex
	asked []time.Duration
}

func (f *farReplica) Range(ctx context.Context, _ *pb.RangeRequest) (*pb.RangeResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	bound, err := time.ParseDuration(md.Get(wire.MaxStalenessKey)[0])
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	f.mu.Lock()
	f.asked = append(f.asked, bound)
	f.mu.Unlock()
	if bound < f.prove {
		<-ctx.Done()
		return nil, status.Error(codes.Unavailable, "readpath: replica is staler than the read's bound and could not catch up before the deadline")
	}
	if err := grpc.SetHeader(ctx, metadata.Pairs(wire.StalenessBoundKey, f.prove.String())); err != nil {
		return nil, err
	}
	return &pb.RangeResponse{}, nil
}

func (f *farReplica) take() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := f.asked
	f.asked = nil
	return a
}

func serveFake(t *testing.T, kv pb.KVServer) *grpc.ClientConn {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	pb.RegisterKVServer(s, kv)
	go s.Serve(l)
	t.Cleanup(s.Stop)
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// A replica that cannot prove the tightest budget is still healthy: the
// probe with MaxStaleness answers, within ProbeTimeout, and the replica is
// not asked for the tight bound again for tightRetry probe intervals. One
// that can prove it answers the tight probe alone.
func TestAReplicaThatCannotProveTheTightBudgetStaysHealthy(t *testing.T) {
	b := &Balancer{cfg: Config{MaxStaleness: 5 * time.Second, ProbeTimeout: 400 * time.Millisecond, ProbeInterval: time.Second}, lg: zap.NewNop(), clock: clockwork.NewRealClock()}
	far := &farReplica{prove: time.Second}
	conn := serveFake(t, far)
	ep := &endpoint{}
	ctx := context.Background()

	start := time.Now()
	a, err := b.probeReplica(ctx, conn, ep, 200*time.Millisecond)
	took := time.Since(start)
	if err != nil || a.md.Get(wire.StalenessBoundKey)[0] != "1s" {
		t.Fatalf("probe of a replica that proves 1s, tightest budget 200ms: %v, %v; want its answer to the 5s probe", a.md, err)
	}
	if asked := far.take(); len(asked) != 2 || asked[0] != 200*time.Millisecond || asked[1] != 5*time.Second {
		t.Fatalf("bounds asked %v; want 200ms, then 5s", asked)
	}
	if took > b.cfg.ProbeTimeout {
		t.Fatalf("the probe took %v, more than ProbeTimeout %v", took, b.cfg.ProbeTimeout)
	}
	if _, err := b.probeReplica(ctx, conn, ep, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if asked := far.take(); len(asked) != 1 || asked[0] != 5*time.Second {
		t.Fatalf("right after a failed tight probe, bounds asked %v; want 5s only", asked)
	}
	ep.tightFailed.Store(time.Now().Add(-tightRetry * b.cfg.ProbeInterval).UnixNano())
	if _, err := b.probeReplica(ctx, conn, ep, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if asked := far.take(); len(asked) != 2 {
		t.Fatalf("%d probe intervals after a failed tight probe, bounds asked %v; want 200ms again, then 5s", tightRetry, asked)
	}

	near := &farReplica{prove: 100 * time.Millisecond}
	a, err = b.probeReplica(ctx, serveFake(t, near), &endpoint{}, 200*time.Millisecond)
	if err != nil || a.md.Get(wire.StalenessBoundKey)[0] != "100ms" {
		t.Fatalf("probe of a replica that proves 100ms: %v, %v", a.md, err)
	}
	if asked := near.take(); len(asked) != 1 || asked[0] != 200*time.Millisecond {
		t.Fatalf("bounds asked %v; want 200ms only", asked)
	}
	// No budget used: the probe with MaxStaleness alone.
	if _, err := b.probeReplica(ctx, conn, &endpoint{}, 0); err != nil {
		t.Fatal(err)
	}
	if asked := far.take(); len(asked) != 1 || asked[0] != 5*time.Second {
		t.Fatalf("with no budget, bounds asked %v; want 5s only", asked)
	}
}
