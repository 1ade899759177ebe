package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/test/harness"
)

// A standby fails over by raft's evidence alone: the tests here cut the
// advertised client URLs (ClusterConfig.ClientProxies) of the voters a
// standby would otherwise read, then kill a voter. --failover-after is 5s
// (standbyArgs); the failover must be done within it plus 15 s.

const failoverDeadline = standbyFailoverAfter + 15*time.Second

// advertisedClientURLs are the members' advertised client URLs (their
// proxies), comma-separated, for a --join that goes where a client of the
// member list would.
func advertisedClientURLs(ms ...*harness.Member) string {
	var urls []string
	for _, m := range ms {
		urls = append(urls, m.ClientProxy.URL())
	}
	return strings.Join(urls, ",")
}

// cutClientURL blackholes m's advertised client URL and checks that it no
// longer answers.
func cutClientURL(t *testing.T, cli *clientv3.Client, m *harness.Member) {
	t.Helper()
	m.ClientProxy.Blackhole()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := cli.Status(ctx, m.ClientProxy.URL()); err == nil {
		t.Fatalf("%s's advertised client URL %s still answers after the cut", m.Name, m.ClientProxy.URL())
	}
}

// waitReplaced waits until the standby is a voter and dead is no member.
func waitReplaced(t *testing.T, cli *clientv3.Client, dead *harness.Member, since time.Time) {
	t.Helper()
	harness.WaitFor(t, failoverDeadline-time.Since(since), "the standby a voter, the dead voter "+dead.Name+" removed", func() (bool, error) {
		vs, ls := voters(t, cli)
		return len(vs) == 3 && len(ls) == 0 && !contains(vs, dead.Name) && contains(vs, "standby"), fmt.Errorf("voters %v, learners %v", vs, ls)
	})
	t.Logf("failover done %v after the kill", time.Since(since).Round(time.Millisecond))
}

// TestStandbyReplacesAFollowerWhileTheLeadersClientURLIsCut: the leader's
// advertised client URL never answers (its raft is healthy), so the
// standby cannot read the leader's raft status; it learns the leader's
// commit index from ReadIndex rounds and replaces a killed follower.
func TestStandbyReplacesAFollowerWhileTheLeadersClientURLIsCut(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3, ClientProxies: true})
	leader := c.Leader(t)
	followers := following(c, leader)
	s := startReplica(t, bins, c, "standby", replicaOpts{Extra: append([]string{"--join", advertisedClientURLs(c.Members...)}, standbyArgs...)})
	cli := client(t, leader.ClientURL, followers[1].ClientURL)
	cutClientURL(t, cli, leader)
	followers[0].Proc.Kill()
	waitReplaced(t, cli, followers[0], time.Now())
	harness.WaitFor(t, 10*time.Second, "the failover record cleared", func() (bool, error) {
		return countLogged(t, "failover record cleared", s) == 1, nil
	})
	noFailoverRecord(t, cli)
}

// TestStandbyReplacesADeadLeaderWhileAFollowersClientURLIsCut: the leader
// dies; one of the two followers left, which may become the new leader,
// has its advertised client URL cut.
func TestStandbyReplacesADeadLeaderWhileAFollowersClientURLIsCut(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3, ClientProxies: true})
	leader := c.Leader(t)
	followers := following(c, leader)
	startReplica(t, bins, c, "standby", replicaOpts{Extra: append([]string{"--join", advertisedClientURLs(c.Members...)}, standbyArgs...)})
	cli := client(t, followers[0].ClientURL, followers[1].ClientURL)
	cutClientURL(t, cli, followers[0])
	leader.Proc.Kill()
	waitReplaced(t, cli, leader, time.Now())
}

// TestStandbyWhoseOnlyJoinEndpointLosesItsClientURL:
// onlyJoinEndpointLosesItsClientURL at loopback, --join naming only the
// leader's advertised client URL.
func TestStandbyWhoseOnlyJoinEndpointLosesItsClientURL(t *testing.T) {
	beside(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3, ClientProxies: true})
	leader := c.Leader(t)
	onlyJoinEndpointLosesItsClientURL(t, standbyBeside(t, c, "--join", advertisedClientURLs(leader)), leader)
}

