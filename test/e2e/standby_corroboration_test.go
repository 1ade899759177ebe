package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/understudy-kv/understudy/test/harness"
)

// TestStandbyCutFromOneLiveVoterKeepsIt: the standby's raft links to one
// follower are cut both ways, and so is its reach of the leader's client
// URL (no leader's view), while that follower is alive and serving the
// other voters. The standby alone finds it silent; the other follower's
// own raft transport (its etcd_network_active_peers) still reaches it, so
// the silence is not corroborated and nothing is removed for 3 ×
// --failover-after. Then the same follower is really killed: the other
// follower sees it silent too, and the standby replaces it within
// --failover-after + 15 s.
//
// The cuts are the harness's proxies, which refuse connections by the
// process that opens them (Proxy.BlackholeFrom): every raft link between
// the standby and the follower passes the follower's peer proxy (standby →
// follower) or the standby's (follower → standby), and the standby reads
// the leader's /debug/vars and /metrics through the leader's advertised
// client URL, its proxy. Nothing else is cut: the voters reach one another,
// and the test reaches everyone.
func TestStandbyCutFromOneLiveVoterKeepsIt(t *testing.T) {
	const failoverAfter = 5 * time.Second
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3, PeerProxies: true, ClientProxies: true})
	leader := c.Leader(t)
	followers := following(c, leader)
	cut, other := followers[0], followers[1]
	bins.RequireReplica(t)
	s := harness.StartReplica(t, c, harness.ReplicaConfig{Name: "standby", PeerProxy: true,
		Extra: append([]string{"--join-timeout", "60s", "--join", advertisedClientURLs(c.Members...)}, standbyArgs...)})
	waitRoleState(t, s, "idle", "live")
	cli := client(t, leader.ClientURL, other.ClientURL)
	w := startWriter(client(t, leader.ClientURL))

	cut.PeerProxy.BlackholeFrom(s.Proc.PID())
	s.PeerProxy.BlackholeFrom(cut.Proc.PID())
	leader.ClientProxy.BlackholeFrom(s.Proc.PID())
	start := time.Now()
	waitRoleState(t, s, "blocked", "uncorroborated")
	t.Logf("silence not corroborated %v after the cut", time.Since(start).Round(time.Millisecond))
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	checks := 0
	for time.Since(start) < 3*failoverAfter {
		<-tick.C
		vs, ls := voters(t, cli)
		checks++
		if len(vs) != 3 || !contains(vs, cut.Name) || len(ls) != 1 {
			t.Fatalf("%v after the cut: voters %v, learners %v; want the 3 voters kept and the standby a learner", time.Since(start).Round(time.Millisecond), vs, ls)
		}
		if st, why := roleState(harness.MustScrape(t, s.ClientURL+"/metrics")); st == "acting" {
			t.Fatalf("%v after the cut: the standby is acting (%s)", time.Since(start).Round(time.Millisecond), why)
		}
	}
	w.finish(t)
	if n := countLogged(t, "took the failover lock", s); n != 0 {
		t.Fatalf("the standby took the failover lock %d times while the follower was alive", n)
	}
	t.Logf("%d membership checks over %v: %s kept", checks, time.Since(start).Round(time.Second), cut.Name)

	cut.Proc.Kill()
	killed := time.Now()
	harness.WaitFor(t, failoverAfter+15*time.Second, "the killed follower replaced by the standby", func() (bool, error) {
		vs, ls := voters(t, cli)
		return len(vs) == 3 && len(ls) == 0 && !contains(vs, cut.Name) && contains(vs, "standby"), fmt.Errorf("voters %v, learners %v", vs, ls)
	})
	t.Logf("replaced %v after the kill", time.Since(killed).Round(time.Millisecond))
}
