package e2e

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/test/harness"
)

var snapshotRuns = flag.Int("snapshot.runs", 1, "how many times each snapshot scenario runs (TestHubAfterSnapshot)")

// snapshotVoterArgs make the voters snapshot and compact their raft log
// often, so that a member paused for a few thousand entries catches up by
// a snapshot: etcd's applySnapshot does not move the member's
// AppliedIndex() (only an applied entry does), which is what these tests
// are about.
var snapshotVoterArgs = []string{"--snapshot-count", "1000", "--snapshot-catchup-entries", "200"}

// puts writes n keys through cli, one raft entry each, from 16 writers.
func puts(t *testing.T, cli *clientv3.Client, n int, prefix string) {
	t.Helper()
	const writers = 16
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += writers {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, err := cli.Put(ctx, fmt.Sprintf("%s%06d", prefix, i), "v")
				cancel()
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatalf("puts: %v", err)
	}
}

// A replica that asks a hub for its read indexes (--read-index-via) while
// both catch up by snapshot never serves a linearizable read older than a
// write acknowledged before the read (issue: a hub answering with an
// applied index that a snapshot left behind). x=old; hub and asker paused
// together; thousands of entries and x=new acknowledged; the cluster quiet;
// the hub resumes and catches up by snapshot, then the asker resumes and
// is read at once. With "firewall", the asker's own snapshot is held back
// (every connection to its peer URL dropped, as a firewall rule on its
// peer port does; the streams it opened to the leader stay up): its strong reads must fail, not answer old.
// Porcupine checks the asker's reads against the acknowledged writes.
func TestHubAfterSnapshot(t *testing.T) {
	beside(t)
	for _, firewall := range []bool{true, false} {
		name := "pauses"
		if firewall {
			name = "pauses-and-firewall"
		}
		t.Run(name, func(t *testing.T) {
			for run := range *snapshotRuns {
				t.Run(fmt.Sprintf("run-%d", run), func(t *testing.T) { hubAfterSnapshot(t, firewall, run) })
			}
		})
	}
}

func hubAfterSnapshot(t *testing.T, firewall bool, run int) {
	bins := harness.Binaries(t)
	harness.Must(t, bins.RequireReplica())
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3, ExtraArgs: snapshotVoterArgs})
	voters := client(t, c.Endpoints()...)
	hub := startReplica(t, bins, c, "hub", replicaOpts{})
	asker := harness.StartReplica(t, c, harness.ReplicaConfig{Name: "asker", PeerProxy: true,
		// No background rounds of its own: a strong read is served by a
		// round through the hub, never by an own round that happened to
		// be under way.
		Extra: []string{"--join-timeout", "60s", "--read-index-via", hub.ClientURL, "--read-index-via-timeout", "500ms",
			"--freshness-interval", "1h", "--freshness-idle-interval", "0", "--freshness-quiet-interval", "0"}})
	rep := client(t, asker.ClientURL)

	start := time.Now()
	now := func() int64 { return int64(time.Since(start)) }
	var ops []porcupine.Operation
	put := func(v string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		call := now()
		if _, err := voters.Put(ctx, "x", v); err != nil {
			t.Fatalf("put x=%s: %v", v, err)
		}
		ops = append(ops, porcupine.Operation{ClientId: 0, Input: regInput{Put: true, Key: "x", Value: v}, Call: call, Output: regOutput{}, Return: now()})
	}
	put("old")
	// Both have applied all there is, and are paused at the same index:
	// the asker's commit index is then no higher than what the hub last
	// applied as an entry.
	waitAllApplied(t, c, hub, asker)

	signal(t, hub.Proc, syscall.SIGSTOP)
	signal(t, asker.Proc, syscall.SIGSTOP)
	stopped := true
	t.Cleanup(func() {
		if stopped {
			_ = syscall.Kill(hub.PID(), syscall.SIGCONT)
			_ = syscall.Kill(asker.PID(), syscall.SIGCONT)
		}
	})
	puts(t, voters, 3000, "fill/")
	put("new")
	if firewall {
		// Every connection a voter opens to the asker's peer URL: a
		// snapshot's, and the stream that carries the asker's own raft
		// messages to the leader. The leader's messages to the asker go on
		// streams the asker opened, which pass.
		asker.PeerProxy.Blackhole()
	}

	// The hub catches up, by snapshot: its weak read shows x=new.
	signal(t, hub.Proc, syscall.SIGCONT)
	waitWeak(t, client(t, hub.ClientURL), "x", "new")
	if n := metric(t, hub.ClientURL, "etcd_network_snapshot_receive_success"); n == 0 {
		t.Fatalf("run %d: the hub received no snapshot; the scenario needs one (voters: %v)", run, snapshotVoterArgs)
	}

	signal(t, asker.Proc, syscall.SIGCONT)
	stopped = false
	var stale, served, failed int
	reads := 11
	if firewall {
		reads = 6 // each fails at its deadline
	}
	for i := range reads {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		call := now()
		resp, err := rep.Get(ctx, "x")
		ret := now()
		cancel()
		if err != nil {
			failed++
			continue
		}
		got := ""
		if len(resp.Kvs) > 0 {
			got = string(resp.Kvs[0].Value)
		}
		served++
		if got != "new" {
			stale++
			t.Errorf("run %d: strong read %d through the asker: x=%q, after x=new was acknowledged", run, i, got)
		}
		ops = append(ops, porcupine.Operation{ClientId: 1, Input: regInput{Key: "x"}, Call: call, Output: regOutput{Value: got}, Return: ret})
	}
	t.Logf("run %d: %d strong reads served (%d stale), %d failed", run, served, stale, failed)
	t.Logf("asker: %s", harness.MustScrape(t, asker.ClientURL+"/metrics").Format("understudy_replica_read_index"))
	if res := check(t, ops); res != porcupine.Ok {
		t.Fatalf("run %d: porcupine over the asker's reads says %s, want Ok", run, res)
	}

	// Healed, the asker catches up and serves x=new.
	asker.PeerProxy.Heal()
	harness.WaitFor(t, 2*time.Minute, "the asker serves x=new after its snapshot", func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := rep.Get(ctx, "x")
		if err != nil {
			return false, nil
		}
		return len(resp.Kvs) == 1 && string(resp.Kvs[0].Value) == "new", nil
	})
}

