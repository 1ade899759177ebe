package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/understudy-kv/understudy/learner"
	"github.com/understudy-kv/understudy/test/harness"
)

// exitsWithin waits up to d for r to exit and returns its log; it fails
// the test if r is still running or exited 0.
func exitsWithin(t *testing.T, r *replica, d time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	code, err := r.Wait(ctx)
	if err != nil {
		r.Kill()
		t.Fatalf("replica %s did not exit within %v:\n%s", r.Name, d, harnessTail(r.Log()))
	}
	if code == 0 {
		t.Fatalf("replica %s exited 0:\n%s", r.Name, harnessTail(r.Log()))
	}
	log := r.Log()
	for _, l := range strings.Split(log, "\n") {
		if strings.HasPrefix(l, "replica: ") {
			t.Logf("%s exited %d: %s", r.Name, code, l)
		}
	}
	return log
}

func mustContain(t *testing.T, log string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(log, w) {
			t.Errorf("the log does not say %q:\n%s", w, harnessTail(log))
		}
	}
}

func members(t *testing.T, c *harness.Cluster) (clusterID uint64, ms []*etcdserverpb.Member) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := client(t, c.Endpoints()...).MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.ClusterId, resp.Members
}

// A replica started on a copy of another cluster's replica data dir
// refuses before it serves, naming both clusters and the data dir, while
// the cluster it came from is still up; the cluster it was pointed at is
// left as it was.
func TestReplicaRefusesAForeignDataDir(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	a := harness.StartCluster(t, harness.ClusterConfig{N: 1})
	b := harness.StartCluster(t, harness.ClusterConfig{N: 1})
	ra := startReplica(t, bins, a, "r1", replicaOpts{})
	ra.Stop()
	aID, _ := members(t, a)
	bID, bBefore := members(t, b)

	foreign := filepath.Join(t.TempDir(), "copy")
	if out, err := exec.Command("cp", "-a", ra.DataDir, foreign).CombinedOutput(); err != nil {
		t.Fatalf("copy data dir: %v\n%s", err, out)
	}
	r := startReplica(t, bins, b, "r1", replicaOpts{NoWait: true, Extra: []string{"--data-dir", foreign}})
	log := exitsWithin(t, r, 30*time.Second)
	mustContain(t, log, fmt.Sprintf("cluster %x", aID), fmt.Sprintf("cluster %x", bID), foreign, "--data-dir")
	if strings.Contains(log, `"msg":"replica serving"`) {
		t.Fatalf("the replica served on a foreign data dir:\n%s", harnessTail(log))
	}
	if _, after := members(t, b); len(after) != len(bBefore) {
		t.Fatalf("cluster %x has %d members after the refusal, had %d", bID, len(after), len(bBefore))
	}
}

// The state a first start leaves when killed -9 right after the add: an
// entry without a name at the replica's peer URL. Started again, the
// replica takes that entry over (with --max-learners 1 the limit would
// refuse a second add), and no unnamed entry remains.
func TestReplicaCrashAfterAddRestarts(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 1, ExtraArgs: []string{"--max-learners", "1"}})
	peer := harness.URL(harness.FreePort(t))
	stale := addLearner(t, c, peer)

	r := startReplica(t, bins, c, "r1", replicaOpts{AdvertisePeerURL: peer, Extra: []string{"--listen-peer-urls", peer}})
	if id, _ := memberID(t, client(t, c.Endpoints()...), r.ClientURL); id != stale {
		t.Fatalf("the replica is member %x, not the entry %x its crashed first start added", id, stale)
	}
	noUnnamed(t, c, 2)
}

