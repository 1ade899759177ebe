package e2e

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/understudy-kv/understudy/test/harness"
	"github.com/understudy-kv/understudy/wire"
)

// TestQuietReplica: a replica no client uses slows its freshness rounds to
// --freshness-quiet-interval (so that it costs the leader what a stock
// learner costs it), yet /readyz still says ready (the probe gets a round
// of its own when the freshness is older than --ready-max-staleness), and
// the first request brings the rounds back to --freshness-idle-interval.
func TestQuietReplica(t *testing.T) {
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	r := harness.StartReplica(t, c, harness.ReplicaConfig{Name: "r1",
		Extra: []string{"--freshness-quiet-interval", "4s", "--ready-max-staleness", "2s"}})
	gauge := func(name string) float64 { return metric(t, r.ClientURL, name) }

	// /metrics is no client request: scraping it leaves the replica quiet.
	harness.WaitFor(t, 30*time.Second, "the replica quiet (rounds every 4s)", func() (bool, error) {
		p := gauge("understudy_replica_freshness_period_seconds")
		return p == 4, fmt.Errorf("period %vs", p)
	})
	// Rounds every --freshness-idle-interval (1s) would keep the age below
	// about a second.
	harness.WaitFor(t, 15*time.Second, "the quiet replica's freshness older than --ready-max-staleness", func() (bool, error) {
		age := gauge("understudy_replica_freshness_age_seconds")
		return age > 2.2, fmt.Errorf("freshness age %vs", age)
	})
	code, body := httpGet(r.ClientURL + "/readyz?verbose")
	if code != http.StatusOK {
		t.Fatalf("/readyz of a quiet replica: %d\n%s", code, body)
	}
	if age := gauge("understudy_replica_freshness_age_seconds"); age > 2 {
		t.Fatalf("freshness age %vs after /readyz: the probe got no round", age)
	}
	if p := gauge("understudy_replica_freshness_period_seconds"); p != 4 {
		t.Fatalf("period %vs after /readyz; a probe is no client request: want still 4s", p)
	}

	// A client request ends the quiet spell.
	kv := pb.NewKVClient(client(t, r.ClientURL).ActiveConnection())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var hdr metadata.MD
	if _, err := kv.Range(ctx, &pb.RangeRequest{Key: []byte("k"), Serializable: true}, grpc.Header(&hdr)); err != nil {
		t.Fatal(err)
	}
	a, err := grpcAnswer(hdr)
	checkAnswer(t, "a weak read after the quiet spell", a, err, wire.ReadModeWeak, 0, time.Hour, true, 1)
	harness.WaitFor(t, 10*time.Second, "rounds back to every second", func() (bool, error) {
		p, age := gauge("understudy_replica_freshness_period_seconds"), gauge("understudy_replica_freshness_age_seconds")
		return p == 1 && age < 1.5, fmt.Errorf("period %vs, freshness age %vs", p, age)
	})
}
