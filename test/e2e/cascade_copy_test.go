package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/test/harness"
)

// copyWorkload writes through cli what a cascaded replica must copy
// exactly: puts, deletes, a prefix delete, multi-key transactions, keys on
// leases that expire and that are revoked, and returns the revisions it
// ended each phase at and the lease it kept.
func copyWorkload(t *testing.T, cli *clientv3.Client) ([]int64, clientv3.LeaseID) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var revs []int64
	mark := func() {
		r, err := cli.Get(ctx, "x")
		if err != nil {
			t.Fatal(err)
		}
		revs = append(revs, r.Header.Revision)
	}
	for i := range 50 {
		if _, err := cli.Put(ctx, fmt.Sprintf("c/p%02d", i), fmt.Sprintf("v%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 10 { // overwrite: versions grow
		if _, err := cli.Put(ctx, fmt.Sprintf("c/p%02d", i), "again"); err != nil {
			t.Fatal(err)
		}
	}
	mark()
	if _, err := cli.Delete(ctx, "c/p1", clientv3.WithPrefix()); err != nil { // c/p10…c/p19
		t.Fatal(err)
	}
	if _, err := cli.Delete(ctx, "c/p05"); err != nil {
		t.Fatal(err)
	}
	for i := range 5 { // multi-key transactions: puts and deletes at one revision
		_, err := cli.Txn(ctx).Then(
			clientv3.OpPut(fmt.Sprintf("c/t%d/a", i), "a"), clientv3.OpPut(fmt.Sprintf("c/t%d/b", i), "b"),
			clientv3.OpDelete(fmt.Sprintf("c/p2%d", i))).Commit()
		if err != nil {
			t.Fatal(err)
		}
	}
	short, err := cli.Grant(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	revoked, err := cli.Grant(ctx, 600)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := cli.Grant(ctx, 600)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		for _, l := range []clientv3.LeaseID{short.ID, revoked.ID, kept.ID} {
			if _, err := cli.Put(ctx, fmt.Sprintf("c/l%x/%d", l, i), "leased", clientv3.WithLease(l)); err != nil {
				t.Fatal(err)
			}
		}
	}
	mark()
	if _, err := cli.Revoke(ctx, revoked.ID); err != nil {
		t.Fatal(err)
	}
	// The short lease expires: its keys go at a revision of the source's.
	harness.WaitFor(t, 30*time.Second, "the short lease's keys expired", func() (bool, error) {
		r, err := cli.Get(ctx, fmt.Sprintf("c/l%x/", short.ID), clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && r.Count == 0, err
	})
	mark()
	return revs, kept.ID
}

// sameAt fails unless a and b hold the same keys, values, create and mod
// revisions, versions and leases at revision rev (0: now).
func sameAt(t *testing.T, what string, a, b *clientv3.Client, rev int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithFromKey(), clientv3.WithRev(rev), clientv3.WithSerializable()}
	ra, err := a.Get(ctx, "\x00", opts...)
	if err != nil {
		t.Fatalf("%s: the source at revision %d: %v", what, rev, err)
	}
	rb, err := b.Get(ctx, "\x00", opts...)
	if err != nil {
		t.Fatalf("%s: the copy at revision %d: %v", what, rev, err)
	}
	if len(ra.Kvs) != len(rb.Kvs) {
		t.Fatalf("%s at revision %d: %d keys at the source, %d in the copy", what, rev, len(ra.Kvs), len(rb.Kvs))
	}
	for i := range ra.Kvs {
		x, y := ra.Kvs[i], rb.Kvs[i]
		if string(x.Key) != string(y.Key) || string(x.Value) != string(y.Value) || x.CreateRevision != y.CreateRevision ||
			x.ModRevision != y.ModRevision || x.Version != y.Version || x.Lease != y.Lease {
			t.Fatalf("%s at revision %d: key %d differs:\n source %s\n copy   %s", what, rev, i, kvText(x), kvText(y))
		}
	}
}

func kvText(kv *mvccpb.KeyValue) string {
	return fmt.Sprintf("%q=%q create %d mod %d version %d lease %x", kv.Key, kv.Value, kv.CreateRevision, kv.ModRevision, kv.Version, kv.Lease)
}

// A cascaded replica (fed by a learner replica) and one fed by it are
// exact copies: at three revisions of a workload of puts, deletes,
// multi-key transactions, leases revoked and expired, every key has the
// source's value, create and mod revision, version and lease; after the
// source compacts, both refuse the compacted revisions as the source does;
// a lease's TTL through them is the source's.
func TestCascadedReplicaIsAnExactCopy(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	voters := client(t, c.Endpoints()...)
	if _, err := voters.Put(context.Background(), "c/before", "snapshot"); err != nil {
		t.Fatal(err)
	}
	r := startReplica(t, bins, c, "r1", replicaOpts{})
	c1 := cascaded(t, c, "c1", []string{r.ClientURL}, "--log-level", "debug")
	c2 := cascaded(t, c, "c2", []string{c1.ClientURL})
	revs, kept := copyWorkload(t, voters)
	end := revs[len(revs)-1]
	copies := map[string]*clientv3.Client{"c1": client(t, c1.ClientURL), "c2 (fed by c1)": client(t, c2.ClientURL)}
	for name, cc := range copies {
		harness.WaitFor(t, time.Minute, name+" holds the source's last revision", func() (bool, error) {
			resp, err := cc.Get(context.Background(), "x", clientv3.WithSerializable())
			return err == nil && resp.Header.Revision >= end, err
		})
		for _, rev := range append(revs, 0) {
			sameAt(t, name, voters, cc, rev)
		}
	}
	// A lease's life is the source's. (The kept lease by its ID: a
	// member's lease list is its own, and may still hold the revoked one.)
	for name, cc := range copies {
		ttl, err := cc.TimeToLive(context.Background(), kept, clientv3.WithAttachedKeys())
		if err != nil || ttl.TTL <= 0 || ttl.TTL > 600 || len(ttl.Keys) != 3 {
			var got string
			if ttl != nil {
				got = fmt.Sprintf("TTL %d, %d keys", ttl.TTL, len(ttl.Keys))
			}
			t.Errorf("%s: TimeToLive of the kept lease %x: %s (%v), want the source's TTL (≤ 600 s) and 3 keys", name, kept, got, err)
		}
	}

	// The source compacts; the copies follow.
	if _, err := voters.Compact(context.Background(), revs[1]); err != nil {
		t.Fatal(err)
	}
	for name, cc := range copies {
		harness.WaitFor(t, 30*time.Second, name+" refuses the compacted revisions", func() (bool, error) {
			_, err := cc.Get(context.Background(), "c/", clientv3.WithPrefix(), clientv3.WithRev(revs[0]), clientv3.WithSerializable())
			return errors.Is(err, rpctypes.ErrCompacted), err
		})
		sameAt(t, name+" after the compaction", voters, cc, revs[1])
	}
}
