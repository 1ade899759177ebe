package e2e

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/test/harness"
)

// TestAPromotedStandbyLeadsWithTheVotersCompaction: the voters compact
// every 5s (--auto-compaction-mode periodic); a standby given the same
// settings replaces a killed follower and is then made leader. etcd
// compacts only on the leader: a revision written when it took over is
// compacted within two retention periods (and etcd's recording interval),
// as under the voters.
func TestAPromotedStandbyLeadsWithTheVotersCompaction(t *testing.T) {
	timed(t)
	promotedStandbyCompacts(t, true)
}

// TestAPromotedStandbyWithoutCompactionFlagsLeadsWithTheVotersCompaction:
// the same, the standby given no compaction flags: it learns the voters'
// policy from the compactions it applies (replica status and its metric
// say so before the failover) and, once it leads, runs etcd's compactor
// with it. Before it learned (issue 56), it never compacted.
func TestAPromotedStandbyWithoutCompactionFlagsLeadsWithTheVotersCompaction(t *testing.T) {
	timed(t)
	promotedStandbyCompacts(t, false)
}

func promotedStandbyCompacts(t *testing.T, flags bool) {
	const retention = 5 * time.Second
	compaction := []string{"--auto-compaction-mode", "periodic", "--auto-compaction-retention", retention.String()}
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3, ExtraArgs: compaction})
	args := append([]string{}, standbyArgs...)
	want := "learned periodic 5s"
	if flags {
		args, want = append(args, compaction...), "flags periodic 5s"
	} else {
		// The voters compact only what writes made: writes all along.
		stop := background(client(t, c.Endpoints()...))
		defer stop()
	}
	s := startReplica(t, bins, c, "standby", replicaOpts{Extra: args})
	waitRoleState(t, s, "idle", "live")
	source := map[bool]string{true: "flags", false: "learned"}[flags]
	harness.WaitFor(t, time.Minute, "the standby's compaction policy "+want, func() (bool, error) {
		m := harness.MustScrape(t, s.ClientURL+"/metrics")
		v, err := m.Value("understudy_replica_compaction_policy", "source="+source, "mode=periodic", "retention=5s")
		return v == 1, fmt.Errorf("%v; %s", err, m.Format("understudy_replica_compaction"))
	})
	if got := statusCompaction(t, bins, c.Endpoints(), "standby"); !strings.HasPrefix(got, want) {
		t.Fatalf("replica status: the standby's compaction %q, want %q…", got, want)
	}
	leader := c.Leader(t)
	dead, other := following(c, leader)[0], following(c, leader)[1]
	cli := client(t, leader.ClientURL, other.ClientURL)
	dead.Proc.Kill()
	waitReplaced(t, cli, dead, time.Now())

	standbyID, _ := memberID(t, cli, s.ClientURL)
	harness.MustEtcdctl(t, bins, []string{leader.ClientURL}, "move-leader", strconv.FormatUint(standbyID, 16))
	harness.WaitFor(t, 30*time.Second, "the standby the leader", func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		st, err := cli.Status(ctx, other.ClientURL)
		if err != nil {
			return false, err
		}
		return st.Leader == standbyID, fmt.Errorf("leader %x", st.Leader)
	})
	w := startWriter(t, client(t, leader.ClientURL, other.ClientURL))
	defer w.finish(t)
	ctx := context.Background()
	put, err := cli.Put(ctx, "compaction-mark", "x")
	if err != nil {
		t.Fatal(err)
	}
	mark, took := put.Header.Revision, time.Now()
	// etcd's periodic compactor compacts, every retention, the revision it
	// recorded retention ago (it records one every retention/10): a
	// revision written just after a compaction goes at the second one, up
	// to 2 × retention + retention/10 later.
	harness.WaitFor(t, 2*retention+retention/10+time.Second, fmt.Sprintf("revision %d, written once the standby led, compacted", mark), func() (bool, error) {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := cli.Get(rctx, "compaction-mark", clientv3.WithRev(mark))
		if errors.Is(err, rpctypes.ErrCompacted) {
			return true, nil
		}
		return false, fmt.Errorf("a read at revision %d: %v", mark, err)
	})
	// Compacted under the standby's lead, not another voter's: it still
	// leads (etcd compacts only on the leader).
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := cli.Status(sctx, other.ClientURL)
	if err != nil {
		t.Fatal(err)
	}
	if st.Leader != standbyID {
		t.Fatalf("when the compaction was seen the leader was %x, not the standby %x: another voter may have compacted", st.Leader, standbyID)
	}
	// Its own compactor runs, as leader, only where it learned the
	// policy; given the flags, etcd's runs them.
	running := harness.MustScrape(t, s.ClientURL+"/metrics").Sum("understudy_replica_compactor_running")
	if want := map[bool]float64{true: 0, false: 1}[flags]; running != want {
		t.Errorf("understudy_replica_compactor_running %v on the leading standby, want %v", running, want)
	}
	t.Logf("revision %d compacted %v after it was written, under the promoted standby's lead", mark, time.Since(took).Round(time.Millisecond))
}

// background writes through cli every 20ms, errors and all, until stop.
func background(cli *clientv3.Client) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
			_, _ = cli.Put(pctx, "background/"+strconv.Itoa(i%100), strconv.Itoa(i))
			pcancel()
		}
	}()
	return func() { cancel(); <-done }
}

// statusCompaction is the compaction `replica status -w json` shows for
// the member named name.
func statusCompaction(t *testing.T, bins *harness.Bins, endpoints []string, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bins.Replica, "status", "-w", "json", "--endpoints", strings.Join(endpoints, ",")).Output()
	if err != nil {
		t.Fatalf("replica status: %v", err)
	}
	for _, r := range parseStatus(t, out) {
		if r.Name == name {
			return r.Compaction
		}
	}
	t.Fatalf("replica status shows no %s:\n%s", name, out)
	return ""
}
