package e2e

import (
	"context"
	"errors"
	"fmt"
	"strconv"
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
// as under the voters. Without the settings, the standby would never
// compact.
func TestAPromotedStandbyLeadsWithTheVotersCompaction(t *testing.T) {
	const retention = 5 * time.Second
	compaction := []string{"--auto-compaction-mode", "periodic", "--auto-compaction-retention", retention.String()}
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3, ExtraArgs: compaction})
	s := startReplica(t, bins, c, "standby", replicaOpts{Extra: append(append([]string{}, standbyArgs...), compaction...)})
	waitRoleState(t, s, "idle", "live")
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
	w := startWriter(client(t, leader.ClientURL, other.ClientURL))
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
	t.Logf("revision %d compacted %v after it was written, under the promoted standby's lead", mark, time.Since(took).Round(time.Millisecond))
}
