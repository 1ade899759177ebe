package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"

	"github.com/understudy-kv/understudy/test/harness"
)

// The voters restored from a backup behind what cascaded replicas hold (at
// depth 1 and 2), as docs/operations.md's runbook says: a backup through
// the learner replica, then x=lost and more writes that every copy holds,
// then every voter restored (with a new cluster token: a new cluster ID; or
// with the old one, as etcd's disaster-recovery example and a cold copy of
// the data dirs keep it) and the learner replica rejoined; x=new written
// in the restored cluster, and enough writes that it passes the old
// revision. Strong reads of x through both cascaded replicas, all along,
// are linearizable with the restore as a write of the backup's value
// (porcupine): never `lost` once the restored cluster took x=new. Each
// cascaded replica notices that its upstream holds another history, says
// so, and bootstraps again; afterwards its keyspace is a voter's, at one
// revision.
func TestCascadedReplicasFollowARestore(t *testing.T) {
	for _, tc := range []struct {
		name     string
		newToken bool
		bump     uint64
	}{{"new-cluster-id", true, 0}, {"same-cluster-id", false, 0}, {"bump-revision", false, 1_000_000}} {
		t.Run(tc.name, func(t *testing.T) { cascadedThroughRestore(t, tc.newToken, tc.bump) })
	}
}

// cascadedThroughRestore restores the voters behind two cascaded replicas:
// with a new cluster token if newToken, and with etcd's --bump-revision bump
// --mark-compacted if bump is not 0 (the restore docs/operations.md
// recommends: the copies find their upstream compacted past them rather
// than another history).
func cascadedThroughRestore(t *testing.T, newToken bool, bump uint64) {
	beside(t)
	bins := harness.Binaries(t)
	oldToken := "before-restore-" + fmt.Sprint(time.Now().UnixNano())
	c := harness.StartCluster(t, harness.ClusterConfig{Kinds: []harness.Kind{harness.KindEtcd}, Token: oldToken})
	voters := client(t, c.Endpoints()...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	l := startReplica(t, bins, c, "l1", replicaOpts{})
	c1 := cascaded(t, c, "c1", []string{l.ClientURL})
	c2 := cascaded(t, c, "c2", []string{c1.ClientURL})
	for i := range 5 {
		if _, err := voters.Put(ctx, fmt.Sprintf("base/%d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	snap := filepath.Join(t.TempDir(), "backup.db")
	saveSnapshot(ctx, t, client(t, l.ClientURL), snap)

	start := time.Now()
	now := func() int64 { return int64(time.Since(start)) }
	var (
		mu  sync.Mutex
		ops []porcupine.Operation
	)
	record := func(op porcupine.Operation) { mu.Lock(); ops = append(ops, op); mu.Unlock() }
	put := func(cli *clientv3.Client, client int, key, val string) int64 {
		t.Helper()
		call := now()
		resp, err := cli.Put(ctx, key, val)
		if err != nil {
			t.Fatalf("put %s=%s: %v", key, val, err)
		}
		record(porcupine.Operation{ClientId: client, Input: regInput{Put: true, Key: key, Value: val}, Call: call, Output: regOutput{}, Return: now()})
		return resp.Header.Revision
	}
	put(voters, 100, "x", "lost")
	var last int64
	for i := range 30 {
		last = put(voters, 100, fmt.Sprintf("lost/%d", i), "v")
	}
	for _, r := range []*harness.Replica{c1, c2} {
		waitHolds(t, ctx, r, last)
	}

	// Strong reads of x through both, all along.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	served := map[string]int{}
	for i, r := range []*harness.Replica{c1, c2, c1, c2} {
		cli := client(t, r.ClientURL)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
				call := now()
				resp, err := cli.Get(rctx, "x")
				ret := now()
				rcancel()
				if err != nil {
					// A failed read observed nothing; do not spin on a
					// refusing replica.
					select {
					case <-stop:
						return
					case <-time.After(50 * time.Millisecond): // pacing, not synchronisation
					}
					continue
				}
				got := ""
				if len(resp.Kvs) > 0 {
					got = string(resp.Kvs[0].Value)
				}
				record(porcupine.Operation{ClientId: i, Input: regInput{Key: "x"}, Call: call, Output: regOutput{Value: got}, Return: ret})
				mu.Lock()
				served[r.Name+"="+got]++
				mu.Unlock()
			}
		}()
	}

	harness.WaitFor(t, time.Minute, "both cascaded replicas serve x=lost strongly", func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return served["c1=lost"] >= 5 && served["c2=lost"] >= 5, nil
	})

	// The restore: a write of the backup's value of x (absent) that takes
	// effect between the voters' stop and the restored cluster's first
	// write.
	restoreCall := now()
	oldID := clusterID(t, ctx, voters)
	l.Stop()
	token := oldToken // the same cluster ID
	if newToken {
		token = "restored-" + fmt.Sprint(time.Now().UnixNano())
	}
	restoreVoters(t, c, snap, token, bump)
	voters = client(t, c.Endpoints()...)
	harness.WaitFor(t, time.Minute, "the restored cluster takes a write", func() (bool, error) {
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		defer pcancel()
		_, err := voters.Put(pctx, "restored", "yes")
		return err == nil, err
	})
	record(porcupine.Operation{ClientId: 101, Input: regInput{Put: true, Key: "x", Value: ""}, Call: restoreCall, Output: regOutput{}, Return: now()})
	newID := clusterID(t, ctx, voters)
	if newToken == (newID == oldID) {
		t.Fatalf("restored cluster ID %x, old %x: the restore did not do what the case says (new token %v)", newID, oldID, newToken)
	}
	l.RestartWithArgs(t, append(l.Args(), fmt.Sprintf("--replace-stale-data-dir=%x", newID)))
	l.WaitServing(t, 2*time.Minute)
	put(voters, 100, "x", "new")
	// Past the old revision, so that an old history would take the new
	// one's revisions on top of its own.
	for i := range 40 {
		last = put(voters, 100, fmt.Sprintf("after/%d", i), "v")
	}
	// Not fatal: the history says more than the wait.
	newServed := waitUntil(2*time.Minute, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return served["c1=new"] >= 5 && served["c2=new"] >= 5
	})
	close(stop)
	wg.Wait()
	t.Logf("%d operations; reads served: %v", len(ops), served)
	if res := check(t, ops); res != porcupine.Ok {
		t.Errorf("strong reads through cascaded replicas across the restore: porcupine says %s over %d operations, want Ok", res, len(ops))
	}
	if !newServed {
		t.Fatalf("the cascaded replicas did not serve x=new strongly within 2 minutes of the restore (%v)", served)
	}
	for _, r := range []*harness.Replica{c1, c2} {
		waitHolds(t, ctx, r, last)
		sameKeyspace(t, ctx, voters, client(t, r.ClientURL), last)
		if bump != 0 {
			if n := metric(t, r.ClientURL, "understudy_cascade_bootstraps_total"); n < 2 {
				t.Errorf("%s: understudy_cascade_bootstraps_total %v after a bumped restore, want 2 or more", r.Name, n)
			}
			continue
		}
		log := r.Log()
		for _, line := range strings.Split(log, "\n") {
			if strings.Contains(line, "another history") {
				t.Logf("%s: %s", r.Name, line)
				break
			}
		}
		if !strings.Contains(log, "another history") || !strings.Contains(log, fmt.Sprintf("%x", newID)) {
			t.Errorf("%s's log does not say its upstream holds another history, naming the cluster %x:\n%s", r.Name, newID, tailLines(log, 30))
		}
		if n := metric(t, r.ClientURL, "understudy_cascade_history_changes_total"); n < 1 {
			t.Errorf("%s: understudy_cascade_history_changes_total %v, want 1 or more", r.Name, n)
		}
	}
}

