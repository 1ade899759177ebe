package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/test/harness"
)

// electionTimeout is the harness members' (etcd's default).
const electionTimeout = time.Second

// writer puts through cli, one put at a time and one every writerPace, and
// records the slowest put and any failure, until stopped (by finish, or at
// the test's end if it fails first).
type writer struct {
	mu      sync.Mutex
	slowest time.Duration
	failed  []error
	puts    int
	stop    chan struct{}
	stopped sync.Once
	done    chan struct{}
}

// writerPace spaces a writer's puts: a put that stalls past an election
// timeout shows at any rate, and three timed tests' writers together keep
// the machine far from busy (unpaced, each put the next at once).
const writerPace = 10 * time.Millisecond

func startWriter(t *testing.T, cli *clientv3.Client) *writer {
	w := &writer{stop: make(chan struct{}), done: make(chan struct{})}
	t.Cleanup(w.halt)
	go func() {
		defer close(w.done)
		pace := time.NewTicker(writerPace)
		defer pace.Stop()
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			case <-pace.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			t0 := time.Now()
			_, err := cli.Put(ctx, "load/"+strconv.Itoa(i%500), strconv.Itoa(i))
			d := time.Since(t0)
			cancel()
			w.mu.Lock()
			w.puts++
			w.slowest = max(w.slowest, d)
			if err != nil {
				w.failed = append(w.failed, err)
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// halt stops the writer and waits for it; again, it does nothing.
func (w *writer) halt() {
	w.stopped.Do(func() { close(w.stop) })
	<-w.done
}

// finish stops the writer and checks no put failed or stalled for longer
// than an election timeout.
func (w *writer) finish(t *testing.T) {
	t.Helper()
	w.halt()
	t.Logf("writer: %d puts, slowest %v", w.puts, w.slowest)
	if len(w.failed) > 0 {
		t.Errorf("%d puts failed, first: %v", len(w.failed), w.failed[0])
	}
	if w.slowest > electionTimeout {
		t.Errorf("a put took %v, longer than an election timeout", w.slowest)
	}
}

// voters lists the voting members' names.
func voters(t *testing.T, cli *clientv3.Client) (vs, learners []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ml, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatalf("member list: %v", err)
	}
	for _, m := range ml.Members {
		if m.IsLearner {
			learners = append(learners, m.Name)
		} else {
			vs = append(vs, m.Name)
		}
	}
	return vs, learners
}

// logLines returns the JSON log lines of a process with this message.
func logLines(t *testing.T, p *harness.Proc, msg string) []map[string]any {
	t.Helper()
	f, err := os.Open(p.LogPath())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

func TestVoterRolePromotesOnceCaughtUp(t *testing.T) {
	timed(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	cli := c.Client(t)
	fill(t, cli, "data/", 5000)
	w := startWriter(t, cli)
	r := startReplica(t, bins, c, "r1", replicaOpts{Extra: []string{"--role", "voter", "--promote-hold", "2s", "--promote-max-lag", "1000"}})
	harness.WaitFor(t, time.Minute, "the replica promoted: 4 voters", func() (bool, error) {
		vs, _ := voters(t, cli)
		return len(vs) == 4, nil
	})
	w.finish(t)
	// The member list can show the promotion before the replica has had
	// MemberPromote's answer and logged it.
	var lines []map[string]any
	harness.WaitFor(t, 30*time.Second, "the replica logs its promotion", func() (bool, error) {
		lines = logLines(t, r.Proc, "promoted to voter")
		return len(lines) > 0, nil
	})
	if len(lines) != 1 {
		t.Fatalf("%d promotion log lines, want 1", len(lines))
	}
	applied, commit := lines[0]["applied"].(float64), lines[0]["leader-commit"].(float64)
	if commit-applied > 1000 {
		t.Fatalf("promoted %v entries behind (applied %v, leader commit %v), more than --promote-max-lag", commit-applied, applied, commit)
	}
}

func TestStoppedLearnerIsNotPromoted(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	cli := c.Client(t)
	// A log of a few thousand entries, one put each.
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < 3000; i += 8 {
				if _, err := cli.Put(context.Background(), "data/"+strconv.Itoa(i), "v"); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	r := startReplica(t, bins, c, "r1", replicaOpts{})
	if err := syscall.Kill(r.PID(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	defer func() {
		if stopped {
			syscall.Kill(r.PID(), syscall.SIGCONT)
		}
	}()
	// A few percent behind: etcd's own check (90% of the leader's log)
	// would let it through.
	for i := range 100 {
		if _, err := cli.Put(context.Background(), "behind/"+strconv.Itoa(i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	eps := strings.Join(c.Endpoints(), ",")
	out, err := exec.Command(bins.Replica, "promote", "r1", "--endpoints", eps).CombinedOutput()
	var ee *exec.ExitError
	if !asExitError(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "refusing r1") || !strings.Contains(string(out), "entries behind") || !strings.Contains(string(out), "enough for etcd's own check") {
		t.Fatalf("replica promote on a stopped learner: %v\n%s\nwant a refusal", err, out)
	}
	if vs, _ := voters(t, cli); len(vs) != 3 {
		t.Fatalf("voters %v after the refusal", vs)
	}
	t.Logf("refusal: %s", strings.TrimSpace(string(out)))

	syscall.Kill(r.PID(), syscall.SIGCONT)
	stopped = false
	harness.WaitFor(t, time.Minute, "the resumed learner promotable and promoted", func() (bool, error) {
		out, err := exec.Command(bins.Replica, "promote", "r1", "--endpoints", eps).CombinedOutput()
		return err == nil, fmt.Errorf("%v: %s", err, out)
	})
	if vs, _ := voters(t, cli); len(vs) != 4 {
		t.Fatalf("voters %v after promoting r1", vs)
	}
}

func TestReplicaStatusAgreesWithEtcdctl(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	r := startReplica(t, bins, c, "r1", replicaOpts{})
	sts, _ := replicaStatus(t, bins, c.Endpoints()...)
	var ml struct {
		Members []struct {
			ID        uint64 `json:"ID"`
			Name      string `json:"name"`
			IsLearner bool   `json:"isLearner"`
		} `json:"members"`
	}
	if err := json.Unmarshal([]byte(harness.MustEtcdctl(t, bins, c.Endpoints(), "member", "list", "-w", "json")), &ml); err != nil {
		t.Fatal(err)
	}
	if len(ml.Members) != len(sts) || len(sts) != 4 {
		t.Fatalf("status lists %d members, etcdctl %d; want 4", len(sts), len(ml.Members))
	}
	byID := map[string]int{}
	for i, s := range sts {
		byID[s.ID] = i
	}
	for _, m := range ml.Members {
		i, ok := byID[strconv.FormatUint(m.ID, 16)]
		if !ok || sts[i].Name != m.Name || sts[i].IsLearner != m.IsLearner {
			t.Fatalf("etcdctl member %x %s learner=%v; status has %+v", m.ID, m.Name, m.IsLearner, sts)
		}
	}
	var es []struct {
		Status struct {
			Header struct {
				MemberID uint64 `json:"member_id"`
			} `json:"header"`
			Leader   uint64 `json:"leader"`
			RaftTerm uint64 `json:"raftTerm"`
		} `json:"Status"`
	}
	if err := json.Unmarshal([]byte(harness.MustEtcdctl(t, bins, c.Endpoints(), "endpoint", "status", "-w", "json")), &es); err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		s := sts[byID[strconv.FormatUint(e.Status.Header.MemberID, 16)]]
		if s.Leader != strconv.FormatUint(e.Status.Leader, 16) || s.RaftTerm != e.Status.RaftTerm {
			t.Fatalf("endpoint status of %x: leader %x term %d; replica status: leader %s term %d", e.Status.Header.MemberID, e.Status.Leader, e.Status.RaftTerm, s.Leader, s.RaftTerm)
		}
		if s.IsLeader != (e.Status.Leader == e.Status.Header.MemberID) {
			t.Fatalf("member %s: is_leader %v disagrees with endpoint status", s.Name, s.IsLeader)
		}
	}
	rs := sts[byID[func() string { id, _ := memberID(t, c.Client(t), r.ClientURL); return strconv.FormatUint(id, 16) }()]]
	if !rs.Replica || !rs.IsLearner || rs.Freshness == "" || rs.Promotable == nil {
		t.Fatalf("the replica's row: %+v; want a learner replica with freshness and a promotion verdict", rs)
	}
}

func TestStandbyReplacesADeadVoter(t *testing.T) {
	timed(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	r := startReplica(t, bins, c, "standby", replicaOpts{Extra: []string{"--role", "standby", "--failover-after", "3s", "--promote-hold", "1s"}})
	// While every voter replicates, the standby reads the leader's
	// /debug/vars at most once a second, not on each observation (5 a
	// second): each read costs the leader a millisecond of CPU. The window
	// is a measurement's length, not a wait for a condition.
	const window = 4 * time.Second
	reads := metric(t, r.ClientURL, "understudy_replica_leader_view_reads_total")
	time.Sleep(window)
	if n := metric(t, r.ClientURL, "understudy_replica_leader_view_reads_total") - reads; n < 1 || n > window.Seconds()+2 {
		t.Fatalf("the standby read the leader's raft view %v times in %v with every voter live; want 1 to %v", n, window, window.Seconds()+2)
	} else {
		t.Logf("%v reads of the leader's raft view in %v", n, window)
	}
	leader := c.Leader(t)
	var followers []*harness.Member
	for _, m := range c.Members {
		if m != leader {
			followers = append(followers, m)
		}
	}
	// Writes go through the leader, which stays up: a failed write is then
	// the cluster's doing, not a dropped connection's.
	wcli := client(t, leader.ClientURL)
	w := startWriter(t, wcli)
	followers[0].Proc.Kill()
	killed := time.Now()
	// --failover-after plus a few seconds: the hold, the lock, two
	// membership changes.
	harness.WaitFor(t, 3*time.Second+12*time.Second, "the standby a voter, the dead voter removed", func() (bool, error) {
		vs, ls := voters(t, wcli)
		return len(vs) == 3 && len(ls) == 0 && !contains(vs, followers[0].Name) && contains(vs, "standby"), fmt.Errorf("voters %v, learners %v", vs, ls)
	})
	t.Logf("failover done %v after the kill", time.Since(killed).Round(time.Millisecond))
	// The removed voter comes back: it is refused and stops, and the
	// cluster does not notice.
	followers[0].Proc.Restart(t)
	harness.WaitFor(t, 30*time.Second, "the removed voter stopped", func() (bool, error) {
		return followers[0].Proc.Exited(), nil
	})
	if vs, _ := voters(t, wcli); len(vs) != 3 || contains(vs, followers[0].Name) {
		t.Fatalf("voters %v after the removed voter came back", vs)
	}
	for _, u := range []string{leader.ClientURL, followers[1].ClientURL, r.ClientURL} {
		if _, err := wcli.Status(context.Background(), u); err != nil {
			t.Fatalf("voter %s unhealthy after the failover: %v", u, err)
		}
	}
	w.finish(t)
	// Fault tolerance is back: a second voter can go.
	followers[1].Proc.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := client(t, leader.ClientURL, r.ClientURL).Put(ctx, "after-second-kill", "v"); err != nil {
		t.Fatalf("a write after the second voter kill: %v", err)
	}
}

func TestTwoStandbysExactlyOneActs(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	args := []string{"--role", "standby", "--failover-after", "3s", "--promote-hold", "1s"}
	s1 := startReplica(t, bins, c, "s1", replicaOpts{Extra: args})
	s2 := startReplica(t, bins, c, "s2", replicaOpts{Extra: args})
	leader := c.Leader(t)
	var dead *harness.Member
	for _, m := range c.Members {
		if m != leader {
			dead = m
			break
		}
	}
	cli := client(t, leader.ClientURL)
	dead.Proc.Kill()
	harness.WaitFor(t, time.Minute, "one standby promoted, the dead voter removed", func() (bool, error) {
		vs, ls := voters(t, cli)
		return len(vs) == 3 && len(ls) == 1 && !contains(vs, dead.Name), fmt.Errorf("voters %v, learners %v", vs, ls)
	})
	// Until both standbys see every voter live, either could still act.
	for _, s := range []*replica{s1, s2} {
		harness.WaitFor(t, 30*time.Second, s.Name+" sees every voter live", func() (bool, error) {
			return len(logLines(t, s.Proc, "every voter is live")) > 0, nil
		})
	}
	promotions := len(logLines(t, s1.Proc, "promoted to voter")) + len(logLines(t, s2.Proc, "promoted to voter"))
	removals := len(logLines(t, s1.Proc, "removed the dead voter it replaced")) + len(logLines(t, s2.Proc, "removed the dead voter it replaced"))
	if promotions != 1 || removals != 1 {
		t.Fatalf("%d promotions and %d removals, want exactly one of each", promotions, removals)
	}
	if vs, ls := voters(t, cli); len(vs) != 3 || len(ls) != 1 {
		t.Fatalf("afterwards: voters %v, learners %v", vs, ls)
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func TestReplicaLeaveAndRemoveOnExit(t *testing.T) {
	timed(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	cli := c.Client(t)
	r1 := startReplica(t, bins, c, "r1", replicaOpts{Extra: []string{"--remove-on-exit"}})
	r2 := startReplica(t, bins, c, "r2", replicaOpts{})
	if _, ls := voters(t, cli); len(ls) != 2 {
		t.Fatalf("learners %v, want r1 and r2", ls)
	}
	// A clean stop of a --remove-on-exit replica takes its entry and the
	// data etcd wrote, and leaves a file of the operator's beside it.
	if _, err := os.Stat(filepath.Join(r1.DataDir, "member", "wal")); err != nil {
		t.Fatalf("r1's WAL before the stop: %v", err)
	}
	notes := filepath.Join(r1.DataDir, "operator-notes.txt")
	if err := os.WriteFile(notes, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	r1.Stop()
	if _, ls := voters(t, cli); contains(ls, "r1") {
		t.Fatalf("learners %v: r1 stopped with --remove-on-exit and is still a member", ls)
	}
	if _, err := os.Stat(filepath.Join(r1.DataDir, "member")); !os.IsNotExist(err) {
		t.Fatalf("r1's member data: %v, want it gone", err)
	}
	if b, err := os.ReadFile(notes); err != nil || string(b) != "mine" {
		t.Fatalf("the operator's file in r1's data dir: %q, %v; want it kept", b, err)
	}
	// replica leave removes a replica by name; it then stops.
	out, err := exec.Command(bins.Replica, "leave", "r2", "--endpoints", strings.Join(c.Endpoints(), ",")).CombinedOutput()
	if err != nil {
		t.Fatalf("replica leave r2: %v\n%s", err, out)
	}
	if vs, ls := voters(t, cli); len(ls) != 0 || len(vs) != 3 {
		t.Fatalf("after leave: voters %v, learners %v", vs, ls)
	}
	harness.WaitFor(t, 30*time.Second, "r2 stopped after being removed", func() (bool, error) { return r2.Exited(), nil })
	// Voters are not for leave.
	out, err = exec.Command(bins.Replica, "leave", c.Members[0].Name, "--endpoints", strings.Join(c.Endpoints(), ",")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "is a voter") {
		t.Fatalf("replica leave of a voter: %v\n%s", err, out)
	}
}
