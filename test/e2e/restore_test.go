package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"

	"github.com/understudy-kv/understudy/test/harness"
)

// The voters restored from a snapshot (etcdctl snapshot save, then etcd's
// own restore on every member with a new cluster token: a new cluster ID)
// are another cluster to a replica whose data dir holds a member of the
// old one. It refuses to start, naming both clusters and the flag; with
// --replace-stale-data-dir it moves the old member aside (nothing deleted)
// and joins the restored cluster as a new learner, with the snapshot's
// data.
func TestReplicaRejoinsVotersRestoredFromASnapshot(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{Kinds: []harness.Kind{harness.KindEtcd, harness.KindEtcd, harness.KindEtcd}})
	r := startReplica(t, bins, c, "r1", replicaOpts{})
	voters := client(t, c.Endpoints()...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for i := range 20 {
		if _, err := voters.Put(ctx, fmt.Sprintf("backup/%02d", i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	before, err := voters.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	oldCluster := before.Header.ClusterId
	snap := filepath.Join(t.TempDir(), "backup.db")
	saveSnapshot(ctx, t, voters, snap)
	if _, err := voters.Put(ctx, "after-the-backup", "lost by the restore"); err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, time.Minute, "the replica holds the write after the backup", func() (bool, error) {
		resp, err := client(t, r.ClientURL).Get(ctx, "after-the-backup", clientv3.WithSerializable())
		return err == nil && len(resp.Kvs) == 1, err
	})

	// The restore: every voter stopped, its data dir replaced by etcd's
	// restore of the snapshot under a new token, and started again.
	r.Stop()
	for _, m := range c.Members {
		m.Proc.Stop()
	}
	var initial []string
	for _, m := range c.Members {
		initial = append(initial, m.Name+"="+m.AdvertisePeerURL)
	}
	for _, m := range c.Members {
		if err := os.RemoveAll(m.DataDir); err != nil {
			t.Fatal(err)
		}
		err := snapshot.NewV3(zap.NewNop()).Restore(snapshot.RestoreConfig{SnapshotPath: snap, Name: m.Name,
			OutputDataDir: m.DataDir, PeerURLs: []string{m.AdvertisePeerURL}, InitialCluster: strings.Join(initial, ","),
			InitialClusterToken: "restored-" + t.Name()})
		if err != nil {
			t.Fatalf("etcd's restore of %s: %v", m.Name, err)
		}
	}
	for _, m := range c.Members {
		m.Proc.Restart(t)
	}
	// (The harness's member IDs are the old cluster's: wait on a write.)
	voters = client(t, c.Endpoints()...)
	harness.WaitFor(t, time.Minute, "the restored cluster takes a write", func() (bool, error) {
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		defer pcancel()
		_, err := voters.Put(pctx, "restored", "yes")
		return err == nil, err
	})

	// Started as before: refused, with what to do.
	r.Restart(t)
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	if code, err := r.Wait(wctx); err != nil || code == 0 {
		t.Fatalf("the replica started on the old cluster's data dir: exit %d, %v; want a refusal", code, err)
	}
	if log := r.Log(); !strings.Contains(log, "--replace-stale-data-dir") || !strings.Contains(log, "holds member") {
		t.Fatalf("the refusal does not name the data dir's member and --replace-stale-data-dir:\n%s", tailLines(log, 30))
	}
	if resp, err := voters.MemberList(ctx); err != nil || len(resp.Members) != 3 {
		t.Fatalf("after the refusal the restored cluster lists %v (%v), want its 3 voters alone", resp, err)
	}

	// The flag names the cluster to rejoin: given the old one (a --join
	// that is not the cluster the operator meant), nothing moves.
	list, err := voters.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	restored := fmt.Sprintf("%x", list.Header.ClusterId)
	if !strings.Contains(r.Log(), "--replace-stale-data-dir="+restored) {
		t.Fatalf("the refusal does not give --replace-stale-data-dir=%s:\n%s", restored, tailLines(r.Log(), 30))
	}
	args := r.Args()
	r.RestartWithArgs(t, append(args, "--replace-stale-data-dir="+fmt.Sprintf("%x", oldCluster)))
	if code, err := r.Wait(wctx); err != nil || code == 0 {
		t.Fatalf("--replace-stale-data-dir naming the old cluster %x: exit %d, %v; want a refusal", oldCluster, code, err)
	}
	if stale, _ := filepath.Glob(filepath.Join(r.DataDir, "member.stale-*")); len(stale) != 0 || !strings.Contains(r.Log(), "nothing moved") {
		t.Fatalf("--replace-stale-data-dir naming another cluster moved %v, or did not say nothing moved", stale)
	}

	// With the restored cluster's ID: the old member moved aside, a new
	// learner, the snapshot's data and not what came after it.
	r.RestartWithArgs(t, append(args, "--replace-stale-data-dir="+restored))
	r.WaitServing(t, 2*time.Minute)
	stale, _ := filepath.Glob(filepath.Join(r.DataDir, "member.stale-*", "wal", "*.wal"))
	if len(stale) == 0 {
		t.Fatalf("no member.stale-*/wal in %s: the old member was not kept", r.DataDir)
	}
	rc := client(t, r.ClientURL)
	got, err := rc.Get(ctx, "backup/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || got.Count != 20 {
		t.Fatalf("strong read of the backup through the rejoined replica: %v (%v), want 20 keys", got, err)
	}
	if after, err := rc.Get(ctx, "after-the-backup"); err != nil || len(after.Kvs) != 0 {
		t.Fatalf("the rejoined replica serves %v (%v): a key the restore dropped", after, err)
	}
	list, err = voters.MemberList(ctx)
	if err != nil || len(list.Members) != 4 {
		t.Fatalf("restored cluster's members %v (%v), want 3 voters and the new learner", list, err)
	}
}

// saveSnapshot writes a member's snapshot to path, as etcdctl snapshot save.
func saveSnapshot(ctx context.Context, t *testing.T, cli *clientv3.Client, path string) {
	t.Helper()
	rc, err := cli.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, rc); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
