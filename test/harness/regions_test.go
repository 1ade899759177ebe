package harness

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Raft traffic between the regions is delayed and counted, raft traffic
// inside region A is neither, and region B's clients reach the voters
// through the delayed client proxies.
func TestRegionsDelayAndCountOnlyTheLinksBetweenRegions(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 3 voters, a replica and a stock learner")
	}
	const rtt = 200 * time.Millisecond
	g := StartRegions(t, RegionsConfig{})
	g.SetRTT(rtt, time.Millisecond)
	leader := g.Cluster.Leader(t)
	local := clientOf(t, leader.ClientURL)
	remote := clientOf(t, g.RemoteClientURL(leader))
	replica := clientOf(t, g.Replica.ClientURL)
	learner := clientOf(t, g.LearnerURL)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// 1 MB written in region A reaches the 2 members of region B (the
	// replica and the learner) through raft: about 2 MB cross, whereas the
	// 2 MB to the other voters do not count.
	raft0, client0 := g.WANTraffic()
	value := strings.Repeat("x", 100<<10)
	for i := range 10 {
		if _, err := local.Put(ctx, "regions/"+string(rune('a'+i)), value); err != nil {
			t.Fatalf("put at the leader: %v", err)
		}
	}
	const mb = 10 * 100 << 10
	WaitFor(t, 30*time.Second, "the replica has the last put", func() (bool, error) {
		resp, err := replica.Get(ctx, "regions/j", clientv3.WithSerializable())
		return err == nil && len(resp.Kvs) == 1, err
	})
	WaitFor(t, 30*time.Second, "the learner has the last put", func() (bool, error) {
		resp, err := learner.Get(ctx, "regions/j", clientv3.WithSerializable())
		return err == nil && len(resp.Kvs) == 1, err
	})
	raft1, client1 := g.WANTraffic()
	crossed := raft1.Sub(raft0)
	if crossed.Total() < 2*mb || crossed.Total() > 3*mb {
		t.Fatalf("raft bytes between the regions for %d bytes written in A with 2 members in B: %+v, want about twice as many (more than 3 times: A's own raft traffic counted)", mb, crossed)
	}
	if got := client1.Sub(client0); got.Total() != 0 {
		t.Fatalf("client bytes across the WAN with no client of B at work: %+v", got)
	}

	// A strong read in B crosses once (a ReadIndex round), a read sent to
	// a remote voter once; each takes at least the RTT. A write through
	// the remote proxy is counted as client traffic.
	for name, read := range map[string]func() error{
		"strong read at the replica": func() error { _, err := replica.Get(ctx, "regions/a"); return err },
		"read at the remote voter":   func() error { _, err := remote.Get(ctx, "regions/a"); return err },
	} {
		start := time.Now()
		if err := read(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if took := time.Since(start); took < rtt {
			t.Fatalf("%s took %v across an RTT of %v", name, took, rtt)
		}
	}
	_, client2 := g.WANTraffic()
	if got := client2.Sub(client1); got.Up == 0 || got.Down < 100<<10 {
		t.Fatalf("client bytes across the WAN for a 100 kB read at the remote voter: %+v", got)
	}
}

func clientOf(t *testing.T, url string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("client of %s: %v", url, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
