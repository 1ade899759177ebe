package e2e

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/understudy-kv/understudy/test/harness"
)

// The standby in region B (harness.StartRegions): the voters in region A
// talk to each other at loopback; every raft and client link between the
// standby and them crosses a WAN of standbyRTT. The standby never removes a
// live voter and replaces a dead one within failoverDeadline
// (--failover-after 5s, standbyArgs, plus 15 s).

const (
	// standbyRTT is the round trip between the regions, and standbyJitter
	// the most a chunk waits beyond its half each way.
	standbyRTT    = 150 * time.Millisecond
	standbyJitter = 5 * time.Millisecond
	// standbyFailoverAfter is --failover-after in standbyArgs.
	standbyFailoverAfter = 5 * time.Second
)

// standbyWAN runs every standby scenario in region B. Without it, CI runs
// the three that only a WAN shows (a failover across it, the leader's view
// read across it, live voters judged by their peer URLs at 600 ms RTT); each
// of the others is a scenario whose loopback twin runs in CI (wanVariant).
var standbyWAN = flag.Bool("standby.wan", false, "run every standby scenario in region B at 150 ms RTT (about 5 minutes); CI runs three, and the loopback twin of each of the others")

// wanVariant skips t, the region-B variant of the loopback scenario twin
// (which runs in CI), unless -standby.wan: the long standby scenarios have
// their own command (CONTRIBUTING), and CI keeps a shorter version of each.
func wanVariant(t *testing.T, twin string) {
	t.Helper()
	if !*standbyWAN {
		t.Skipf("the region-B variant of %s, which runs in CI: this one runs with -standby.wan (CONTRIBUTING)", twin)
	}
}

// startStandbyInRegionB starts three voters in region A and a standby named
// "standby" in region B with standbyArgs, waits until the standby is idle
// (every voter live), then delays the links between the regions and checks
// that the delay is in effect: a linearizable read at the standby (a
// ReadIndex round through the leader) takes at least standbyRTT.
func startStandbyInRegionB(t *testing.T) *harness.Regions {
	t.Helper()
	return startStandbyAt(t, standbyRTT, "")
}

// startStandbyAt is startStandbyInRegionB at rtt, the standby joined
// through every voter or only through the one named joinOnly
// (RegionsConfig.JoinOnly).
func startStandbyAt(t *testing.T, rtt time.Duration, joinOnly string) *harness.Regions {
	t.Helper()
	harness.Must(t, harness.Binaries(t).RequireReplica())
	g := harness.StartRegions(t, harness.RegionsConfig{ReplicaName: "standby", NoLearner: true, ClientProxies: true, JoinOnly: joinOnly,
		ReplicaArgs: append([]string{"--join-timeout", "60s"}, standbyArgs...)})
	waitRoleState(t, g.Replica, "idle", "live")
	g.SetRTT(rtt, standbyJitter)
	cli := client(t, g.Replica.ClientURL)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := cli.Get(ctx, "rtt-check"); err != nil {
		t.Fatalf("linearizable read at the standby: %v", err)
	}
	if took := time.Since(start); took < rtt {
		t.Fatalf("a linearizable read at the standby took %v across an RTT of %v: the delay is not in effect", took, rtt)
	}
	return g
}

// roleState is a replica's role state and reason in its metrics m.
func roleState(m harness.Metrics) (state, reason string) {
	for _, s := range m.Series("understudy_replica_role_state") {
		if s.Value == 1 {
			return s.Labels["state"], s.Labels["reason"]
		}
	}
	return "", ""
}

// waitRoleState waits until the replica's role state is state for reason.
func waitRoleState(t *testing.T, r *harness.Replica, state, reason string) {
	t.Helper()
	harness.WaitFor(t, time.Minute, fmt.Sprintf("%s's role state %s (%s)", r.Name, state, reason), func() (bool, error) {
		s, why := roleState(harness.MustScrape(t, r.ClientURL+"/metrics"))
		return s == state && why == reason, fmt.Errorf("role state %s (%s)", s, why)
	})
}