// The same with the WAL already created (killed -9 inside the first start
// of the member, before it ever published its name), and the restart
// advertising other peer URLs: the data dir is dropped, the entry it names
// removed, and the replica joins anew under --max-learners 1.
func TestReplicaCrashAfterWALRestarts(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 1, ExtraArgs: []string{"--max-learners", "1"}})
	clusterID, _ := members(t, c)
	for _, samePeer := range []bool{true, false} {
		t.Run(fmt.Sprintf("same-peer-urls=%v", samePeer), func(t *testing.T) {
			oldPeer := harness.URL(harness.FreePort(t))
			stale := addLearner(t, c, oldPeer)
			dataDir := filepath.Join(t.TempDir(), "r.replica")
			crashedWAL(t, dataDir, stale, clusterID)
			peer := oldPeer
			if !samePeer {
				peer = harness.URL(harness.FreePort(t))
			}
			name := fmt.Sprintf("r-%v", samePeer)
			r := startReplica(t, bins, c, name, replicaOpts{AdvertisePeerURL: peer, NoWait: !samePeer,
				Extra: []string{"--listen-peer-urls", peer, "--data-dir", dataDir}})
			leave := name
			if samePeer {
				r.WaitServing(t, time.Minute)
				if id, _ := memberID(t, client(t, c.Endpoints()...), r.ClientURL); id != stale {
					t.Fatalf("the replica is member %x; the crashed start's entry was %x", id, stale)
				}
				noUnnamed(t, c, 2)
				r.Kill()
			} else {
				// Other peer URLs: the entry may be another replica's first
				// start; nothing is deleted or removed, and the refusal says
				// what to run.
				log := exitsWithin(t, r, time.Minute)
				mustContain(t, log, fmt.Sprintf("learner %x", stale), "never started", "replica leave --endpoints")
				if !learner.HasData(dataDir) {
					t.Fatalf("the refused replica deleted its data dir %s", dataDir)
				}
				if _, ms := members(t, c); len(ms) != 2 {
					t.Fatalf("%d members after the refusal, want the voter and the entry left as they were", len(ms))
				}
				leave = fmt.Sprintf("%x", stale)
			}
			// Make room for the next case under --max-learners 1.
			out, err := exec.Command(bins.Replica, "leave", "--endpoints", strings.Join(c.Endpoints(), ","), leave).CombinedOutput()
			if err != nil {
				t.Fatalf("replica leave %s: %v\n%s", leave, err, out)
			}
		})
	}
}

// An unnamed entry of another replica that fills the learner limit is
// named in the refusal, with the command that removes it.
func TestReplicaLearnerLimitNamesStaleEntries(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 1, ExtraArgs: []string{"--max-learners", "1"}})
	stale := addLearner(t, c, harness.URL(harness.FreePort(t)))
	r := startReplica(t, bins, c, "r2", replicaOpts{NoWait: true})
	log := exitsWithin(t, r, time.Minute)
	mustContain(t, log, "--max-learners", fmt.Sprintf("%x at", stale), "never started", "replica leave --endpoints")
}

// --join at a server that is not etcd, and at the replica's own client URL,
// fail within seconds naming --join.
func TestReplicaJoinIsChecked(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 1})
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("hello")) }))
	t.Cleanup(web.Close)
	own := harness.URL(harness.FreePort(t))
	for _, tc := range []struct {
		name  string
		extra []string
		want  []string
	}{
		{"web-server", []string{"--join", web.URL}, []string{"--join " + web.URL + ": not an etcd client URL", "give the client URLs"}},
		{"itself", []string{"--listen-client-urls", own, "--join", own}, []string{"--join " + own, "this replica's own client URL"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, before := members(t, c)
			start := time.Now()
			r := startReplica(t, bins, c, "r-"+tc.name, replicaOpts{NoWait: true, Extra: tc.extra})
			log := exitsWithin(t, r, 10*time.Second)
			t.Logf("failed after %v", time.Since(start).Round(time.Millisecond))
			mustContain(t, log, tc.want...)
			if _, after := members(t, c); len(after) != len(before) {
				t.Fatalf("%d members after the refusal, %d before", len(after), len(before))
			}
		})
	}
}

// A replica whose data dir was lost is refused with the command to run;
// run, the replica joins again as a new learner.
func TestReplicaLostDataDirSaysToLeave(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 1})
	r := startReplica(t, bins, c, "r1", replicaOpts{})
	before, _ := memberID(t, client(t, c.Endpoints()...), r.ClientURL)
	r.Kill()
	if err := os.RemoveAll(r.DataDir); err != nil {
		t.Fatal(err)
	}
	r.Restart(t)
	log := exitsWithin(t, r, time.Minute)
	leave := "replica leave --endpoints " + strings.Join(c.Endpoints(), ",") + " r1"
	mustContain(t, log, leave, r.DataDir)

	out, err := exec.Command(bins.Replica, strings.Fields(leave)[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", leave, err, out)
	}
	r.Restart(t)
	r.WaitServing(t, 2*time.Minute)
	if after, _ := memberID(t, client(t, c.Endpoints()...), r.ClientURL); after == before {
		t.Fatalf("the replica is member %x again, want a new entry", after)
	}
	noUnnamed(t, c, 2)
}

