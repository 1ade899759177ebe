package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/understudy-kv/understudy/test/harness"
)

// A write through a replica is visible to a serializable read on the same
// replica right after it is acknowledged: every time.
func TestReplicaReadYourWrites(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	r := startReplica(t, bins, c, "r1", replicaOpts{})
	rep := client(t, r.ClientURL)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	seen := 0
	for i := range 1000 {
		key, val := fmt.Sprintf("ryw/%d", i%10), fmt.Sprintf("v%d", i)
		if _, err := rep.Put(ctx, key, val); err != nil {
			t.Fatalf("put %d through the replica: %v", i, err)
		}
		resp, err := rep.Get(ctx, key, clientv3.WithSerializable())
		if err != nil {
			t.Fatalf("serializable get %d: %v", i, err)
		}
		if len(resp.Kvs) == 1 && string(resp.Kvs[0].Value) == val {
			seen++
		}
	}
	if seen != 1000 {
		t.Fatalf("read-your-writes held for %d of 1000 writes", seen)
	}
}

// A watch on the replica gets every event of 10,000 writes made through the
// voters, in revision order, none lost or duplicated.
func TestReplicaWatchSeesEveryEventInOrder(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	r := startReplica(t, bins, c, "r1", replicaOpts{})
	voters := client(t, c.Endpoints()...)
	rep := client(t, r.ClientURL)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start, err := voters.Get(ctx, "watch/")
	if err != nil {
		t.Fatal(err)
	}
	wch := rep.Watch(ctx, "watch/", clientv3.WithPrefix(), clientv3.WithRev(start.Header.Revision+1))

	const writers, perWriter = 8, 1250
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				if _, err := voters.Put(ctx, fmt.Sprintf("watch/%d/%d", w, i), "x"); err != nil {
					errs <- err
					return
				}
			}
		}()
	}

	seen := map[string]bool{}
	lastRev := start.Header.Revision
	for len(seen) < writers*perWriter {
		select {
		case resp, ok := <-wch:
			if !ok {
				t.Fatalf("watch closed after %d events", len(seen))
			}
			if err := resp.Err(); err != nil {
				t.Fatalf("watch error after %d events: %v", len(seen), err)
			}
			for _, ev := range resp.Events {
				if ev.Kv.ModRevision <= lastRev {
					t.Fatalf("event at revision %d after %d: out of order or repeated", ev.Kv.ModRevision, lastRev)
				}
				lastRev = ev.Kv.ModRevision
				k := string(ev.Kv.Key)
				if seen[k] {
					t.Fatalf("event for %s delivered twice", k)
				}
				seen[k] = true
			}
		case err := <-errs:
			t.Fatalf("writer: %v", err)
		case <-ctx.Done():
			t.Fatalf("watch delivered %d of %d events", len(seen), writers*perWriter)
		}
	}
	wg.Wait()
	for w := range writers {
		for i := range perWriter {
			if k := fmt.Sprintf("watch/%d/%d", w, i); !seen[k] {
				t.Fatalf("no event for %s", k)
			}
		}
	}
}

// kill -9 and restart on the same data dir: the same member, no new entry.
func TestReplicaRestartIsTheSameMember(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	r := startReplica(t, bins, c, "r1", replicaOpts{})
	voters := client(t, c.Endpoints()...)
	before, learner := memberID(t, voters, r.ClientURL)
	if !learner {
		t.Fatal("the replica does not report itself a learner")
	}
	if _, err := voters.Put(context.Background(), "before-kill", "1"); err != nil {
		t.Fatal(err)
	}

	r.Kill()
	// Writes go on while it is down; it must catch up on them.
	if _, err := voters.Put(context.Background(), "while-down", "2"); err != nil {
		t.Fatal(err)
	}
	r.Restart(t)
	r.WaitServing(t, 90*time.Second)

	after, _ := memberID(t, voters, r.ClientURL)
	if after != before {
		t.Fatalf("member ID %x after restart, was %x", after, before)
	}
	list, err := voters.MemberList(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Members) != 4 {
		t.Fatalf("%d members after the restart, want 3 voters and the one replica", len(list.Members))
	}
	rep := client(t, r.ClientURL)
	resp, err := rep.Get(context.Background(), "while-down")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("strong read of a write made while the replica was down: %v %v", resp, err)
	}
}

