package e2e

import (
	"flag"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/understudy-kv/understudy/test/harness"
)

var standbyNetns = flag.Int("standby.netns", 0, "run TestStandbyCutByIptablesInNamespaces this many times: each voter and the standby in a network namespace, cut by iptables (root; CONTRIBUTING)")

// TestStandbyCutFromOneLiveVoterKeepsIt: the standby's raft links to one
// follower are cut both ways, and so are its reach of that follower's
// client URL and of the leader's (no leader's view), while that follower
// is alive and serving the other voters. The standby alone finds it silent; the other follower's
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
// the voters' /metrics (and the leader's /debug/vars) through their
// advertised client URLs, their proxies. Nothing else is cut: the voters reach one another,
// and the test reaches everyone. TestStandbyCutByIptablesInNamespaces is
// the same scenario on hosts of their own, cut by iptables.
func TestStandbyCutFromOneLiveVoterKeepsIt(t *testing.T) {
	timed(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3, PeerProxies: true, ClientProxies: true})
	leader := c.Leader(t)
	followers := following(c, leader)
	cut, other := followers[0], followers[1]
	harness.Must(t, bins.RequireReplica())
	s := harness.StartReplica(t, c, harness.ReplicaConfig{Name: "standby", PeerProxy: true,
		Extra: append([]string{"--join-timeout", "60s", "--join", advertisedClientURLs(c.Members...)}, standbyArgs...)})
	waitRoleState(t, s, "idle", "live")
	keepThenReplace(t, c, s, leader, cut, other, func() {
		cut.PeerProxy.BlackholeFrom(s.Proc.PID())
		s.PeerProxy.BlackholeFrom(cut.Proc.PID())
		cut.ClientProxy.BlackholeFrom(s.Proc.PID())
		leader.ClientProxy.BlackholeFrom(s.Proc.PID())
	})
}

// TestStandbyCutByIptablesInNamespaces is TestStandbyCutFromOneLiveVoterKeepsIt
// on hosts of their own, as machines of a real cluster are: each voter and
// the standby in a network namespace with its own address on a bridge
// (harness.Net), and the cut made by iptables in the standby's namespace —
// every packet to and from the follower dropped, raft and client URLs
// alike, and what it sends to the leader's client port. The follower
// still serves the other voters, which reach it over the bridge. It runs
// -standby.netns times, each on a new cluster (root: CONTRIBUTING).
func TestStandbyCutByIptablesInNamespaces(t *testing.T) {
	if *standbyNetns < 1 {
		t.Skip("needs root: runs with -standby.netns=3 (CONTRIBUTING); CI runs the same scenario through proxies, TestStandbyCutFromOneLiveVoterKeepsIt")
	}
	bins := harness.Binaries(t)
	harness.Must(t, bins.RequireReplica())
	for i := range *standbyNetns {
		t.Run("run-"+strconv.Itoa(i+1), func(t *testing.T) {
			lan := harness.NewNet(t, 4)
			c := harness.StartCluster(t, harness.ClusterConfig{N: 3, Hosts: []harness.Host{lan.Hosts[0].Host, lan.Hosts[1].Host, lan.Hosts[2].Host}})
			leader := c.Leader(t)
			followers := following(c, leader)
			cut, other := followers[0], followers[1]
			on := netHostOf(t, lan, cut, leader)
			sh := lan.Hosts[3]
			s := harness.StartReplica(t, c, harness.ReplicaConfig{Name: "standby", Host: &sh.Host,
				Extra: append([]string{"--join-timeout", "60s"}, standbyArgs...)})
			waitRoleState(t, s, "idle", "live")
			keepThenReplace(t, c, s, leader, cut, other, func() {
				sh.Cut(t, on[0])
				sh.CutPort(t, on[1], harness.HostClientPort)
				t.Logf("the standby (%s) cut from %s (%s) and from the leader %s's client port:\n%s", sh.Addr, cut.Name, on[0].Addr, leader.Name, sh.Rules(t))
			})
		})
	}
}

// netHostOf returns the Net host each member runs on, in the order given.
func netHostOf(t *testing.T, lan *harness.Net, ms ...*harness.Member) []*harness.NetHost {
	t.Helper()
	var out []*harness.NetHost
	for _, m := range ms {
		for _, h := range lan.Hosts {
			if h.Addr == m.Host.Addr {
				out = append(out, h)
			}
		}
	}
	if len(out) != len(ms) {
		t.Fatalf("found the hosts of %d of %d members", len(out), len(ms))
	}
	return out
}

// keepThenReplace runs the one-sided cut scenario: cutOff cuts standby s
// from voter cut (and from the leader's client URL), and while cut serves
// the other voters nothing is removed for 3 × --failover-after, s blocked
// as uncorroborated; then cut is killed, and s replaces it within
// --failover-after + 15 s, while a writer writes through the leader. That
// cut went on applying the writes while it was cut from s is checked.
func keepThenReplace(t *testing.T, c *harness.Cluster, s *harness.Replica, leader, cut, other *harness.Member, cutOff func()) {
	t.Helper()
	cli := client(t, leader.ClientURL, other.ClientURL)
	w := startWriter(t, client(t, leader.ClientURL))
	cutOff()
	start := time.Now()
	atCut := revision(t, c, leader)
	waitRoleState(t, s, "blocked", "uncorroborated")
	t.Logf("silence not corroborated %v after the cut", time.Since(start).Round(time.Millisecond))
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	checks := 0
	for time.Since(start) < 3*standbyFailoverAfter {
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
	got := revision(t, c, cut)
	if got <= atCut {
		t.Fatalf("%s is at revision %d, and the leader was at %d when the cut began: want it serving the others throughout", cut.Name, got, atCut)
	}
	if n := countLogged(t, "took the failover lock", s); n != 0 {
		t.Fatalf("the standby took the failover lock %d times while the follower was alive", n)
	}
	t.Logf("%d membership checks over %v: %s kept, and serving: at revision %d, from %d when the cut began", checks, time.Since(start).Round(time.Second), cut.Name, got, atCut)

	cut.Proc.Kill()
	killed := time.Now()
	harness.WaitFor(t, failoverDeadline, "the killed follower replaced by the standby", func() (bool, error) {
		vs, ls := voters(t, cli)
		return len(vs) == 3 && len(ls) == 0 && !contains(vs, cut.Name) && contains(vs, "standby"), fmt.Errorf("voters %v, learners %v", vs, ls)
	})
	t.Logf("replaced %v after the kill", time.Since(killed).Round(time.Millisecond))
}

// revision is member m's own revision, as it answers Status.
func revision(t *testing.T, c *harness.Cluster, m *harness.Member) int64 {
	t.Helper()
	st, err := c.Status(m)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return st.Header.Revision
}
