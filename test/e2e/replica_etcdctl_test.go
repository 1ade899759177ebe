package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/understudy-kv/understudy/test/harness"
)

// The real etcdctl pointed only at a replica: every common command succeeds
// and prints what it prints against a voter. Run against primary voters and
// against stock etcd voters, of this release and of the previous minor one,
// and against a cascaded replica (fed by a learner replica).
func TestReplicaServesEtcdctlLikeAVoter(t *testing.T) {
	beside(t)
	for _, kind := range []harness.Kind{harness.KindPrimary, harness.KindEtcd, harness.KindEtcd36} {
		t.Run(kind.String(), func(t *testing.T) {
			bins := harness.Binaries(t)
			c := harness.StartCluster(t, harness.ClusterConfig{N: 3, Kinds: []harness.Kind{kind, kind, kind}})
			r := startReplica(t, bins, c, "r1", replicaOpts{})
			etcdctlLikeAVoter(t, bins, c, r, "r1, "+r.PeerURL+", "+r.ClientURL+", true")
		})
	}
	t.Run("cascaded", func(t *testing.T) {
		bins := harness.Binaries(t)
		c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
		r := startReplica(t, bins, c, "r1", replicaOpts{})
		cr := cascaded(t, c, "c1", []string{r.ClientURL})
		// The member list is the source's: a cascaded replica is none.
		etcdctlLikeAVoter(t, bins, c, cr, "r1, "+r.PeerURL+", "+r.ClientURL+", true")
	})
}