// A replica whose advertised peer URL does not lead to it takes its learner
// entry out again and exits with a clear error; the voters never stop
// taking writes.
func TestReplicaMisconfiguredPeerURLIsUndone(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	voters := client(t, c.Endpoints()...)

	stop := make(chan struct{})
	var writes, failures atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err := voters.Put(ctx, "steady", fmt.Sprint(i))
			cancel()
			writes.Add(1)
			if err != nil {
				failures.Add(1)
			}
		}
	}()

	nowhere := harness.URL(harness.FreePort(t)) // nothing listens there
	r := startReplica(t, bins, c, "bad", replicaOpts{AdvertisePeerURL: nowhere, NoWait: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	code, err := r.Wait(ctx)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("misconfigured replica did not exit: %v", err)
	}
	if code == 0 {
		t.Fatal("misconfigured replica exited 0")
	}
	log := r.Log()
	for _, want := range []string{"--initial-advertise-peer-urls", nowhere, "removed again, the voters are unchanged"} {
		if !strings.Contains(log, want) {
			t.Errorf("the error does not say %q:\n%s", want, harnessTail(log))
		}
	}
	list, err := voters.MemberList(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Members) != 3 {
		t.Fatalf("member list has %d members after the failed join, want the 3 voters", len(list.Members))
	}
	for _, m := range list.Members {
		if m.IsLearner {
			t.Fatalf("learner %x left behind", m.ID)
		}
	}
	if writes.Load() == 0 || failures.Load() != 0 {
		t.Fatalf("%d of %d writes to the voters failed during the failed join", failures.Load(), writes.Load())
	}
}

// When the learner limit is reached the replica says so and names the flag.
func TestReplicaLearnerLimitNamesMaxLearners(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3, ExtraArgs: []string{"--max-learners", "1"}})
	startReplica(t, bins, c, "r1", replicaOpts{})
	r2 := startReplica(t, bins, c, "r2", replicaOpts{NoWait: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code, err := r2.Wait(ctx)
	if err != nil || code == 0 {
		t.Fatalf("second replica over a limit of 1: exit %d, %v", code, err)
	}
	if log := r2.Log(); !strings.Contains(log, "learner limit is reached") || !strings.Contains(log, "--max-learners on every voter") {
		t.Fatalf("the error does not explain the limit:\n%s", harnessTail(log))
	}
}

// With auth on, a read-only user reads through the replica and is denied on
// a forbidden key and on writes, exactly as on a voter.
func TestReplicaEnforcesAuth(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	r := startReplica(t, bins, c, "r1", replicaOpts{})
	v := c.Endpoints()[:1]
	for _, args := range authSetup {
		harness.MustEtcdctl(t, bins, v, args...)
	}
	for _, eps := range [][]string{v, {r.ClientURL}} {
		as := func(args ...string) (string, error) {
			return harness.Etcdctl(t, bins, eps, append([]string{"--user", "alice:alicepw"}, args...)...)
		}
		if out, err := as("get", "pub/a", "--print-value-only"); err != nil || out != "1\n" {
			t.Errorf("%v: alice's permitted read: %q %v", eps, out, err)
		}
		if out, err := as("get", "pub/a", "--print-value-only", "--consistency=s"); err != nil || out != "1\n" {
			t.Errorf("%v: alice's permitted serializable read: %q %v", eps, out, err)
		}
		for _, args := range [][]string{{"get", "secret/a"}, {"get", "secret/a", "--consistency=s"}, {"put", "pub/a", "x"}, {"del", "pub/a"}} {
			if _, err := as(args...); err == nil || !strings.Contains(err.Error(), "permission denied") {
				t.Errorf("%v: alice's %v: %v, want permission denied", eps, args, err)
			}
		}
		if _, err := harness.Etcdctl(t, bins, eps, "get", "pub/a"); err == nil {
			t.Errorf("%v: anonymous read allowed with auth on", eps)
		}
	}
}

// A bounded read never returns data older than its bound: while the replica
// cannot reach the leader it refuses bounded reads instead (it waits, then
// errors at the deadline), keeps serving weak ones, and serves bounded ones
// again once the leader answers.
//
// The replica is cut off by freezing every voter (SIGSTOP): connections stay
// open and nothing answers, as on a blackholed link. A TCP proxy on the
// replica's peer URL cannot cut it reliably: rafthttp sends the learner's
// messages over the leader-dialed stream when one is attached, and otherwise
// POSTs them straight to the leader's own URL.
func TestReplicaBoundedReadWhenCutOff(t *testing.T) {
	timed(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	metricsURL := harness.URL(harness.FreePort(t))
	r := startReplica(t, bins, c, "r1", replicaOpts{Extra: []string{"--listen-metrics-urls", metricsURL}})
	rep := client(t, r.ClientURL)
	defer func() {
		if t.Failed() {
			t.Logf("replica metrics:\n%s", scrape(metricsURL, "understudy_"))
		}
	}()

	bounded := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
		defer cancel()
		ctx = metadata.AppendToOutgoingContext(ctx, "understudy-max-staleness", "100ms")
		_, err := rep.Get(ctx, "bounded", clientv3.WithSerializable())
		return err
	}
	harness.WaitFor(t, 10*time.Second, "a bounded read succeeds on a healthy replica", func() (bool, error) {
		err := bounded()
		return err == nil, err
	})

	freeze(t, c, syscall.SIGSTOP)
	thawed := false
	defer func() {
		if !thawed {
			freeze(t, c, syscall.SIGCONT)
		}
	}()
	cut := time.Now()
	served, refused := 0, 0
	for time.Since(cut) < 2*time.Second {
		started := time.Now()
		err := bounded()
		if started.Sub(cut) < 150*time.Millisecond {
			continue // the last round before the cut may still cover it
		}
		switch {
		case err == nil:
			served++
		case isUnavailableOrDeadline(err):
			refused++
		default:
			t.Fatalf("bounded read failed with an unexpected error: %v", err)
		}
	}
	if served != 0 || refused == 0 {
		t.Fatalf("with the replica cut off from the leader, %d bounded reads were served and %d refused; want none served", served, refused)
	}
	// A weak read needs no leader: still served.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := rep.Get(ctx, "bounded", clientv3.WithSerializable()); err != nil {
		t.Fatalf("weak read while cut off: %v", err)
	}

	freeze(t, c, syscall.SIGCONT)
	thawed = true
	harness.WaitFor(t, 30*time.Second, "bounded reads are served again once the leader answers", func() (bool, error) {
		err := bounded()
		return err == nil, err
	})
}

