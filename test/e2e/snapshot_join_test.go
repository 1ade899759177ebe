package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/understudy-kv/understudy/test/harness"
)

// A replica joining a quiet cluster whose leader sends it a snapshot more
// than 5,000 entries ahead of anything it has applied becomes ready within
// --join-timeout, and says what it waits for without a line per retry.
// etcd publishes a member (ReadyNotify) through a proposal that it refuses
// while the commit index is more than 5,000 entries past AppliedIndex(),
// which a snapshot does not move: a stock learner joined this way spins on
// "too many requests" until some entry is applied after the snapshot.
//
// Which comes first is a race: the member's first publish, forwarded to the
// leader as soon as it hears of one, or the snapshot. The replica's raft
// links are delayed by 50 ms each way, so that its publish is committed
// (by the voters, whose links are not delayed) well before the leader
// learns that the replica needs a snapshot: the snapshot then holds the
// publish, whose waiter never fires, and every later publish is refused.
func TestReplicaJoinsAQuietClusterBySnapshot(t *testing.T) {
	timed(t)
	bins := harness.Binaries(t)
	harness.Must(t, bins.RequireReplica())
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3, ExtraArgs: snapshotVoterArgs, PeerProxies: true})
	voters := client(t, c.Endpoints()...)
	puts(t, voters, 5600, "fill/")
	if _, err := voters.Put(context.Background(), "x", "last"); err != nil {
		t.Fatal(err)
	}
	// Quiet from here on: nothing writes until the replica serves.
	r := harness.StartReplica(t, c, harness.ReplicaConfig{Name: "r1", NoWait: true, PeerProxy: true, PeerDelay: 50 * time.Millisecond,
		Extra: []string{"--join-timeout", "60s"}})
	ctx, cancel := context.WithTimeout(context.Background(), 70*time.Second)
	defer cancel()
	if err := r.WaitLog(ctx, `"msg":"replica serving"`); err != nil {
		t.Fatalf("the replica joining a quiet cluster by snapshot is not serving within --join-timeout: %v", err)
	}
	if n := metric(t, r.ClientURL, "etcd_network_snapshot_receive_success"); n == 0 {
		t.Fatalf("the replica received no snapshot; the scenario needs one (voters: %v)", snapshotVoterArgs)
	}
	waitWeak(t, client(t, r.ClientURL), "x", "last")
	log := r.Log()
	lines := strings.Count(log, "\n")
	if lines >= 100 {
		t.Errorf("the replica logged %d lines until it served, want fewer than 100:\n%s", lines, tailLines(log, 40))
	}
	if strings.Contains(log, "too many requests") && strings.Count(log, "too many requests") > 5 {
		t.Errorf("the replica's member spun on \"too many requests\" %d times", strings.Count(log, "too many requests"))
	}
	t.Logf("%d log lines until serving", lines)
}

// tailLines is the last n lines of s.
func tailLines(s string, n int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}
