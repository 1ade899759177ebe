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
// learner costs it), yet /readyz still says ready (etcd's linearizable_read
// check, or a round of its own, proves the freshness for the probe),
// `replica status` still finds it promotable (by its raft contact with the
// leader, not its freshness), and the first request brings the rounds back
// to --freshness-idle-interval at once.
func TestQuietReplica(t *testing.T) {
	timed(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	r := harness.StartReplica(t, c, harness.ReplicaConfig{Name: "r1",
		Extra: []string{"--freshness-quiet-interval", "20s", "--ready-max-staleness", "2s"}})
	gauge := func(name string) float64 { return metric(t, r.ClientURL, name) }
	stale := func() {
		t.Helper()
		harness.WaitFor(t, 15*time.Second, "the quiet replica's freshness older than --ready-max-staleness", func() (bool, error) {
			age := gauge("understudy_replica_freshness_age_seconds")
			return age > 2.2, fmt.Errorf("freshness age %vs", age)
		})
	}

	// /metrics is no client request: scraping it leaves the replica quiet.
	harness.WaitFor(t, time.Minute, "the replica quiet (rounds every 20s)", func() (bool, error) {
		p := gauge("understudy_replica_freshness_period_seconds")
		return p == 20, fmt.Errorf("period %vs", p)
	})
	// Rounds every --freshness-idle-interval (1s) would keep the age below
	// about a second; the next quiet round is 20s after the last.
	stale()
	// understudy_replica_ready holds a quiet replica ready by its rounds'
	// own schedule, and the scrapes above woke nothing: no round per scrape.
	if v := gauge("understudy_replica_ready"); v != 1 {
		t.Fatalf("understudy_replica_ready %v for a quiet replica, want 1", v)
	}
	code, body := httpGet(r.ClientURL + "/readyz?verbose")
	if code != http.StatusOK {
		t.Fatalf("/readyz of a quiet replica: %d\n%s", code, body)
	}
	if age := gauge("understudy_replica_freshness_age_seconds"); age > 2 {
		t.Fatalf("freshness age %vs after /readyz: the probe proved nothing", age)
	}
	if p := gauge("understudy_replica_freshness_period_seconds"); p != 20 {
		t.Fatalf("period %vs after /readyz; a probe is no client request: want still 20s", p)
	}

	// `replica status` judges promotion by the leader contact, which a
	// quiet replica keeps through raft's heartbeats.
	stale()
	sts, out := replicaStatus(t, bins, c.Endpoints()...)
	found := false
	for _, s := range sts {
		if s.Name == "r1" {
			found = true
			age, err := time.ParseDuration(s.Freshness)
			if err != nil || age < 2*time.Second || s.Promotable == nil || !*s.Promotable {
				t.Fatalf("replica status of the quiet replica: freshness %q (want over 2s), promotable %v (want true): %s\n%s", s.Freshness, s.Promotable, s.Why, out)
			}
		}
	}
	if !found {
		t.Fatalf("replica status lists no r1:\n%s", out)
	}

	// That status call was a client request: the loop woke at once, with no
	// wait for the quiet round 20s after the last.
	harness.WaitFor(t, 2*time.Second, "rounds back to every second", func() (bool, error) {
		p := gauge("understudy_replica_freshness_period_seconds")
		return p == 1, fmt.Errorf("period %vs", p)
	})
	kv := pb.NewKVClient(client(t, r.ClientURL).ActiveConnection())
	ctx, cancel := context.WithTimeout(askHeaders(context.Background()), 10*time.Second)
	defer cancel()
	var hdr metadata.MD
	if _, err := kv.Range(ctx, &pb.RangeRequest{Key: []byte("k"), Serializable: true}, grpc.Header(&hdr)); err != nil {
		t.Fatal(err)
	}
	a, err := grpcAnswer(hdr)
	checkAnswer(t, "a weak read after the quiet spell", a, err, wire.ReadModeWeak, 0, 3*time.Second, true, 1)
}