// enableAuth gives the TLS cluster c a root user, a user "standby" with no
// role, and turns auth on; with --client-cert-auth a certificate's CN is
// its user.
func enableAuth(t *testing.T, bins *harness.Bins, c *harness.Cluster) {
	t.Helper()
	for _, args := range [][]string{
		{"user", "add", "root:rootpw"}, {"user", "grant-role", "root", "root"},
		{"user", "add", "standby:standbypw"},
		{"auth", "enable"},
	} {
		harness.MustEtcdctl(t, bins, c.Endpoints(), append(args, c.TLS.EtcdctlFlags()...)...)
	}
}

// tlsClient is a client of the TLS cluster as root (the certificate's CN).
func tlsClient(t *testing.T, c *harness.Cluster, endpoints ...string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, TLS: c.TLS.ClientConfig(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// TestStandbyOverTLSWithAuth: every voter requires client certificates and
// auth is on; the standby, whose certificate's CN is root, replaces a
// killed follower.
func TestStandbyOverTLSWithAuth(t *testing.T) {
	timed(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3, TLS: harness.NewCerts(t)})
	enableAuth(t, bins, c)
	leader := c.Leader(t)
	followers := following(c, leader)
	s := startReplica(t, bins, c, "standby", replicaOpts{Extra: standbyArgs})
	cli := tlsClient(t, c, leader.ClientURL, followers[1].ClientURL)
	followers[0].Proc.Kill()
	waitReplaced(t, cli, followers[0], time.Now())
	// A follower forwards a promotion to the leader without a certificate
	// identity, and the leader refuses it: the standby asks the leader.
	for _, m := range []*harness.Member{leader, followers[1]} {
		if l := logLines(t, m.Proc, "failed to promote a member"); len(l) != 0 {
			t.Fatalf("%s refused %d promotions forwarded by a follower; first: %v", m.Name, len(l), l[0])
		}
	}
	if l := logLines(t, s.Proc, "promotion not sent to the leader's client URL; sending it to any voter"); len(l) != 0 {
		t.Fatalf("the standby sent its promotion through any voter %d times; first: %v", len(l), l[0])
	}
}

// TestStandbyWithoutRightsSaysWhichCallIsRefused: the standby's
// certificate's CN is a user with no role (it joined before auth was
// turned on); a follower dies. The standby is not promoted, nothing is
// removed, and it says which call the cluster refused and as whom.
func TestStandbyWithoutRightsSaysWhichCallIsRefused(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	certs := harness.NewCerts(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3, TLS: certs})
	cert, key := harness.MemberCert(t, certs, "standby")
	s := startReplica(t, bins, c, "standby", replicaOpts{Extra: append([]string{"--cert-file", cert, "--key-file", key}, standbyArgs...)})
	enableAuth(t, bins, c)
	leader := c.Leader(t)
	followers := following(c, leader)
	cli := tlsClient(t, c, leader.ClientURL, followers[1].ClientURL)
	followers[0].Proc.Kill()
	killed := time.Now()
	refused := func() (bool, error) {
		for _, l := range logLines(t, s.Proc, "role state changed") {
			detail, _ := l["detail"].(string)
			if l["state"] == "blocked" && l["reason"] == "refused" && strings.Contains(detail, "permission denied") &&
				strings.Contains(detail, "failover lock: Txn") && strings.Contains(detail, `user "standby"`) {
				return true, nil
			}
		}
		return false, fmt.Errorf("no role state naming the refused call, the error and the user")
	}
	harness.WaitFor(t, failoverDeadline, "the standby saying which call was refused", refused)
	// Until the deadline a standby with rights would have met, and after
	// it, nothing changes.
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for time.Since(killed) < failoverDeadline+2*time.Second {
		vs, ls := voters(t, cli)
		if len(vs) != 3 || !contains(vs, followers[0].Name) || len(ls) != 1 {
			t.Fatalf("%v after the kill: voters %v, learners %v; want the 3 voters kept and the standby a learner", time.Since(killed).Round(time.Millisecond), vs, ls)
		}
		<-tick.C
	}
	if n := len(logLines(t, s.Proc, "promoted to voter")); n != 0 {
		t.Fatalf("the standby without rights logged a promotion %d times", n)
	}
}