// TestReplicaEndsRequireLeaderWatchesWhenCutOff: a client that asks for a
// leader (clientv3.WithRequireLeader, as Kubernetes' watches do) learns
// that the replica has lost it, and can go elsewhere, as on an etcd member.
// A learner's raft never forgets its last leader; the replica goes by when
// it last heard from it.
func TestReplicaEndsRequireLeaderWatchesWhenCutOff(t *testing.T) {
	timed(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	r := startReplica(t, bins, c, "r1", replicaOpts{})
	rep := client(t, r.ClientURL)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	guarded := rep.Watch(clientv3.WithRequireLeader(ctx), "w", clientv3.WithCreatedNotify())
	select {
	case resp := <-guarded:
		if !resp.Created {
			t.Fatalf("first watch response %+v (err %v), want created", resp, resp.Err())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("watch not created within 30s")
	}

	freeze(t, c, syscall.SIGSTOP)
	defer freeze(t, c, syscall.SIGCONT)
	select {
	case resp, ok := <-guarded:
		if ok && !errors.Is(resp.Err(), rpctypes.ErrNoLeader) {
			t.Fatalf("require-leader watch while cut off: %+v (err %v), want it ended with %v", resp, resp.Err(), rpctypes.ErrNoLeader)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a require-leader watch stayed open 30s with the replica cut off from every voter")
	}
	rctx, rcancel := context.WithTimeout(clientv3.WithRequireLeader(context.Background()), 5*time.Second)
	defer rcancel()
	if _, err := rep.Get(rctx, "w", clientv3.WithSerializable()); !errors.Is(err, rpctypes.ErrNoLeader) {
		t.Fatalf("require-leader read while cut off: %v, want %v", err, rpctypes.ErrNoLeader)
	}
	// Without WithRequireLeader, a weak read is still served.
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	if _, err := rep.Get(wctx, "w", clientv3.WithSerializable()); err != nil {
		t.Fatalf("weak read while cut off: %v", err)
	}
}

// freeze sends sig (SIGSTOP or SIGCONT) to every voter, by PID.
func freeze(t *testing.T, c *harness.Cluster, sig syscall.Signal) {
	t.Helper()
	for _, m := range c.Members {
		if err := syscall.Kill(m.Proc.PID(), sig); err != nil {
			t.Fatalf("signal %v to %s: %v", sig, m.Name, err)
		}
	}
}

// scrape returns the series of url/metrics whose names start with prefix,
// one a line, or why it could not scrape them (for a failed test's log).
func scrape(url, prefix string) string {
	m, err := harness.Scrape(context.Background(), url+"/metrics", nil)
	if err != nil {
		return err.Error()
	}
	return m.Format(prefix)
}

func isUnavailableOrDeadline(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	s, ok := status.FromError(err)
	return ok && (s.Code() == codes.Unavailable || s.Code() == codes.DeadlineExceeded)
}

func harnessTail(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}
