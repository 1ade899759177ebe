package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/test/harness"
)

// failoverRecordKey is where a standby persists the failover under way
// (replica/failover_lock.go).
const failoverRecordKey = "\x00understudy/failover-record"

// lockTTL is the failover lock's session TTL (replica/failover_lock.go).
const lockTTL = 10 * time.Second

// firstLogged waits until one of ps logs msg and returns it.
func firstLogged(t *testing.T, timeout time.Duration, msg string, ps ...*replica) *replica {
	t.Helper()
	var got *replica
	harness.WaitFor(t, timeout, fmt.Sprintf("a standby logs %q", msg), func() (bool, error) {
		for _, p := range ps {
			if len(logLines(t, p.Proc, msg)) > 0 {
				got = p
				return true, nil
			}
		}
		return false, nil
	})
	return got
}

// logTime is when a log line was written (zap's epoch seconds, or
// RFC 3339).
func logTime(l map[string]any) time.Time {
	switch ts := l["ts"].(type) {
	case float64:
		return time.Unix(0, int64(ts*1e9))
	case string:
		at, _ := time.Parse(time.RFC3339Nano, ts)
		return at
	}
	return time.Time{}
}

// countLogged counts msg over the logs of ps, across restarts.
func countLogged(t *testing.T, msg string, ps ...*replica) int {
	t.Helper()
	n := 0
	for _, p := range ps {
		n += len(logLines(t, p.Proc, msg))
	}
	return n
}

// noFailoverRecord checks the failover record is gone.
func noFailoverRecord(t *testing.T, cli *clientv3.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, failoverRecordKey)
	if err != nil {
		t.Fatalf("get the failover record: %v", err)
	}
	if len(resp.Kvs) != 0 {
		t.Fatalf("failover record left behind: %s", resp.Kvs[0].Value)
	}
}

// following returns c's members other than leader, in order.
func following(c *harness.Cluster, leader *harness.Member) []*harness.Member {
	var out []*harness.Member
	for _, m := range c.Members {
		if m != leader {
			out = append(out, m)
		}
	}
	return out
}