// restoreVoters stops every voter of c, replaces its data dir with etcd's
// restore of snap under the cluster token token (with --bump-revision bump
// --mark-compacted if bump is not 0), and starts it again.
func restoreVoters(t *testing.T, c *harness.Cluster, snap, token string, bump uint64) {
	t.Helper()
	for _, m := range c.Members {
		m.Proc.Stop()
	}
	var initial []string
	for _, m := range c.Members {
		initial = append(initial, m.Name+"="+m.AdvertisePeerURL)
	}
	for _, m := range c.Members {
		if err := os.RemoveAll(m.DataDir); err != nil {
			t.Fatal(err)
		}
		err := snapshot.NewV3(zap.NewNop()).Restore(snapshot.RestoreConfig{SnapshotPath: snap, Name: m.Name,
			OutputDataDir: m.DataDir, PeerURLs: []string{m.AdvertisePeerURL}, InitialCluster: strings.Join(initial, ","),
			InitialClusterToken: token, RevisionBump: bump, MarkCompacted: bump != 0})
		if err != nil {
			t.Fatalf("etcd's restore of %s: %v", m.Name, err)
		}
	}
	for _, m := range c.Members {
		m.Proc.Restart(t)
	}
}

func clusterID(t *testing.T, ctx context.Context, cli *clientv3.Client) uint64 {
	t.Helper()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.ClusterId
}

// waitHolds waits until r's store holds revision rev.
func waitHolds(t *testing.T, ctx context.Context, r *harness.Replica, rev int64) {
	t.Helper()
	cli := client(t, r.ClientURL)
	harness.WaitFor(t, time.Minute, r.Name+" holds revision "+fmt.Sprint(rev), func() (bool, error) {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		resp, err := cli.Get(rctx, "\x00", clientv3.WithSerializable(), clientv3.WithCountOnly())
		return err == nil && resp.Header.Revision >= rev, err
	})
}

// sameKeyspace compares the whole keyspace of a and b at revision rev:
// every key's value, create and mod revision, version and lease.
func sameKeyspace(t *testing.T, ctx context.Context, a, b *clientv3.Client, rev int64) {
	t.Helper()
	get := func(cli *clientv3.Client) (map[string]string, error) {
		resp, err := cli.Get(ctx, "\x00", clientv3.WithFromKey(), clientv3.WithRev(rev), clientv3.WithSerializable())
		if err != nil {
			return nil, err
		}
		m := map[string]string{}
		for _, kv := range resp.Kvs {
			m[string(kv.Key)] = fmt.Sprintf("%q c%d m%d v%d l%x", kv.Value, kv.CreateRevision, kv.ModRevision, kv.Version, kv.Lease)
		}
		return m, nil
	}
	want, err := get(a)
	if err != nil {
		t.Fatalf("the voter's keyspace at %d: %v", rev, err)
	}
	got, err := get(b)
	if err != nil {
		t.Fatalf("the copy's keyspace at %d: %v", rev, err)
	}
	var diff []string
	for k, v := range want {
		if got[k] != v {
			diff = append(diff, fmt.Sprintf("%s: voter %s, copy %s", k, v, got[k]))
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			diff = append(diff, fmt.Sprintf("%s: voter absent, copy %s", k, v))
		}
	}
	if len(diff) > 0 {
		if len(diff) > 10 {
			diff = append(diff[:10], fmt.Sprintf("… %d more", len(diff)-10))
		}
		t.Errorf("keyspace at revision %d differs in %d keys:\n%s", rev, len(diff), strings.Join(diff, "\n"))
	}
}

// waitUntil polls cond until it holds (true) or timeout passes (false).
func waitUntil(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
	return true
}