// waitAllApplied waits until every replica has applied the leader's whole
// log, by their Status.
func waitAllApplied(t *testing.T, c *harness.Cluster, rs ...*harness.Replica) {
	t.Helper()
	harness.WaitFor(t, time.Minute, "the replicas have applied the leader's log", func() (bool, error) {
		lst, err := c.Status(c.Leader(t))
		if err != nil {
			return false, nil
		}
		for _, r := range rs {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			rst, err := client(t, r.ClientURL).Status(ctx, r.ClientURL)
			cancel()
			if err != nil || rst.RaftAppliedIndex != lst.RaftIndex || rst.RaftIndex != lst.RaftIndex {
				return false, nil
			}
		}
		return true, nil
	})
}

// waitWeak waits until a serializable read of key through cli returns want.
func waitWeak(t *testing.T, cli *clientv3.Client, key, want string) {
	t.Helper()
	harness.WaitFor(t, 2*time.Minute, fmt.Sprintf("a weak read of %s returns %q", key, want), func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := cli.Get(ctx, key, clientv3.WithSerializable())
		if err != nil {
			return false, nil
		}
		return len(resp.Kvs) == 1 && string(resp.Kvs[0].Value) == want, nil
	})
}

// A replica that caught up by a snapshot, in a cluster quiet since, is
// caught up by every check that reads how far it has applied: etcd's own
// AppliedIndex() stays where it was before the snapshot until the next
// entry, thousands of entries behind.
func TestCaughtUpByASnapshot(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	harness.Must(t, bins.RequireReplica())
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3, ExtraArgs: snapshotVoterArgs})
	voters := client(t, c.Endpoints()...)
	r := startReplica(t, bins, c, "r1", replicaOpts{})
	waitAllApplied(t, c, r)
	signal(t, r.Proc, syscall.SIGSTOP)
	stopped := true
	t.Cleanup(func() {
		if stopped {
			_ = syscall.Kill(r.PID(), syscall.SIGCONT)
		}
	})
	puts(t, voters, 3000, "fill/")
	if _, err := voters.Put(context.Background(), "x", "last"); err != nil {
		t.Fatal(err)
	}
	signal(t, r.Proc, syscall.SIGCONT)
	stopped = false
	waitWeak(t, client(t, r.ClientURL), "x", "last")
	if n := metric(t, r.ClientURL, "etcd_network_snapshot_receive_success"); n == 0 {
		t.Fatalf("the replica received no snapshot; the scenario needs one (voters: %v)", snapshotVoterArgs)
	}
	lst, err := c.Status(c.Leader(t))
	if err != nil {
		t.Fatal(err)
	}

	t.Run("endpoint status", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		st, err := client(t, r.ClientURL).Status(ctx, r.ClientURL)
		if err != nil {
			t.Fatal(err)
		}
		if st.RaftAppliedIndex < lst.RaftIndex {
			t.Errorf("the replica's Status says applied index %d, the leader's log ends at %d: the snapshot is not counted", st.RaftAppliedIndex, lst.RaftIndex)
		}
	})
	t.Run("readyz caught_up", func(t *testing.T) {
		if code, body := httpDo("GET", r.ClientURL+"/readyz/caught_up", ""); code != 200 {
			t.Errorf("/readyz/caught_up after the snapshot: %d %s", code, body)
		}
	})
	t.Run("replica status promotable", func(t *testing.T) {
		sts, out := replicaStatus(t, bins, c.Endpoints()...)
		for _, s := range sts {
			if s.Name != "r1" {
				continue
			}
			if s.Promotable == nil || !*s.Promotable || s.Lag > 0 {
				t.Errorf("replica status after the snapshot: lag %d, promotion %q, want 0 and promotable\n%s", s.Lag, s.Why, out)
			}
			return
		}
		t.Errorf("r1 not in replica status:\n%s", out)
	})
}