// replacedInRegionB kills dead, waits until the standby in region B has
// replaced it within failoverDeadline and cleared the failover record, and
// checks that the cluster, with a voter across the WAN now, commits a put.
func replacedInRegionB(t *testing.T, g *harness.Regions, dead *harness.Member) {
	t.Helper()
	var live []string
	for _, m := range g.Cluster.Members {
		if m != dead {
			live = append(live, m.ClientURL)
		}
	}
	cli := client(t, live...)
	dead.Proc.Kill()
	killed := time.Now()
	waitReplaced(t, cli, dead, killed)
	removed := firstLogged(t, 10*time.Second, "removed the dead voter it replaced", g.Replica)
	for _, msg := range []string{"took the failover lock", "promoted to voter", "removed the dead voter it replaced"} {
		for _, l := range logLines(t, removed.Proc, msg) {
			t.Logf("%q %v after the kill of %s (RTT %v)", msg, logTime(l).Sub(killed).Round(time.Millisecond), dead.Name, standbyRTT)
		}
	}
	harness.WaitFor(t, 10*time.Second, "the failover record cleared", func() (bool, error) {
		return countLogged(t, "failover record cleared", g.Replica) == 1, nil
	})
	noFailoverRecord(t, cli)
	if n := countLogged(t, "promoted to voter", g.Replica); n != 1 {
		t.Fatalf("%d promotions logged, want 1", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "after-failover", "v"); err != nil {
		t.Fatalf("a put after the failover: %v", err)
	}
}

// TestStandbyInRegionBReplacesADeadFollower: at standbyRTT, a killed
// follower is replaced within failoverDeadline.
func TestStandbyInRegionBReplacesADeadFollower(t *testing.T) {
	wanVariant(t, "TestStandbyReplacesADeadVoter")
	g := startStandbyInRegionB(t)
	replacedInRegionB(t, g, following(g.Cluster, g.Cluster.Leader(t))[0])
}

// TestStandbyInRegionBReplacesADeadLeader: at standbyRTT, a killed leader
// is replaced within failoverDeadline (region A elects a new one; the
// standby, a learner, learns of it across the WAN).
func TestStandbyInRegionBReplacesADeadLeader(t *testing.T) {
	timed(t)
	g := startStandbyInRegionB(t)
	replacedInRegionB(t, g, g.Cluster.Leader(t))
}

// TestStandbyInRegionBReplacesAFollowerWhileTheLeadersClientURLIsCut: at
// standbyRTT, with every client link from region B to the leader cut (its
// raft is healthy), a killed follower is replaced: the leader's commit
// index comes from ReadIndex rounds across the WAN.
func TestStandbyInRegionBReplacesAFollowerWhileTheLeadersClientURLIsCut(t *testing.T) {
	wanVariant(t, "TestStandbyReplacesAFollowerWhileTheLeadersClientURLIsCut")
	g := startStandbyInRegionB(t)
	leader := g.Cluster.Leader(t)
	g.CutClientURL(leader)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := client(t, leader.ClientURL).Status(ctx, leader.ClientProxy.URL()); err == nil {
		t.Fatalf("%s's advertised client URL still answers after the cut", leader.Name)
	}
	replacedInRegionB(t, g, following(g.Cluster, leader)[0])
}

// TestStandbyInRegionBReplacesADeadLeaderWhileAFollowersClientURLIsCut:
// at standbyRTT, the leader dies; one of the two followers left, which may
// become the new leader, has its client URLs cut.
func TestStandbyInRegionBReplacesADeadLeaderWhileAFollowersClientURLIsCut(t *testing.T) {
	wanVariant(t, "TestStandbyReplacesADeadLeaderWhileAFollowersClientURLIsCut")
	g := startStandbyInRegionB(t)
	leader := g.Cluster.Leader(t)
	g.CutClientURL(following(g.Cluster, leader)[0])
	replacedInRegionB(t, g, leader)
}

// TestStandbyInRegionBKeepsLiveVoters: at standbyRTT, with every voter
// live and puts flowing, the standby removes no voter and the leader and
// its term stay as they were (keepsEveryVoter).
func TestStandbyInRegionBKeepsLiveVoters(t *testing.T) {
	timed(t)
	g := startStandbyInRegionB(t)
	_, client0 := g.WANTraffic()
	keepsEveryVoter(t, g, g.Cluster.Leader(t))
	// The leader's raft view was read through its advertised client URL,
	// delayed for the standby's connections.
	if _, client1 := g.WANTraffic(); client1.Sub(client0).Down == 0 {
		t.Fatalf("no client bytes crossed the WAN to the standby while it read the leader's raft view: %+v", client1.Sub(client0))
	} else {
		t.Logf("client bytes across the WAN in the window: %+v", client1.Sub(client0))
	}
}

// TestStandbyInRegionBKeepsVotersWhoseClientURLsAreCut: at standbyRTT,
// a follower's client URLs are cut, then the leader's too (no leader's
// view: the peer URLs, across the WAN, decide); each time, for three times
// --failover-after, the standby removes no voter. Then a follower really
// killed is still replaced within failoverDeadline.
func TestStandbyInRegionBKeepsVotersWhoseClientURLsAreCut(t *testing.T) {
	wanVariant(t, "TestStandbyKeepsAVoterWhoseClientURLIsCut")
	g := startStandbyInRegionB(t)
	leader := g.Cluster.Leader(t)
	follower := following(g.Cluster, leader)[0]
	g.CutClientURL(follower)
	keepsEveryVoter(t, g, leader)
	g.CutClientURL(leader)
	keepsEveryVoter(t, g, leader)
	replacedInRegionB(t, g, follower)
}

// keepsEveryVoter watches the standby for three times --failover-after
// (and at least 16 reads of the leader's raft view, fresh or failed, at
// most one a second while they succeed) while puts flow through leader,
// which must stay the leader in the same term. Every state the standby
// is in (scraped every 250 ms, and each one it logs) is idle, or waiting
// on a voter's silence for less than --failover-after: it takes no
// failover step, and the voters and the standby's learnership stay.
func keepsEveryVoter(t *testing.T, g *harness.Regions, leader *harness.Member) {
	t.Helper()
	keepsEveryVoterFor(t, g, leader, 16)
}

// keepsEveryVoterFor is keepsEveryVoter with views reads of the leader's
// raft view at least (each failed one takes its timeout, longer far away).
func keepsEveryVoterFor(t *testing.T, g *harness.Regions, leader *harness.Member, views float64) {
	t.Helper()
	const window = 3 * standbyFailoverAfter
	st0, err := g.Cluster.Status(leader)
	if err != nil {
		t.Fatal(err)
	}
	cli := client(t, leader.ClientURL)
	metrics := func() harness.Metrics { return harness.MustScrape(t, g.Replica.ClientURL+"/metrics") }
	m0 := metrics()
	reads0, suspicions0 := m0.Sum("understudy_replica_leader_view_reads_total"), countLogged(t, "voters silent: no peer URL answers and the leader does not replicate to them", g.Replica)
	start := time.Now()
	var checked time.Time
	puts := 0
	harness.WaitFor(t, 2*time.Minute, fmt.Sprintf("%v leader views read by the standby over %v", views, window), func() (bool, error) {
		if time.Since(checked) < 250*time.Millisecond {
			return false, nil // the checks below load the machine; 4 a second do
		}
		checked = time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := cli.Put(ctx, "live/"+fmt.Sprint(puts%100), "v"); err != nil {
			t.Fatalf("put at the leader: %v", err)
		}
		puts++
		m := metrics()
		if s, why := roleState(m); s != "idle" && (s != "waiting" || why != "silence") {
			t.Fatalf("%v into the window: the standby's role state is %s (%s), want idle or waiting (silence)", time.Since(start).Round(time.Millisecond), s, why)
		}
		if n := m.Sum("understudy_replica_failover_steps_total"); n != 0 {
			t.Fatalf("%v into the window: %v failover steps", time.Since(start).Round(time.Millisecond), n)
		}
		reads := m.Sum("understudy_replica_leader_view_reads_total") - reads0
		return reads >= views && time.Since(start) >= window, fmt.Errorf("%v leader views read in %v", reads, time.Since(start).Round(time.Millisecond))
	})
	m1 := metrics()
	suspicions := countLogged(t, "voters silent: no peer URL answers and the leader does not replicate to them", g.Replica) - suspicions0
	t.Logf("%v at %v RTT: %v leader views read (%v failed), %d puts, lag %v entries, leader contact age %.3fs; %d transient suspicions, the longest %v",
		time.Since(start).Round(time.Millisecond), standbyRTT, m1.Sum("understudy_replica_leader_view_reads_total")-reads0,
		m1.Sum("understudy_replica_leader_view_reads_total", "outcome=error")-m0.Sum("understudy_replica_leader_view_reads_total", "outcome=error"),
		puts, m1.Sum("understudy_replica_lag_entries"), m1.Sum("understudy_replica_leader_contact_age_seconds"), suspicions, longestSilence(t, g.Replica, start))
	for _, msg := range []string{"took the failover lock", "failover record written", "promoted to voter", "removed the dead voter it replaced"} {
		if n := countLogged(t, msg, g.Replica); n != 0 {
			t.Fatalf("the standby logged %q %d times", msg, n)
		}
	}
	vs, ls := voters(t, cli)
	if len(vs) != 3 || len(ls) != 1 || ls[0] != "standby" {
		t.Fatalf("voters %v, learners %v: want the 3 voters kept and the standby a learner", vs, ls)
	}
	st1, err := g.Cluster.Status(leader)
	if err != nil {
		t.Fatal(err)
	}
	if st1.Leader != st0.Leader || st1.RaftTerm != st0.RaftTerm {
		t.Fatalf("leader %x term %d after the window, was %x term %d", st1.Leader, st1.RaftTerm, st0.Leader, st0.RaftTerm)
	}
}

// longestSilence checks every role state r logged since start: idle, or
// waiting on a voter's silence that ended (back to idle) within
// --failover-after. It returns the longest such wait.
func longestSilence(t *testing.T, r *harness.Replica, since time.Time) time.Duration {
	t.Helper()
	var longest time.Duration
	var waiting time.Time
	for _, l := range logLines(t, r.Proc, "role state changed") {
		at := logTime(l)
		if at.Before(since) {
			continue
		}
		switch {
		case l["state"] == "idle":
			if !waiting.IsZero() {
				longest = max(longest, at.Sub(waiting))
			}
			waiting = time.Time{}
		case l["state"] == "waiting" && l["reason"] == "silence":
			if waiting.IsZero() {
				waiting = at
			}
		default:
			t.Fatalf("the standby logged role state %v (%v) %v into the window: %v", l["state"], l["reason"], at.Sub(since).Round(time.Millisecond), l["detail"])
		}
	}
	if !waiting.IsZero() {
		longest = max(longest, time.Since(waiting))
	}
	if longest >= standbyFailoverAfter {
		t.Fatalf("the standby waited on a live voter's silence for %v, --failover-after %v", longest, standbyFailoverAfter)
	}
	return longest
}

// TestStandbyFarAwayKeepsVotersWhoseClientURLsAreCut: at 600 ms RTT —
// longer than the role loop's 500 ms probe of a peer URL near the voters —
// with the leader's client URLs cut, so that the peer URLs, across the WAN,
// are the only evidence: the standby still sees every voter live (its probe
// timeout follows the round trip it measures) and removes none. With the
// fixed timeout it took every live voter for silent 8 s into the window.
func TestStandbyFarAwayKeepsVotersWhoseClientURLsAreCut(t *testing.T) {
	timed(t)
	g := startStandbyAt(t, 600*time.Millisecond, "")
	leader := g.Cluster.Leader(t)
	g.CutClientURL(leader)
	keepsEveryVoterFor(t, g, leader, 4)
}
