package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/understudy-kv/understudy/test/harness"
)

// standbyArgs are a standby's flags in these tests.
var standbyArgs = []string{"--role", "standby", "--failover-after", standbyFailoverAfter.String(), "--promote-hold", "1s"}

// TestStandbyKeepsAVoterWhoseClientURLIsCut: a voter whose advertised
// client URL does not answer but whose raft is healthy is never removed.
// First a follower's client URL is cut (the leader's raft progress says it
// replicates to it); after three times --failover-after the leader's too
// (no leader's view: the peer URLs decide), for as long again.
func TestStandbyKeepsAVoterWhoseClientURLIsCut(t *testing.T) {
	timed(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3, ClientProxies: true})
	s := startReplica(t, bins, c, "standby", replicaOpts{Extra: standbyArgs})
	leader := c.Leader(t)
	var follower *harness.Member
	for _, m := range c.Members {
		if m != leader {
			follower = m
			break
		}
	}
	cli := client(t, c.Endpoints()...) // the members' own client URLs, not the proxies
	w := startWriter(t, client(t, leader.ClientURL))
	ctx := context.Background()
	cut := func(m *harness.Member) {
		t.Helper()
		m.ClientProxy.Blackhole()
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if _, err := cli.Status(sctx, m.ClientProxy.URL()); err == nil {
			t.Fatalf("%s's advertised client URL %s still answers after the cut", m.Name, m.ClientProxy.URL())
		}
	}
	cut(follower)
	start := time.Now()
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	leaderCut := false
	checks := 0
	// A standby that took either cut for a death would have acted within
	// --failover-after and its hold: its first step is logged, and the
	// removal changes the membership checked twice a second.
	window := 3 * standbyFailoverAfter
	for time.Since(start) < 2*window {
		<-tick.C
		if !leaderCut && time.Since(start) > window {
			cut(leader)
			leaderCut = true
		}
		vs, ls := voters(t, cli)
		checks++
		if len(vs) != 3 || !contains(vs, follower.Name) || !contains(vs, leader.Name) || len(ls) != 1 {
			t.Fatalf("%v after the cut: voters %v, learners %v; want the 3 voters kept and the standby a learner", time.Since(start).Round(time.Millisecond), vs, ls)
		}
		if s.Exited() {
			t.Fatalf("the standby exited")
		}
	}
	w.finish(t)
	for _, msg := range []string{"took the failover lock", "failover record written", "promoted to voter", "removed the dead voter it replaced"} {
		if n := len(logLines(t, s.Proc, msg)); n != 0 {
			t.Errorf("the standby logged %q %d times", msg, n)
		}
	}
	t.Logf("%d membership checks over %v, the follower's client URL cut throughout, the leader's for the last %v", checks, time.Since(start).Round(time.Second), window)
	// The standby is alive and still judging: a voter really killed is
	// still replaced, with both client URLs still cut (the leader's commit
	// index comes from ReadIndex rounds, through raft).
	follower.Proc.Kill()
	harness.WaitFor(t, time.Minute, "the killed follower replaced by the standby", func() (bool, error) {
		vs, ls := voters(t, cli)
		return len(vs) == 3 && len(ls) == 0 && !contains(vs, follower.Name) && contains(vs, "standby"), fmt.Errorf("voters %v, learners %v", vs, ls)
	})
}