// etcdctlLikeAVoter runs etcdctl's common commands against a voter of c and
// against r, comparing their outputs; member list through r must show
// wantMember, and every voter.
func etcdctlLikeAVoter(t *testing.T, bins *harness.Bins, c *harness.Cluster, r *harness.Replica, wantMember string) {
	t.Helper()
	voter := []string{c.Members[0].ClientURL}
	rep := []string{r.ClientURL}

	// Each command runs against the voter on keys under v/ and
	// against the replica on keys under r/; outputs must match
	// once the prefix and lease IDs are put aside.
	run := func(eps []string, prefix string, args ...string) string {
		var a []string
		for _, s := range args {
			a = append(a, strings.ReplaceAll(s, "P/", prefix))
		}
		return harness.MustEtcdctl(t, bins, eps, a...)
	}
	same := func(args ...string) {
		t.Helper()
		vo := normalize(run(voter, "v/", args...), "v/")
		ro := normalize(run(rep, "r/", args...), "r/")
		if vo != ro {
			t.Errorf("etcdctl %v\n against a voter:\n%s\n against the replica:\n%s", args, vo, ro)
		}
	}
	same("put", "P/a", "1")
	same("put", "P/b", "2")
	same("get", "P/a")
	same("get", "P/", "--prefix", "--consistency=s")
	same("get", "P/", "--prefix", "--keys-only", "--consistency=l")
	same("del", "P/b")
	same("get", "P/b")

	txn := func(eps []string, prefix string) string {
		t.Helper()
		cmd := harness.EtcdctlCmd(t, bins, eps, "txn")
		cmd.Stdin = strings.NewReader(strings.ReplaceAll("value(\"P/a\") = \"1\"\n\nput P/c yes\nget P/a\n\nput P/c no\n\n", "P/", prefix))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("txn: %v\n%s", err, out)
		}
		return normalize(string(out), prefix)
	}
	if vo, ro := txn(voter, "v/"), txn(rep, "r/"); vo != ro || !strings.HasPrefix(vo, "SUCCESS") {
		t.Errorf("txn against voter:\n%s\nagainst replica:\n%s", vo, ro)
	}
	same("get", "P/c", "--print-value-only")

	// Leases: grant, attach, keep alive, inspect, revoke.
	for _, side := range []struct {
		eps    []string
		prefix string
	}{{voter, "v/"}, {rep, "r/"}} {
		out := harness.MustEtcdctl(t, bins, side.eps, "lease", "grant", "60")
		id := leaseID(t, out)
		harness.MustEtcdctl(t, bins, side.eps, "put", side.prefix+"leased", "x", "--lease", id)
		if out := harness.MustEtcdctl(t, bins, side.eps, "lease", "keep-alive", "--once", id); !strings.Contains(out, "keepalived with TTL(60)") {
			t.Errorf("keep-alive --once via %v: %q", side.eps, out)
		}
		if out := harness.MustEtcdctl(t, bins, side.eps, "lease", "timetolive", id, "--keys"); !strings.Contains(out, "attached keys(["+side.prefix+"leased])") {
			t.Errorf("timetolive via %v: %q", side.eps, out)
		}
		if out := harness.MustEtcdctl(t, bins, side.eps, "lease", "revoke", id); !strings.Contains(out, "revoked") {
			t.Errorf("revoke via %v: %q", side.eps, out)
		}
		if out := harness.MustEtcdctl(t, bins, side.eps, "get", side.prefix+"leased"); out != "" {
			t.Errorf("key still there after its lease was revoked via %v: %q", side.eps, out)
		}
	}

	// Watch history from a revision, with a prefix and prev kv,
	// read up to a sentinel written last.
	same("put", "P/zz", "sentinel")
	watchOut := func(eps []string, prefix string) string {
		t.Helper()
		cmd := harness.EtcdctlCmd(t, bins, eps, "watch", "--rev", "1", "--prefix", prefix, "--prev-kv")
		got := readUntil(t, startLines(t, cmd), "sentinel")
		return normalize(strings.Join(got, "\n"), prefix)
	}
	if vo, ro := watchOut(voter, "v/"), watchOut(rep, "r/"); vo != ro || !strings.Contains(ro, "DELETE") {
		t.Errorf("watch --rev 1 --prefix --prev-kv against voter:\n%s\nagainst replica:\n%s", vo, ro)
	}

	list := harness.MustEtcdctl(t, bins, rep, "member", "list")
	if !strings.Contains(list, wantMember) {
		t.Errorf("member list through the replica does not show %q:\n%s", wantMember, list)
	}
	for _, m := range c.Members {
		if !strings.Contains(list, m.Name+", "+m.PeerURL+", "+m.ClientURL+", false") {
			t.Errorf("member list lacks voter %s:\n%s", m.Name, list)
		}
	}
	status := harness.MustEtcdctl(t, bins, rep, "endpoint", "status")
	// endpoint, ID, version, storage version, db size, in use, %,
	// quota, is leader, is learner, …
	if f := strings.Split(status, ", "); len(f) < 10 || f[8] != "false" || f[9] != "true" {
		t.Errorf("endpoint status of the replica should say not leader, learner: %q", status)
	}
	snap := filepath.Join(t.TempDir(), "replica.db")
	harness.MustEtcdctl(t, bins, rep, "snapshot", "save", snap)
	if fi, err := os.Stat(snap); err != nil || fi.Size() == 0 {
		t.Errorf("snapshot save through the replica wrote nothing: %v", err)
	}
	harness.MustEtcdctl(t, bins, rep, "defrag")
	if out := harness.MustEtcdctl(t, bins, rep, "endpoint", "hashkv"); !strings.Contains(out, r.ClientURL) {
		t.Errorf("endpoint hashkv: %q", out)
	}
}

var hexID = regexp.MustCompile(`\b[0-9a-f]{16}\b`)

func normalize(s, prefix string) string {
	return hexID.ReplaceAllString(strings.ReplaceAll(s, prefix, "P/"), "ID")
}

func leaseID(t *testing.T, grantOut string) string {
	t.Helper()
	f := strings.Fields(grantOut) // "lease 694d... granted with TTL(60s)"
	if len(f) < 2 || f[0] != "lease" {
		t.Fatalf("lease grant printed %q", grantOut)
	}
	return f[1]
}
