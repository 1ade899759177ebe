package e2e

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/test/harness"
)

// Two standbys in region B at standbyRTT: the failover lock, taken and
// kept across the WAN, still lets exactly one of them act.

// startTwoStandbysInRegionB starts three voters in region A and the
// standbys s1 and s2 in region B, waits until both are idle, and delays
// the links between the regions.
func startTwoStandbysInRegionB(t *testing.T) (*harness.Regions, []*replica) {
	t.Helper()
	harness.Must(t, harness.Binaries(t).RequireReplica())
	g := harness.StartRegions(t, harness.RegionsConfig{ReplicaName: "s1", Others: []string{"s2"}, NoLearner: true, ClientProxies: true,
		ReplicaArgs: append([]string{"--join-timeout", "60s"}, standbyArgs...)})
	standbys := []*replica{g.Replica, g.Others[0]}
	for _, s := range standbys {
		waitRoleState(t, s, "idle", "live")
	}
	g.SetRTT(standbyRTT, standbyJitter)
	return g, standbys
}

// exactlyOneActed checks that one standby of ss is a voter and the other a
// learner, that dead is gone, and that one promotion and one removal were
// logged, once both standbys see every voter live again.
func exactlyOneActed(t *testing.T, g *harness.Regions, ss []*replica, dead *harness.Member, since time.Time) {
	t.Helper()
	for _, s := range ss {
		harness.WaitFor(t, time.Minute, s.Name+" sees every voter live", func() (bool, error) {
			for _, l := range logLines(t, s.Proc, "every voter is live") {
				if logTime(l).After(since) {
					return true, nil
				}
			}
			return false, nil
		})
	}
	cli := client(t, g.Cluster.Leader(t).ClientURL)
	vs, ls := voters(t, cli)
	promoted := 0
	for _, s := range ss {
		if contains(vs, s.Name) {
			promoted++
		}
	}
	if len(vs) != 3 || len(ls) != 1 || promoted != 1 || contains(vs, dead.Name) {
		t.Fatalf("voters %v, learners %v: want 3 voters with exactly one standby, %s gone", vs, ls, dead.Name)
	}
	if p, r := countLogged(t, "promoted to voter", ss...), countLogged(t, "removed the dead voter it replaced", ss...); p != 1 || r != 1 {
		t.Fatalf("%d promotions and %d removals logged, want one of each", p, r)
	}
	harness.WaitFor(t, 30*time.Second, "the failover record cleared", func() (bool, error) {
		return countLogged(t, "failover record cleared", ss...) >= 1, nil
	})
	noFailoverRecord(t, cli)
}

// TestTwoStandbysInRegionBExactlyOneActs: at standbyRTT, a killed follower
// is replaced within failoverDeadline by exactly one of two standbys.
func TestTwoStandbysInRegionBExactlyOneActs(t *testing.T) {
	wanVariant(t, "TestTwoStandbysExactlyOneActs")
	g, ss := startTwoStandbysInRegionB(t)
	dead := following(g.Cluster, g.Cluster.Leader(t))[0]
	var live []string
	for _, m := range g.Cluster.Members {
		if m != dead {
			live = append(live, m.ClientURL)
		}
	}
	dead.Proc.Kill()
	killed := time.Now()
	waitReplaced2(t, client(t, live...), dead, killed)
	exactlyOneActed(t, g, ss, dead, killed)
}

// TestStandbyInRegionBLockHolderPausedPastItsSession: at standbyRTT, the
// standby that took the failover lock is stopped (SIGSTOP) past its
// session's TTL; the other one finishes the failover, and exactly one acts.
func TestStandbyInRegionBLockHolderPausedPastItsSession(t *testing.T) {
	wanVariant(t, "TestStandbyLockHolderPausedPastItsSession")
	g, ss := startTwoStandbysInRegionB(t)
	leader := g.Cluster.Leader(t)
	dead := following(g.Cluster, leader)[0]
	cli := client(t, leader.ClientURL)
	dead.Proc.Kill()
	holder := firstLogged(t, time.Minute, "took the failover lock", ss...)
	if err := syscall.Kill(holder.PID(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	stopped := true
	defer func() {
		if stopped {
			_ = syscall.Kill(holder.PID(), syscall.SIGCONT)
		}
	}()
	harness.WaitFor(t, 2*time.Minute, "the dead voter removed, the holder paused past its TTL", func() (bool, error) {
		vs, ls := voters(t, cli)
		return len(vs) == 3 && !contains(vs, dead.Name) && len(ls) == 1 && time.Since(paused) > lockTTL+2*time.Second,
			fmt.Errorf("voters %v, learners %v, paused %v", vs, ls, time.Since(paused).Round(time.Second))
	})
	if err := syscall.Kill(holder.PID(), syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	stopped = false
	exactlyOneActed(t, g, ss, dead, time.Now())
}

// waitReplaced2 waits until one standby is a voter in place of dead (3
// voters, one learner left) within failoverDeadline of since.
func waitReplaced2(t *testing.T, cli *clientv3.Client, dead *harness.Member, since time.Time) {
	t.Helper()
	harness.WaitFor(t, failoverDeadline-time.Since(since), "a standby a voter, the dead voter "+dead.Name+" removed", func() (bool, error) {
		vs, ls := voters(t, cli)
		return len(vs) == 3 && len(ls) == 1 && !contains(vs, dead.Name), fmt.Errorf("voters %v, learners %v", vs, ls)
	})
	t.Logf("failover done %v after the kill (RTT %v)", time.Since(since).Round(time.Millisecond), standbyRTT)
}
