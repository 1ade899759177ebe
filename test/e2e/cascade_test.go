package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/test/harness"
)

// cascaded starts a cascaded replica of c fed by upstreams.
func cascaded(t *testing.T, c *harness.Cluster, name string, upstreams []string, extra ...string) *harness.Replica {
	t.Helper()
	return harness.StartReplica(t, c, harness.ReplicaConfig{Name: name, Upstream: upstreams, Extra: extra})
}

// A cascaded replica serves what its upstream replica copies, with the
// source's revisions: strong reads see a write acknowledged by the voters,
// a write through it is read back from it at once, and a watch on it
// delivers the source's events at the source's revisions.
func TestCascadedReplicaServes(t *testing.T) {
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	voters := client(t, c.Endpoints()...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i := range 10 {
		if _, err := voters.Put(ctx, fmt.Sprintf("k%d", i), "before"); err != nil {
			t.Fatal(err)
		}
	}
	r := startReplica(t, bins, c, "r1", replicaOpts{})
	cr := cascaded(t, c, "c1", []string{r.ClientURL})
	cc := client(t, cr.ClientURL)

	wch := cc.Watch(ctx, "w/", clientv3.WithPrefix())
	put, err := voters.Put(ctx, "w/a", "1")
	if err != nil {
		t.Fatal(err)
	}
	got, err := cc.Get(ctx, "w/a")
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "1" || got.Kvs[0].ModRevision != put.Header.Revision {
		t.Fatalf("strong read through the cascaded replica after a put acknowledged at revision %d: %v (%v)", put.Header.Revision, got.Kvs, err)
	}
	own, err := cc.Put(ctx, "w/b", "2")
	if err != nil {
		t.Fatalf("put through the cascaded replica: %v", err)
	}
	weak, err := cc.Get(ctx, "w/b", clientv3.WithSerializable())
	if err != nil || len(weak.Kvs) != 1 || weak.Kvs[0].ModRevision != own.Header.Revision {
		t.Fatalf("weak read of its own write through the cascaded replica: %v (%v), want revision %d", weak.Kvs, err, own.Header.Revision)
	}
	want := []int64{put.Header.Revision, own.Header.Revision}
	for i := 0; i < len(want); {
		select {
		case resp := <-wch:
			for _, ev := range resp.Events {
				if ev.Kv.ModRevision != want[i] {
					t.Fatalf("watch event %d at revision %d, want %d", i, ev.Kv.ModRevision, want[i])
				}
				i++
			}
		case <-ctx.Done():
			t.Fatalf("watch: %d of %d events", i, len(want))
		}
	}
	old, err := cc.Get(ctx, "k3")
	if err != nil || len(old.Kvs) != 1 || string(old.Kvs[0].Value) != "before" {
		t.Fatalf("a key from the bootstrap snapshot: %v (%v)", old.Kvs, err)
	}
}