// addLearner adds a learner at peer from outside, as a replica's first
// start does just before it is killed, and returns its ID.
func addLearner(t *testing.T, c *harness.Cluster, peer string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := client(t, c.Endpoints()...).MemberAddAsLearner(ctx, []string{peer})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Member.ID
}

// crashedWAL writes the WAL a member's first start creates before anything
// else (etcd's bootstrapNewWAL: the metadata record alone), as a start
// killed right after it leaves it.
func crashedWAL(t *testing.T, dataDir string, id, clusterID uint64) {
	t.Helper()
	md, err := proto.Marshal(&etcdserverpb.Metadata{NodeID: &id, ClusterID: &clusterID})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dataDir, "member"), 0o700); err != nil {
		t.Fatal(err)
	}
	w, err := wal.Create(zap.NewNop(), filepath.Join(dataDir, "member", "wal"), md)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// noUnnamed checks that the member list has n members, every one named.
func noUnnamed(t *testing.T, c *harness.Cluster, n int) {
	t.Helper()
	harness.WaitFor(t, 30*time.Second, "every member named", func() (bool, error) {
		_, ms := members(t, c)
		var names []string
		for _, m := range ms {
			if m.Name == "" {
				return false, fmt.Errorf("member %x has no name", m.ID)
			}
			names = append(names, m.Name)
		}
		if len(ms) != n {
			return false, fmt.Errorf("members %v, want %d", names, n)
		}
		return true, nil
	})
}

// A member restarting does not depend on --join: a promoted replica whose
// only --join voter is down comes back (a voter serves clients only once
// it has published itself, which may need this very member's vote).
func TestPromotedReplicaRestartsWhileItsJoinIsDown(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	cli := client(t, c.Members[1].ClientURL, c.Members[2].ClientURL)
	r := startReplica(t, bins, c, "p1", replicaOpts{Extra: []string{"--join", c.Members[0].ClientURL, "--role", "voter", "--promote-hold", "1s"}})
	harness.WaitFor(t, time.Minute, "the replica promoted: 4 voters", func() (bool, error) {
		vs, _ := voters(t, cli)
		return len(vs) == 4, fmt.Errorf("voters %v", vs)
	})
	r.Kill()
	c.Members[0].Proc.Kill()
	r.Restart(t)
	r.WaitServing(t, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := client(t, r.ClientURL).Put(ctx, "after-restart", "v"); err != nil {
		t.Fatalf("a write through the restarted member, its --join down: %v", err)
	}
	if n := len(logLines(t, r.Proc, "--join does not answer; restarting as the member the data dir holds, unchecked against it")); n != 1 {
		t.Fatalf("the restart logged its unchecked start %d times, want 1", n)
	}
}

// --remove-on-exit never removes a voter: a promoted replica stopped
// cleanly stays a voter with its data dir.
func TestRemoveOnExitKeepsAPromotedMember(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	cli := client(t, c.Endpoints()...)
	r := startReplica(t, bins, c, "p1", replicaOpts{Extra: []string{"--role", "voter", "--promote-hold", "1s", "--remove-on-exit"}})
	harness.WaitFor(t, time.Minute, "the replica promoted: 4 voters", func() (bool, error) {
		vs, _ := voters(t, cli)
		return len(vs) == 4, fmt.Errorf("voters %v", vs)
	})
	r.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if code, err := r.Wait(ctx); err != nil || code != 0 {
		t.Fatalf("clean stop: exit %d, %v", code, err)
	}
	if vs, _ := voters(t, cli); len(vs) != 4 || !contains(vs, "p1") {
		t.Fatalf("voters %v after a clean stop with --remove-on-exit; want p1 kept", vs)
	}
	if !learner.HasData(r.DataDir) {
		t.Fatalf("the promoted member's data dir %s was removed", r.DataDir)
	}
}