// statusRow is one member as `replica status -w json` shows it.
type statusRow struct {
	Name       string `json:"name"`
	ID         string `json:"id"`
	IsLearner  bool   `json:"is_learner"`
	IsLeader   bool   `json:"is_leader"`
	Replica    bool   `json:"understudy_replica"`
	Leader     string `json:"leader"`
	RaftTerm   uint64 `json:"raft_term"`
	Lag        uint64 `json:"lag_entries"`
	Freshness  string `json:"freshness_age"`
	Promotable *bool  `json:"promotable"`
	Why        string `json:"promotion"`
	RoleState  string `json:"role_state"`
}

// replicaStatus runs `replica status -w json` against endpoints; it also
// returns the output, for failure messages.
func replicaStatus(t *testing.T, bins *harness.Bins, endpoints ...string) ([]statusRow, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bins.Replica, "status", "-w", "json", "--endpoints", strings.Join(endpoints, ",")).Output()
	if err != nil {
		t.Fatalf("replica status: %v", err)
	}
	var sts []statusRow
	if err := json.Unmarshal(out, &sts); err != nil {
		t.Fatalf("replica status -w json does not parse: %v\n%s", err, out)
	}
	return sts, out
}

// roleStates asks `replica status -w json` for each member's role state.
func roleStates(t *testing.T, bins *harness.Bins, endpoints ...string) map[string]string {
	t.Helper()
	sts, _ := replicaStatus(t, bins, endpoints...)
	states := map[string]string{}
	for _, s := range sts {
		states[s.Name] = s.RoleState
	}
	return states
}

// TestReplicaStatusSaysWhyAStandbyWaits: `replica status` shows the
// standby's state and reason: idle with every voter live; waiting while a
// killed voter's silence and then the promotion hold run; blocked once its
// own raft links are cut.
func TestReplicaStatusSaysWhyAStandbyWaits(t *testing.T) {
	timed(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3, PeerProxies: true})
	leader := c.Leader(t)
	followers := following(c, leader)
	harness.Must(t, bins.RequireReplica())
	s := harness.StartReplica(t, c, harness.ReplicaConfig{Name: "standby", PeerProxy: true,
		Extra: []string{"--role", "standby", "--failover-after", "2s", "--promote-hold", "1h"}})
	eps := []string{leader.ClientURL, followers[1].ClientURL}
	want := func(what, prefix string) {
		t.Helper()
		harness.WaitFor(t, 20*time.Second, "replica status: "+what, func() (bool, error) {
			st := roleStates(t, bins, eps...)["standby"]
			return strings.HasPrefix(st, prefix), fmt.Errorf("role state %q, want %q...", st, prefix)
		})
	}
	want("idle", "idle: every voter is live")
	followers[0].Proc.Kill()
	want("the silence", "waiting: voter "+followers[0].Name+" silent for ")
	want("the hold", "waiting: hold ")
	if st := roleStates(t, bins, eps...)["standby"]; !strings.HasSuffix(st, " of 1h0m0s") {
		t.Fatalf("role state %q: want the hold's length", st)
	}
	s.CutPeerLinks(t, c)
	want("blocked", "blocked: not caught up: ")
	if v := metric(t, s.ClientURL, "understudy_replica_role_state", "state=blocked", "reason=not-caught-up"); v != 1 {
		t.Fatalf("understudy_replica_role_state{state=blocked,reason=not-caught-up} = %v, want 1", v)
	}
}
