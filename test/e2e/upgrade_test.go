package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/test/harness"
)

// TestReplicaThroughAVoterUpgradeAndADowngrade: voters on etcd v3.6.8
// with a replica (v3.7.3 embedded) are upgraded one by one to v3.7.3 while
// a client reads through the replica, and the cluster version goes from
// 3.6.0 to 3.7.0, as etcd decides it (the least of every member's,
// learners included). Then `etcdctl downgrade enable 3.6` brings the
// cluster version back to 3.6.0 and the voters go back to v3.6.8 one by
// one; the downgrade does not complete by itself, since etcd finishes one
// only when every member, the replica too, runs the target version (its
// leader logs the mismatch, naming the replica); `etcdctl downgrade cancel`
// ends it. Reads through the replica never fail beyond their retries.
func TestReplicaThroughAVoterUpgradeAndADowngrade(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	old := []harness.Kind{harness.KindEtcd36, harness.KindEtcd36, harness.KindEtcd36}
	c := harness.StartCluster(t, harness.ClusterConfig{Kinds: old})
	r := startReplica(t, bins, c, "r1", replicaOpts{})
	voters := client(t, c.Endpoints()...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := voters.Put(ctx, "upgrade/k", "v0"); err != nil {
		t.Fatal(err)
	}
	waitClusterVersion(t, c, "3.6.0")
	reads := startRetriedReads(client(t, r.ClientURL), "upgrade/k")
	rolling := func(bin string, want string) {
		for _, m := range c.Members {
			m.Proc.RestartWithBin(t, bin)
			harness.WaitFor(t, time.Minute, m.Name+" back on etcd "+want, func() (bool, error) {
				st, err := c.Status(m)
				if err != nil {
					return false, err
				}
				return strings.HasPrefix(st.Version, want) && st.Leader != 0, fmt.Errorf("version %s, leader %x", st.Version, st.Leader)
			})
			c.Leader(t)
		}
	}
	rolling(bins.Etcd, "3.7.")
	waitClusterVersion(t, c, "3.7.0")

	harness.MustEtcdctl(t, bins, c.Endpoints(), "downgrade", "validate", "3.6")
	harness.MustEtcdctl(t, bins, c.Endpoints(), "downgrade", "enable", "3.6")
	waitClusterVersion(t, c, "3.6.0")
	rolling(harness.Etcd36(t, bins), "3.6.")
	rid, _ := memberID(t, voters, r.ClientURL)
	leaderLogsTheReplica := func() (bool, error) {
		for _, m := range c.Members {
			if log := m.Proc.Log(); strings.Contains(log, "remotes server has mismatching etcd version") && strings.Contains(log, fmt.Sprintf("%x", rid)) {
				return true, nil
			}
		}
		return false, fmt.Errorf("no voter logged the replica's version as the one that holds the downgrade")
	}
	harness.WaitFor(t, time.Minute, "the downgrade held by the replica's v3.7.3", leaderLogsTheReplica)
	if st := downgradeInfo(t, c); !st.enabled {
		t.Fatalf("the downgrade completed with a v3.7.3 replica among the members: %+v", st)
	}
	harness.MustEtcdctl(t, bins, c.Endpoints(), "downgrade", "cancel")
	harness.WaitFor(t, time.Minute, "the downgrade cancelled, the cluster at 3.6.0", func() (bool, error) {
		st := downgradeInfo(t, c)
		return !st.enabled && st.cluster == "3.6.0", fmt.Errorf("%+v", st)
	})
	if _, err := voters.Put(ctx, "upgrade/k", "v1"); err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, time.Minute, "the replica's strong read sees the put after the downgrade", func() (bool, error) {
		resp, err := client(t, r.ClientURL).Get(ctx, "upgrade/k")
		return err == nil && len(resp.Kvs) == 1 && string(resp.Kvs[0].Value) == "v1", fmt.Errorf("%v, %v", resp, err)
	})
	ok, retried, failed := reads.finish()
	t.Logf("reads through the replica: %d served, %d after retries, %d failed beyond retries", ok, retried, failed)
	if failed > 0 || ok < 100 {
		t.Fatalf("%d reads failed beyond their retries, %d served: want none failed and at least 100", failed, ok)
	}
}

// waitClusterVersion waits until a voter's /version says want.
func waitClusterVersion(t *testing.T, c *harness.Cluster, want string) {
	t.Helper()
	harness.WaitFor(t, time.Minute, "cluster version "+want, func() (bool, error) {
		st := downgradeInfo(t, c)
		return st.cluster == want, fmt.Errorf("cluster version %q", st.cluster)
	})
}

type downgradeState struct {
	cluster string
	enabled bool
}

// downgradeInfo is the cluster version (/version) and whether a downgrade
// is enabled (Status), from the first voter that answers.
func downgradeInfo(t *testing.T, c *harness.Cluster) downgradeState {
	t.Helper()
	for _, m := range c.Members {
		code, body := httpDo("GET", m.ClientURL+"/version", "")
		var v struct {
			Cluster string `json:"etcdcluster"`
		}
		if code != 200 || json.Unmarshal([]byte(body), &v) != nil {
			continue
		}
		st, err := c.Status(m)
		if err != nil {
			continue
		}
		return downgradeState{cluster: v.Cluster, enabled: st.DowngradeInfo != nil && st.DowngradeInfo.Enabled}
	}
	return downgradeState{}
}

// retriedReads reads a key through a client over and over, retrying a
// failed read for up to 10 s before counting it failed.
type retriedReads struct {
	stop                chan struct{}
	wg                  sync.WaitGroup
	ok, retried, failed atomic.Int64
}

func startRetriedReads(cli *clientv3.Client, key string) *retriedReads {
	rr := &retriedReads{stop: make(chan struct{})}
	rr.wg.Add(1)
	go func() {
		defer rr.wg.Done()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-rr.stop:
				return
			case <-tick.C:
			}
			deadline := time.Now().Add(10 * time.Second)
			for attempt := 0; ; attempt++ {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, err := cli.Get(ctx, key)
				cancel()
				if err == nil {
					rr.ok.Add(1)
					if attempt > 0 {
						rr.retried.Add(1)
					}
					break
				}
				if time.Now().After(deadline) {
					rr.failed.Add(1)
					break
				}
				<-tick.C // the retry's pace, not a synchronisation
			}
		}
	}()
	return rr
}

func (rr *retriedReads) finish() (ok, retried, failed int64) {
	close(rr.stop)
	rr.wg.Wait()
	return rr.ok.Load(), rr.retried.Load(), rr.failed.Load()
}
