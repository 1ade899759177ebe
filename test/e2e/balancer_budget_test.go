package e2e

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/understudy-kv/understudy/balancer"
	"github.com/understudy-kv/understudy/test/harness"
	"github.com/understudy-kv/understudy/wire"
)

// ackLog is a writer's acknowledged history: the revision of each write
// and when its acknowledgement came back.
type ackLog struct {
	mu   sync.Mutex
	at   []time.Time
	revs []int64
}

func (l *ackLog) add(at time.Time, rev int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.at, l.revs = append(l.at, at), append(l.revs, rev)
}

// ackedBy is the newest revision acknowledged at or before t; 0 if none.
// A read that started at s with budget d must show at least ackedBy(s-d).
func (l *ackLog) ackedBy(t time.Time) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := sort.Search(len(l.at), func(i int) bool { return l.at[i].After(t) })
	if i == 0 {
		return 0
	}
	return l.revs[i-1]
}

// weakBound is a replica's staleness bound, from the header of a weak read
// made on it directly.
func weakBound(t *testing.T, kv pb.KVClient) (time.Duration, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(askHeaders(context.Background()), 5*time.Second)
	defer cancel()
	var md metadata.MD
	if _, err := kv.Range(ctx, &pb.RangeRequest{Key: []byte("w"), Serializable: true}, grpc.Header(&md)); err != nil {
		return 0, err
	}
	a, err := grpcAnswer(md)
	return a.bound, err
}

// A read with a staleness budget never returns state older than the
// budget: it goes to a replica that can prove it, else to a voter.
func TestBalancerStalenessBudget(t *testing.T) {
	const budget = 200 * time.Millisecond
	const reads = 1000
	harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3, PeerProxies: true})
	r1 := harness.StartReplica(t, c, harness.ReplicaConfig{Name: "r1", PeerProxy: true})
	r2 := harness.StartReplica(t, c, harness.ReplicaConfig{Name: "r2", PeerProxy: true})
	voters := client(t, c.Endpoints()...)
	id1, _ := memberID(t, voters, r1.ClientURL)
	id2, _ := memberID(t, voters, r2.ClientURL)
	direct1, direct2 := pb.NewKVClient(client(t, r1.ClientURL).ActiveConnection()), pb.NewKVClient(client(t, r2.ClientURL).ActiveConnection())

	b, err := balancer.New(balancer.Config{
		Endpoints:     []string{c.Members[0].ClientURL},
		Client:        clientv3.Config{DialTimeout: 5 * time.Second, Logger: zap.NewNop()},
		Logger:        zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)),
		ProbeInterval: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	kv := pb.NewKVClient(b.Client().ActiveConnection())

	// A writer on the voters: its acknowledged history judges every read.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var acks ackLog
	wctx, stopWriter := context.WithCancel(ctx)
	writerDone := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			resp, err := voters.Put(wctx, "w", fmt.Sprint(i))
			if wctx.Err() != nil {
				writerDone <- nil
				return
			}
			if err != nil {
				writerDone <- err
				return
			}
			acks.add(time.Now(), resp.Header.Revision)
		}
	}()
	defer func() {
		stopWriter()
		if err := <-writerDone; err != nil {
			t.Errorf("writer: %v", err)
		}
	}()

	// readAll makes n reads with the budget and checks each against the
	// writer's history and the replica's own bound; it returns how many
	// each member served.
	readAll := func(n int) map[uint64]int {
		t.Helper()
		served := map[uint64]int{}
		bctx := balancer.WithMaxStaleness(ctx, budget)
		for i := range n {
			rctx, rcancel := context.WithTimeout(bctx, 5*time.Second)
			start := time.Now()
			need := acks.ackedBy(start.Add(-budget))
			var md metadata.MD
			resp, err := kv.Range(rctx, &pb.RangeRequest{Key: []byte("w"), Serializable: true}, grpc.Header(&md))
			rcancel()
			if err != nil {
				t.Fatalf("read %d: %v", i, err)
			}
			from := resp.Header.MemberId
			served[from]++
			if len(resp.Kvs) == 0 || resp.Kvs[0].ModRevision < need {
				t.Fatalf("read %d from %x: %v; the writer's revision %d was acknowledged more than %v before the read began", i, from, resp.Kvs, need, budget)
			}
			if from == id1 || from == id2 {
				if a, err := grpcAnswer(md); err != nil || a.bound > budget || a.mode != wire.ReadModeBounded {
					t.Fatalf("read %d from replica %x: answer %+v (%v), want a bounded read within %v", i, from, a, err, budget)
				}
			}
		}
		return served
	}

	harness.WaitFor(t, 30*time.Second, "writes acknowledged", func() (bool, error) { return acks.ackedBy(time.Now()) > 0, nil })
	// No read has used a budget yet: the balancer's probes (bounded by its
	// MaxStaleness, 5s) leave the replicas' rounds at the idle rate.
	for _, r := range []*harness.Replica{r1, r2} {
		harness.WaitFor(t, 30*time.Second, r.Name+"'s rounds at the idle rate with only the balancer's probes", func() (bool, error) {
			p := metric(t, r.ClientURL, "understudy_replica_freshness_period_seconds")
			return p == 1, fmt.Errorf("period %vs", p)
		})
	}
	r1.CutPeerLinks(t, c)
	harness.WaitFor(t, 30*time.Second, "r1 to be unable to prove 1s", func() (bool, error) {
		d, err := weakBound(t, direct1)
		return err == nil && d > time.Second, fmt.Errorf("bound %v: %v", d, err)
	})
	served := readAll(reads)
	t.Logf("one replica cut off: %d reads served by r1 %d, r2 %d, voters %d", reads, served[id1], served[id2], reads-served[id1]-served[id2])
	// The reads' budget: the balancer's probes ask for it, and r2 keeps its
	// rounds at the full rate for them.
	if p := metric(t, r2.ClientURL, "understudy_replica_freshness_period_seconds"); p != 0.05 {
		t.Errorf("r2's rounds every %vs after reads with a %v budget; want every 0.05s (--freshness-interval)", p, budget)
	}
	if served[id1] != 0 {
		t.Errorf("the cut-off r1 served %d reads", served[id1])
	}
	if served[id2] < reads/2 {
		t.Errorf("the fresh r2 served %d of %d reads, want most", served[id2], reads)
	}

	r2.CutPeerLinks(t, c)
	harness.WaitFor(t, 30*time.Second, "r2 to be unable to prove 1s", func() (bool, error) {
		d, err := weakBound(t, direct2)
		return err == nil && d > time.Second, fmt.Errorf("bound %v: %v", d, err)
	})
	served = readAll(reads)
	t.Logf("both replicas cut off: %d reads served by r1 %d, r2 %d, voters %d", reads, served[id1], served[id2], reads-served[id1]-served[id2])
	if served[id1]+served[id2] != 0 {
		t.Errorf("with every replica cut off, replicas served %d reads; want all on the voters", served[id1]+served[id2])
	}
}
