package e2e

import (
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/test/harness"
)

// A standby scene is one standby named "standby" beside three voters, at
// loopback (startReplica) or in region B across a WAN (StartRegions); the
// failover scenarios below run in both.
type standbyScene struct {
	c *harness.Cluster
	s *replica
	// cut makes m's client URLs unanswerable for the standby; its raft
	// links stay whole.
	cut func(m *harness.Member)
	// restarted re-applies the topology after a process restarted with a
	// new PID (the WAN's delay is set per process); a no-op at loopback.
	restarted func()
}

// liveClient is a client of every voter of c but dead.
func liveClient(t *testing.T, c *harness.Cluster, dead *harness.Member) *clientv3.Client {
	t.Helper()
	var live []string
	for _, m := range c.Members {
		if m != dead {
			live = append(live, m.ClientURL)
		}
	}
	return client(t, live...)
}

// loggedOnce waits until s has logged msg (the cluster may show a
// removal before the standby's call returns across a WAN) and checks it
// did once.
func loggedOnce(t *testing.T, msg string, s *replica) {
	t.Helper()
	harness.WaitFor(t, 10*time.Second, fmt.Sprintf("the standby logs %q", msg), func() (bool, error) {
		return countLogged(t, msg, s) > 0, nil
	})
	if n := countLogged(t, msg, s); n != 1 {
		t.Fatalf("%q logged %d times, want once", msg, n)
	}
}

// removalRetriedAfterTheLeaderDies: the leader killed right after the
// promotion leaves no quorum (2 live of 4 voters), so the removal fails;
// once the leader is back, the standby removes the dead voter without an
// operator, and only it.
func removalRetriedAfterTheLeaderDies(t *testing.T, sc standbyScene) {
	s, c := sc.s, sc.c
	leader := c.Leader(t)
	fs := following(c, leader)
	dead, live := fs[0], fs[1]
	dead.Proc.Kill()
	firstLogged(t, time.Minute, "promoted to voter", s)
	leader.Proc.Kill()
	killed := time.Now()
	// The standby tries and fails while there is no quorum.
	failures := []string{"role: cannot observe the cluster; every hold starts over", "removing the dead voter failed; will retry",
		"failover record not written", "removal not attempted: the failover lock or record changed", "failover lock"}
	harness.WaitFor(t, time.Minute, "the standby fails a failover step", func() (bool, error) {
		n := 0
		for _, f := range failures {
			n += countLogged(t, f, s)
		}
		return n > 0, nil
	})
	if n := countLogged(t, "removed the dead voter it replaced", s); n != 0 {
		t.Fatalf("removed the dead voter without a quorum?")
	}
	leader.Proc.Restart(t)
	sc.restarted()
	t.Logf("leader %s down %v", leader.Name, time.Since(killed).Round(time.Millisecond))
	cli := client(t, leader.ClientURL, live.ClientURL)
	harness.WaitFor(t, 2*time.Minute, "the dead voter removed", func() (bool, error) {
		vs, ls := voters(t, cli)
		return len(vs) == 3 && len(ls) == 0 && !contains(vs, dead.Name), fmt.Errorf("voters %v, learners %v", vs, ls)
	})
	vs, _ := voters(t, cli)
	if !contains(vs, leader.Name) || !contains(vs, live.Name) || !contains(vs, "standby") {
		t.Fatalf("voters %v: want the restarted leader, %s and the standby", vs, live.Name)
	}
	loggedOnce(t, "removed the dead voter it replaced", s)
	harness.WaitFor(t, time.Minute, "the failover record cleared", func() (bool, error) {
		return countLogged(t, "failover record cleared", s) > 0, nil
	})
	noFailoverRecord(t, cli)
	for _, f := range failures {
		if n := countLogged(t, f, s); n > 0 {
			t.Logf("%q: %d", f, n)
		}
	}
}

// killedBetweenPromotionAndRemoval: kill -9 right after the promotion,
// restart: the standby, now a voter, resumes from the record and removes
// the dead voter.
func killedBetweenPromotionAndRemoval(t *testing.T, sc standbyScene) {
	s, c := sc.s, sc.c
	leader := c.Leader(t)
	dead := following(c, leader)[0]
	cli := client(t, leader.ClientURL)
	dead.Proc.Kill()
	firstLogged(t, time.Minute, "promoted to voter", s)
	s.Proc.Kill()
	if n := countLogged(t, "removed the dead voter it replaced", s); n != 0 {
		t.Fatalf("the standby removed the dead voter before it was killed: the kill missed the window")
	}
	// 4 voters now, 2 of them down: no quorum until the standby is back.
	s.Proc.Restart(t)
	sc.restarted()
	s.WaitServing(t, 2*time.Minute)
	harness.WaitFor(t, 2*time.Minute, "the restarted standby removes the dead voter", func() (bool, error) {
		vs, ls := voters(t, cli)
		return len(vs) == 3 && len(ls) == 0 && !contains(vs, dead.Name) && contains(vs, "standby"), fmt.Errorf("voters %v, learners %v", vs, ls)
	})
	if n := countLogged(t, "promoted to voter", s); n != 1 {
		t.Fatalf("%d promotions logged, want 1", n)
	}
	loggedOnce(t, "removed the dead voter it replaced", s)
	harness.WaitFor(t, time.Minute, "the failover record cleared", func() (bool, error) {
		return countLogged(t, "failover record cleared", s) > 0, nil
	})
	noFailoverRecord(t, cli)
}

// onlyJoinEndpointDies: join, the one voter the standby was given to join
// through, dies. Membership calls follow the member list, not --join, so
// the failover still completes within failoverDeadline.
func onlyJoinEndpointDies(t *testing.T, sc standbyScene, join *harness.Member) {
	cli := liveClient(t, sc.c, join)
	join.Proc.Kill()
	waitReplaced(t, cli, join, time.Now())
	harness.WaitFor(t, time.Minute, "the failover record cleared", func() (bool, error) {
		return countLogged(t, "failover record cleared", sc.s) > 0, nil
	})
	noFailoverRecord(t, cli)
}

// onlyJoinEndpointLosesItsClientURL: join, the one voter the standby was
// given to join through, has its client URL cut; a follower other than it
// dies. The standby's calls go through the voters its own member list
// names.
func onlyJoinEndpointLosesItsClientURL(t *testing.T, sc standbyScene, join *harness.Member) {
	var dead *harness.Member
	for _, m := range following(sc.c, sc.c.Leader(t)) {
		if m != join {
			dead = m
			break
		}
	}
	cli := liveClient(t, sc.c, dead)
	sc.cut(join)
	dead.Proc.Kill()
	waitReplaced(t, cli, dead, time.Now())
}
