package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/understudy-kv/understudy/test/harness"
	"github.com/understudy-kv/understudy/wire"
)

// watchEvents runs a raw watch stream on key (a broken stream shows as an
// error, where clientv3 would quietly reconnect) and reports its created
// response, each event's value, and its end.
type watchEvents struct {
	created chan struct{}
	values  chan string
	ended   chan error
}

func openWatch(ctx context.Context, t *testing.T, conn *grpc.ClientConn, key string) *watchEvents {
	t.Helper()
	ws, err := pb.NewWatchClient(conn).Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ws.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{Key: []byte(key)}}}); err != nil {
		t.Fatal(err)
	}
	w := &watchEvents{created: make(chan struct{}), values: make(chan string, 100), ended: make(chan error, 1)}
	go func() {
		for {
			resp, err := ws.Recv()
			if err != nil {
				w.ended <- err
				return
			}
			if resp.Created {
				close(w.created)
			}
			if resp.Canceled {
				w.ended <- fmt.Errorf("watch canceled: %s", resp.CancelReason)
				return
			}
			for _, ev := range resp.Events {
				w.values <- string(ev.Kv.Value)
			}
		}
	}()
	return w
}

// quorumRead makes one read on the replica and returns how long it took,
// its answer header and its error.
func quorumRead(ctx context.Context, kv pb.KVClient, deadline time.Duration, serializable bool, bound string) (time.Duration, answer, error) {
	if bound != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, wire.MaxStalenessKey, bound)
	}
	rctx, cancel := context.WithTimeout(askHeaders(ctx), deadline)
	defer cancel()
	var md metadata.MD
	start := time.Now()
	resp, err := kv.Range(rctx, &pb.RangeRequest{Key: []byte("k"), Serializable: serializable}, grpc.Header(&md))
	took := time.Since(start)
	if err != nil {
		return took, answer{}, err
	}
	a, err := grpcAnswer(md)
	if err == nil && (len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "before") {
		err = fmt.Errorf("read %v, want k=before", resp.Kvs)
	}
	return took, a, err
}

// With a majority of voters stopped, a replica keeps serving weak reads and
// watches from its store, says it knows no leader, fails strong and bounded
// reads and writes within their deadlines, and serves every mode again by
// itself once the voters are back.
func TestReplicaServesThroughQuorumLoss(t *testing.T) {
	const outage = 30 * time.Second
	const deadline = 2 * time.Second
	const slack = time.Second // scheduling on a loaded machine, not the replica's own waits
	harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	r := harness.StartReplica(t, c, harness.ReplicaConfig{Name: "r1"})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := client(t, c.Endpoints()...).Put(ctx, "k", "before"); err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(strings.TrimPrefix(r.ClientURL, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	kv := pb.NewKVClient(conn)
	harness.WaitFor(t, 30*time.Second, "the replica to serve k strongly", func() (bool, error) {
		_, _, err := quorumRead(ctx, kv, deadline, false, "")
		return err == nil, err
	})
	open := openWatch(ctx, t, conn, "w")
	<-open.created

	stopped := []*harness.Member{c.Members[1], c.Members[2]}
	for _, m := range stopped {
		m.Proc.Kill()
	}
	down := time.Now()
	harness.WaitFor(t, 30*time.Second, "the replica to say it knows no leader", func() (bool, error) {
		_, a, err := quorumRead(ctx, kv, deadline, true, "")
		return err == nil && !a.leader, fmt.Errorf("%+v, %v", a, err)
	})
	t.Logf("known-leader false %v after the voters stopped", time.Since(down).Round(100*time.Millisecond))

	var late *watchEvents
	rounds := 0
	for time.Since(down) < outage {
		rounds++
		if took, a, err := quorumRead(ctx, kv, deadline, true, ""); err != nil || a.mode != wire.ReadModeWeak || a.leader {
			t.Fatalf("weak read during the outage: %+v, %v (took %v); want k=before, weak, no leader", a, err, took)
		}
		for _, tc := range []struct {
			what, bound  string
			serializable bool
		}{{"strong read", "", false}, {"bounded read (1s)", "1s", true}} {
			took, a, err := quorumRead(ctx, kv, deadline, tc.serializable, tc.bound)
			if err == nil || took > deadline+slack {
				t.Fatalf("%s during the outage: %+v, %v after %v; want an error within the %v deadline", tc.what, a, err, took, deadline)
			}
		}
		wctx, wcancel := context.WithTimeout(ctx, deadline)
		start := time.Now()
		_, err := kv.Put(wctx, &pb.PutRequest{Key: []byte("k"), Value: []byte("during")})
		wcancel()
		if took := time.Since(start); err == nil || took > deadline+slack {
			t.Fatalf("write through the replica during the outage: %v after %v; want an error within the %v deadline", err, took, deadline)
		}
		select {
		case err := <-open.ended:
			t.Fatalf("the watch opened before the outage ended during it: %v", err)
		default:
		}
		if late == nil {
			late = openWatch(ctx, t, conn, "w")
			select {
			case <-late.created:
			case err := <-late.ended:
				t.Fatalf("a watch opened during the outage: %v", err)
			case <-time.After(deadline):
				t.Fatalf("a watch opened during the outage was not created within %v", deadline)
			}
		}
	}
	t.Logf("%d rounds of checks during the %v outage", rounds, outage)

	for _, m := range stopped {
		m.Proc.Restart(t)
	}
	up := time.Now()
	harness.WaitFor(t, time.Minute, "a strong read on the replica after the voters return", func() (bool, error) {
		_, a, err := quorumRead(ctx, kv, deadline, false, "")
		return err == nil && a.mode == wire.ReadModeStrong && a.leader, fmt.Errorf("%+v, %v", a, err)
	})
	t.Logf("strong reads back %v after the voters returned", time.Since(up).Round(100*time.Millisecond))
	if _, a, err := quorumRead(ctx, kv, deadline, true, "1s"); err != nil || a.mode != wire.ReadModeBounded || a.bound > time.Second || !a.leader {
		t.Fatalf("bounded read after the outage: %+v, %v", a, err)
	}
	pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
	defer pcancel()
	if _, err := kv.Put(pctx, &pb.PutRequest{Key: []byte("w"), Value: []byte("after")}); err != nil {
		t.Fatalf("write through the replica after the outage: %v", err)
	}
	for name, w := range map[string]*watchEvents{"opened before the outage": open, "opened during it": late} {
		select {
		case v := <-w.values:
			if v != "after" {
				t.Errorf("watch %s saw %q, want the write made after the outage", name, v)
			}
		case err := <-w.ended:
			t.Errorf("watch %s ended: %v", name, err)
		case <-time.After(10 * time.Second):
			t.Errorf("watch %s saw no event for the write after the outage", name)
		}
	}
	if err := ctx.Err(); errors.Is(err, context.DeadlineExceeded) {
		t.Fatal("test ran out of time")
	}
}
