package e2e

import (
	"context"
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

// startStandbyInRegionB starts three voters in region A and a standby named
// "standby" in region B with standbyArgs, waits until the standby is idle
// (every voter live), then delays the links between the regions and checks
// that the delay is in effect: a linearizable read at the standby (a
// ReadIndex round through the leader) takes at least standbyRTT.
func startStandbyInRegionB(t *testing.T) *harness.Regions {
	t.Helper()
	harness.Binaries(t).RequireReplica(t)
	g := harness.StartRegions(t, harness.RegionsConfig{ReplicaName: "standby", NoLearner: true, ClientProxies: true,
		ReplicaArgs: append([]string{"--join-timeout", "60s"}, standbyArgs...)})
	waitRoleState(t, g.Replica, "idle", "live")
	g.SetRTT(standbyRTT, standbyJitter)
	cli := client(t, g.Replica.ClientURL)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := cli.Get(ctx, "rtt-check"); err != nil {
		t.Fatalf("linearizable read at the standby: %v", err)
	}
	if took := time.Since(start); took < standbyRTT {
		t.Fatalf("a linearizable read at the standby took %v across an RTT of %v: the delay is not in effect", took, standbyRTT)
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
	g := startStandbyInRegionB(t)
	replacedInRegionB(t, g, following(g.Cluster, g.Cluster.Leader(t))[0])
}

// TestStandbyInRegionBReplacesADeadLeader: at standbyRTT, a killed leader
// is replaced within failoverDeadline (region A elects a new one; the
// standby, a learner, learns of it across the WAN).
func TestStandbyInRegionBReplacesADeadLeader(t *testing.T) {
	g := startStandbyInRegionB(t)
	replacedInRegionB(t, g, g.Cluster.Leader(t))
}

// TestStandbyInRegionBReplacesAFollowerWhileTheLeadersClientURLIsCut: at
// standbyRTT, with every client link from region B to the leader cut (its
// raft is healthy), a killed follower is replaced: the leader's commit
// index comes from ReadIndex rounds across the WAN.
func TestStandbyInRegionBReplacesAFollowerWhileTheLeadersClientURLIsCut(t *testing.T) {
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

// TestStandbyInRegionBKeepsLiveVoters: at standbyRTT, with every voter
// live and puts flowing, the standby observes for three times
// --failover-after (16 fresh reads of the leader's raft view, at most one
// a second) and does nothing: its role state stays idle (every state it
// logs in the window, and every one scraped), it never suspects a voter,
// takes the lock or changes membership, and the leader and its term stay
// as they were.
func TestStandbyInRegionBKeepsLiveVoters(t *testing.T) {
	g := startStandbyInRegionB(t)
	c := g.Cluster
	leader := c.Leader(t)
	st0, err := c.Status(leader)
	if err != nil {
		t.Fatal(err)
	}
	cli := client(t, leader.ClientURL)
	start := time.Now()
	m0 := harness.MustScrape(t, g.Replica.ClientURL+"/metrics")
	reads0 := m0.Sum("understudy_replica_leader_view_reads_total")
	puts, scrapes := 0, 0
	const window = 3 * standbyFailoverAfter
	harness.WaitFor(t, 2*time.Minute, fmt.Sprintf("16 leader views read by the standby over %v", window), func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := cli.Put(ctx, "live/"+fmt.Sprint(puts%100), "v"); err != nil {
			t.Fatalf("put at the leader: %v", err)
		}
		puts++
		m := harness.MustScrape(t, g.Replica.ClientURL+"/metrics")
		scrapes++
		if s, why := roleState(m); s != "idle" {
			t.Fatalf("%v into the window: the standby's role state is %s (%s), want idle", time.Since(start).Round(time.Millisecond), s, why)
		}
		if n := m.Sum("understudy_replica_silent_voters"); n != 0 {
			t.Fatalf("%v into the window: %v silent voters", time.Since(start).Round(time.Millisecond), n)
		}
		if n := m.Sum("understudy_replica_failover_steps_total"); n != 0 {
			t.Fatalf("%v into the window: %v failover steps", time.Since(start).Round(time.Millisecond), n)
		}
		reads := m.Sum("understudy_replica_leader_view_reads_total") - reads0
		return reads >= 16 && time.Since(start) >= window, fmt.Errorf("%v leader views read in %v", reads, time.Since(start).Round(time.Millisecond))
	})
	m1 := harness.MustScrape(t, g.Replica.ClientURL+"/metrics")
	t.Logf("%v at %v RTT: %v leader views read (%v failed), %d puts, %d scrapes, lag %v entries, leader contact age %vs",
		time.Since(start).Round(time.Millisecond), standbyRTT,
		m1.Sum("understudy_replica_leader_view_reads_total")-reads0,
		m1.Sum("understudy_replica_leader_view_reads_total", "outcome=error")-m0.Sum("understudy_replica_leader_view_reads_total", "outcome=error"),
		puts, scrapes, m1.Sum("understudy_replica_lag_entries"), m1.Sum("understudy_replica_leader_contact_age_seconds"))
	for _, l := range logLines(t, g.Replica.Proc, "role state changed") {
		if logTime(l).After(start) && l["state"] != "idle" {
			t.Errorf("the standby logged role state %v (%v) at %v into the window: %v", l["state"], l["reason"], logTime(l).Sub(start).Round(time.Millisecond), l["detail"])
		}
	}
	for _, msg := range []string{"voters silent: no peer URL answers and the leader does not replicate to them", "took the failover lock", "failover record written", "promoted to voter", "removed the dead voter it replaced"} {
		if n := countLogged(t, msg, g.Replica); n != 0 {
			t.Errorf("the standby logged %q %d times", msg, n)
		}
	}
	vs, ls := voters(t, cli)
	if len(vs) != 3 || len(ls) != 1 || ls[0] != "standby" {
		t.Fatalf("voters %v, learners %v: want the 3 voters kept and the standby a learner", vs, ls)
	}
	st1, err := c.Status(leader)
	if err != nil {
		t.Fatal(err)
	}
	if st1.Leader != st0.Leader || st1.RaftTerm != st0.RaftTerm {
		t.Fatalf("leader %x term %d after the window, was %x term %d", st1.Leader, st1.RaftTerm, st0.Leader, st0.RaftTerm)
	}
}
