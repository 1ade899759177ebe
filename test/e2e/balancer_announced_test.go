package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/understudy-kv/understudy/balancer"
	"github.com/understudy-kv/understudy/test/harness"
	"github.com/understudy-kv/understudy/wire"
)

// A balancer given only the voters' URLs finds cascaded replicas, which
// are in no member list, by their announcements (issue 58), and spreads
// reads over the three of them; one killed, its announcement is gone
// within its lease's TTL, and reads go on with no error beyond one retry.
func TestBalancerFindsAnnouncedCascadedReplicas(t *testing.T) {
	// Serial: it bounds how soon a dead replica's announcement is gone.
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 1})
	voters := client(t, c.Endpoints()...)
	l := startReplica(t, bins, c, "l1", replicaOpts{})
	const ttl = 3 * time.Second
	var cs []*harness.Replica
	for i := range 3 {
		cs = append(cs, cascaded(t, c, fmt.Sprintf("c%d", i+1), []string{l.ClientURL}, "--resolver-ttl", "3"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	announcedKeys := func() (map[string]string, error) {
		resp, err := voters.Get(ctx, wire.ReplicasTarget+"/", clientv3.WithPrefix())
		if err != nil {
			return nil, err
		}
		m := map[string]string{}
		for _, kv := range resp.Kvs {
			m[string(kv.Key)] = string(kv.Value)
		}
		return m, nil
	}
	harness.WaitFor(t, 30*time.Second, "three cascaded replicas announced", func() (bool, error) {
		m, err := announcedKeys()
		return len(m) == 3, err
	})
	b, err := balancer.New(balancer.Config{
		Endpoints:     c.Endpoints(),
		Client:        clientv3.Config{DialTimeout: 5 * time.Second, Logger: zap.NewNop()},
		Logger:        zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel)),
		ProbeInterval: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	cli := b.Client()
	if _, err := voters.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	weak := func(c *harness.Replica) float64 { return served(t, c.ClientURL, "Range", "weak") }
	before := make([]float64, len(cs))
	for i, r := range cs {
		before[i] = weak(r)
	}
	harness.WaitFor(t, time.Minute, "reads spread over the three cascaded replicas", func() (bool, error) {
		for range 30 {
			if _, err := cli.Get(ctx, "k", clientv3.WithSerializable()); err != nil {
				return false, err
			}
		}
		for i, r := range cs {
			if weak(r) <= before[i] {
				return false, fmt.Errorf("%s served no read yet", r.Name)
			}
		}
		return true, nil
	})

	// One killed: its announcement is gone within the TTL, and reads go on.
	dead := cs[0]
	dead.Kill()
	killed := time.Now()
	var gone time.Duration
	failed, retried := 0, 0
	for gone == 0 || time.Since(killed) < gone+2*time.Second {
		for range 10 {
			if _, err := cli.Get(ctx, "k", clientv3.WithSerializable()); err != nil {
				retried++
				if _, err := cli.Get(ctx, "k", clientv3.WithSerializable()); err != nil {
					failed++
					t.Logf("a read failed twice: %v", err)
				}
			}
		}
		if gone == 0 {
			m, err := announcedKeys()
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := m[wire.ReplicasTarget+"/"+dead.Name]; !ok {
				gone = time.Since(killed)
			} else if time.Since(killed) > time.Minute {
				t.Fatalf("the killed replica's announcement is still there a minute later")
			}
		}
	}
	t.Logf("the killed replica's announcement was gone %v after the kill (TTL %v); %d reads retried once, %d failed twice", gone.Round(10*time.Millisecond), ttl, retried, failed)
	if gone > ttl+time.Second {
		t.Errorf("the killed replica's announcement was gone only %v after the kill; want within its TTL, %v (and etcd's lease check)", gone, ttl)
	}
	if failed > 0 {
		t.Errorf("%d reads failed even when tried again", failed)
	}
	// A stopped one revokes its announcement at once.
	cs[1].Stop()
	m, err := announcedKeys()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m[wire.ReplicasTarget+"/"+cs[1].Name]; ok {
		t.Errorf("a cleanly stopped replica's announcement outlives it: %v", m)
	}
}
