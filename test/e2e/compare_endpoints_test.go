package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/compare"
	"github.com/understudy-kv/understudy/test/harness"
)

// TestCompareExistingEndpoints: `replica compare` pointed at clusters it
// did not start (3 voters and a replica; a mirror into a second cluster)
// writes only under its --prefix, measures every path, and deletes the
// prefix when done; a --prefix that already holds keys is refused before
// anything is written, and those keys are left as they were.
func TestCompareExistingEndpoints(t *testing.T) {
	bins := harness.Binaries(t)
	harness.Must(t, bins.RequireReplica())
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	rep := harness.StartReplica(t, c, harness.ReplicaConfig{Name: "replica"})
	casc := harness.StartReplica(t, c, harness.ReplicaConfig{Name: "cascaded", Upstream: []string{rep.ClientURL}})
	dst := harness.StartCluster(t, harness.ClusterConfig{N: 1, Token: "dest"})
	harness.Start(t, harness.ProcConfig{Name: "mirror", Bin: bins.Replica, Args: []string{
		"mirror", "--source-endpoints", strings.Join(c.Endpoints(), ","), "--dest-endpoints", dst.Endpoints()[0],
		"--prefix", "/cmp/", "--name", "cmp", "--log-level", "warn"}})
	src, dcli := c.Client(t), dst.Client(t)
	ctx := context.Background()
	for _, kv := range [][2]string{{"/keep/x", "theirs"}, {"/busy/k", "in use"}} {
		if _, err := src.Put(ctx, kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := dcli.Put(ctx, "/keep/y", "theirs too"); err != nil {
		t.Fatal(err)
	}
	run := func(prefix string, extra ...string) (int, string) {
		t.Helper()
		args := append([]string{"compare", "--primary", strings.Join(c.Endpoints(), ","), "--replica", rep.ClientURL,
			"--cascaded", casc.ClientURL, "--mirror-dest", dst.Endpoints()[0], "--prefix", prefix}, extra...)
		p := harness.Start(t, harness.ProcConfig{Name: "compare" + strings.ReplaceAll(prefix, "/", "-"), Bin: bins.Replica, Args: args})
		wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		code, err := p.Wait(wctx)
		if err != nil {
			t.Fatal(err)
		}
		return code, p.Log()
	}

	// A prefix that holds someone's keys: refused, nothing written.
	revBefore := head(t, src)
	if code, out := run("/busy/", "--duration", "5s"); code == 0 || !strings.Contains(out, "/busy/") || !strings.Contains(out, "prefix already holds keys") {
		t.Fatalf("compare into a prefix in use: exit %d, want an error naming the prefix:\n%s", code, out)
	}
	if rev := head(t, src); rev != revBefore {
		t.Fatalf("the refused compare wrote: source revision %d, was %d", rev, revBefore)
	}

	out := t.TempDir()
	code, log := run("/cmp/", "--duration", "8s", "--out", out)
	if code != 0 {
		t.Fatalf("compare against existing endpoints: exit %d:\n%s", code, log)
	}
	r := readReport(t, out, log)
	for _, pr := range r.Paths {
		if pr.Run.Reads == 0 {
			t.Errorf("%s: no reads", pr.Path)
		}
	}
	for _, p := range []compare.Path{compare.PathLeader, compare.PathReplicaStrong, compare.PathCascadedStrong} {
		if pr := pathReport(t, &r, p); pr.Linearizable != compare.VerdictOK {
			t.Errorf("%s: porcupine says %s, want linearizable", p, pr.Linearizable)
		}
	}

	// Afterwards: the prefix is gone from the source and, through the
	// mirror, from the destination; what others own is as it was.
	if n := countPrefix(t, src, "/cmp/"); n != 0 {
		t.Fatalf("%d keys left under /cmp/ on the source", n)
	}
	harness.WaitFor(t, 30*time.Second, "the mirror's copy of /cmp/ deleted", func() (bool, error) {
		return countPrefix(t, dcli, "/cmp/") == 0, nil
	})
	for _, kv := range []struct {
		cli  *clientv3.Client
		k, v string
	}{{src, "/keep/x", "theirs"}, {src, "/busy/k", "in use"}, {dcli, "/keep/y", "theirs too"}} {
		resp, err := kv.cli.Get(ctx, kv.k)
		if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != kv.v {
			t.Fatalf("%s after compare: %v %v, want %q", kv.k, resp, err, kv.v)
		}
	}
}

// head is the revision cli's cluster is at.
func head(t *testing.T, cli *clientv3.Client) int64 {
	t.Helper()
	resp, err := cli.Get(context.Background(), "\x00", clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// countPrefix is how many keys cli's cluster holds under prefix.
func countPrefix(t *testing.T, cli *clientv3.Client, prefix string) int64 {
	t.Helper()
	resp, err := cli.Get(context.Background(), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}

// readReport reads the report `replica compare --out out` wrote (log is
// its output, for the failure), with every path in it.
func readReport(t *testing.T, out, log string) compare.Report {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatalf("no report: %v\n%s", err, log)
	}
	var r compare.Report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("report.json: %v", err)
	}
	if len(r.Paths) != len(compare.Paths) {
		t.Fatalf("%d paths in the report, want %d:\n%s", len(r.Paths), len(compare.Paths), b)
	}
	return r
}