// TestStandbyLockHolderPausedPastItsSession: two standbys, a voter killed,
// the standby holding the failover lock stopped (SIGSTOP) past its
// session's TTL at a step of the failover: the other one finishes it;
// exactly one standby ends a voter, the dead voter is removed once, and
// the voters are as many as before.
func TestStandbyLockHolderPausedPastItsSession(t *testing.T) {
	for _, tc := range []struct {
		// pauseAt is the holder's log line the pause follows.
		pauseAt string
		// n voters: paused after its promotion, the holder is a second
		// silent voter, so 5 keep a live quorum.
		n int
	}{
		{pauseAt: "took the failover lock", n: 3},
		{pauseAt: "promoted to voter", n: 5},
	} {
		t.Run(tc.pauseAt, func(t *testing.T) {
			// The two pauses beside each other and nothing else: two
			// idle clusters with no workload, where a live voter would
			// have to be starved for --failover-after (5 s) to look
			// silent.
			beside(t)
			bins := harness.Binaries(t)
			c := harness.StartCluster(t, harness.ClusterConfig{N: tc.n})
			s1 := startReplica(t, bins, c, "s1", replicaOpts{Extra: standbyArgs})
			s2 := startReplica(t, bins, c, "s2", replicaOpts{Extra: standbyArgs})
			leader := c.Leader(t)
			dead := following(c, leader)[0]
			cli := client(t, leader.ClientURL)
			dead.Proc.Kill()
			holder := firstLogged(t, time.Minute, tc.pauseAt, s1, s2)
			if err := syscall.Kill(holder.PID(), syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			paused := time.Now()
			stopped := true
			defer func() {
				if stopped {
					syscall.Kill(holder.PID(), syscall.SIGCONT)
				}
			}()
			other := s1
			if holder == s1 {
				other = s2
			}
			t.Logf("%s paused after %q; %s must finish", holder.Name, tc.pauseAt, other.Name)
			if tc.pauseAt == "promoted to voter" {
				// An operator sees the failover under way, and whose.
				out, err := exec.Command(bins.Replica, "status", "--endpoints", strings.Join(c.Endpoints(), ",")).CombinedOutput()
				if err != nil || !strings.Contains(string(out), "failover under way") || !strings.Contains(string(out), dead.Name+" (") || !strings.Contains(string(out), "replaced by "+holder.Name) {
					t.Fatalf("replica status during the failover: %v\n%s\nwant the failover of %s by %s", err, out, dead.Name, holder.Name)
				}
				t.Logf("replica status:\n%s", out)
			}
			harness.WaitFor(t, 2*time.Minute, "the dead voter removed, the holder paused past its TTL", func() (bool, error) {
				vs, ls := voters(t, cli)
				return len(vs) == tc.n && !contains(vs, dead.Name) && len(ls) == 1 && time.Since(paused) > lockTTL+2*time.Second,
					fmt.Errorf("voters %v, learners %v, paused %v", vs, ls, time.Since(paused).Round(time.Second))
			})
			if err := syscall.Kill(holder.PID(), syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			stopped = false
			resumed := time.Now()
			// Woken, the holder learns its lock is gone and sees the
			// failover done; whatever it had decided before the pause, it
			// has tried by then.
			harness.WaitFor(t, time.Minute, holder.Name+" sees every voter live after the pause", func() (bool, error) {
				for _, l := range logLines(t, holder.Proc, "every voter is live") {
					if logTime(l).After(resumed) {
						return true, nil
					}
				}
				return false, nil
			})
			// A few more rounds for either standby to misbehave.
			harness.WaitFor(t, time.Minute, "both standbys log every voter live", func() (bool, error) {
				return countLogged(t, "every voter is live", other) > 0, nil
			})
			vs, ls := voters(t, cli)
			promoted := 0
			for _, s := range []*replica{s1, s2} {
				if contains(vs, s.Name) {
					promoted++
				}
			}
			if len(vs) != tc.n || promoted != 1 || len(ls) != 1 || contains(vs, dead.Name) {
				t.Fatalf("voters %v, learners %v: want %d voters with exactly one standby", vs, ls, tc.n)
			}
			promotions := countLogged(t, "promoted to voter", s1, s2)
			removals := countLogged(t, "removed the dead voter it replaced", s1, s2)
			if promotions != 1 || removals != 1 {
				t.Fatalf("%d promotions and %d removals logged, want one of each", promotions, removals)
			}
			noFailoverRecord(t, cli)
			t.Logf("lock lost logged by %s: %d; voters %v", holder.Name, len(logLines(t, holder.Proc, "failover lock lost: its session expired; starting over from the failover record")), vs)
		})
	}
}

// TestStandbyRemovalRetriedAfterTheLeaderDies: removalRetriedAfterTheLeaderDies
// at loopback.
func TestStandbyRemovalRetriedAfterTheLeaderDies(t *testing.T) {
	beside(t)
	removalRetriedAfterTheLeaderDies(t, standbyAtLoopback(t, harness.ClusterConfig{N: 3}))
}

// TestStandbyKilledBetweenPromotionAndRemoval: killedBetweenPromotionAndRemoval
// at loopback.
func TestStandbyKilledBetweenPromotionAndRemoval(t *testing.T) {
	beside(t)
	killedBetweenPromotionAndRemoval(t, standbyAtLoopback(t, harness.ClusterConfig{N: 3}))
}

// TestStandbyWhoseOnlyJoinEndpointDies: onlyJoinEndpointDies at loopback,
// the standby joined through a follower.
func TestStandbyWhoseOnlyJoinEndpointDies(t *testing.T) {
	beside(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	join := following(c, c.Leader(t))[0]
	onlyJoinEndpointDies(t, standbyBeside(t, c, "--join", join.ClientURL), join)
}

// standbyAtLoopback starts a cluster of cfg and a standby beside it, at
// loopback.
func standbyAtLoopback(t *testing.T, cfg harness.ClusterConfig) standbyScene {
	t.Helper()
	return standbyBeside(t, harness.StartCluster(t, cfg))
}

// standbyBeside starts a standby beside c at loopback, with extra flags
// before standbyArgs.
func standbyBeside(t *testing.T, c *harness.Cluster, extra ...string) standbyScene {
	t.Helper()
	s := startReplica(t, harness.Binaries(t), c, "standby", replicaOpts{Extra: append(extra, standbyArgs...)})
	return standbyScene{c: c, s: s, restarted: func() {},
		cut: func(m *harness.Member) { cutClientURL(t, client(t, c.Leader(t).ClientURL), m) }}
}
