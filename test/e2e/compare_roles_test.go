package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/understudy-kv/understudy/compare"
	"github.com/understudy-kv/understudy/test/harness"
)

// TestCompareWithItsMinimalRole: on a source cluster with auth on,
// `replica compare` run as a user whose only role reads and writes its
// --prefix measures every path (the leader, a learner replica, a cascaded
// replica, a mirror's destination) and cleans up; as a user that may only
// read the prefix it fails at once, saying so, and writes nothing. The
// first takes its password from UNDERSTUDY_PASSWORD, as an operator keeps
// it out of ps.
func TestCompareWithItsMinimalRole(t *testing.T) {
	bins := harness.Binaries(t)
	harness.Must(t, bins.RequireReplica())
	c := harness.StartCluster(t, harness.ClusterConfig{N: 1})
	rep := harness.StartReplica(t, c, harness.ReplicaConfig{Name: "replica"})
	ep := c.Endpoints()
	for _, args := range [][]string{
		{"user", "add", "root:rootpw"}, {"user", "grant-role", "root", "root"},
		{"role", "add", "compare"}, {"role", "grant-permission", "compare", "readwrite", "/cmp/", "--prefix"},
		{"user", "add", "cmp:cmppw"}, {"user", "grant-role", "cmp", "compare"},
		{"role", "add", "compare-ro"}, {"role", "grant-permission", "compare-ro", "read", "/cmp/", "--prefix"},
		{"user", "add", "short:shortpw"}, {"user", "grant-role", "short", "compare-ro"},
		{"auth", "enable"},
	} {
		harness.MustEtcdctl(t, bins, ep, args...)
	}
	casc := harness.StartReplica(t, c, harness.ReplicaConfig{Name: "cascaded", Upstream: []string{rep.ClientURL}, Extra: []string{"--user", "root:rootpw"}})
	dst := harness.StartCluster(t, harness.ClusterConfig{N: 1, Token: "dest"})
	harness.Start(t, harness.ProcConfig{Name: "mirror", Bin: bins.Replica, Args: []string{
		"mirror", "--source-endpoints", ep[0], "--dest-endpoints", dst.Endpoints()[0], "--prefix", "/cmp/", "--name", "cmp",
		"--source-user", "root", "--source-password", "rootpw", "--log-level", "warn"}})
	root := authClient(t, ep[0], "root", "rootpw")
	run := func(user string, env []string, extra ...string) (int, string) {
		t.Helper()
		args := append([]string{"compare", "--primary", ep[0], "--replica", rep.ClientURL, "--cascaded", casc.ClientURL,
			"--mirror-dest", dst.Endpoints()[0], "--prefix", "/cmp/", "--user", user}, extra...)
		p := harness.Start(t, harness.ProcConfig{Name: "compare-" + strings.Split(user, ":")[0], Bin: bins.Replica, Args: args, Env: env})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		code, err := p.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return code, p.Log()
	}

	revBefore := head(t, root)
	if code, log := run("short:shortpw", nil, "--duration", "5s"); code == 0 || !strings.Contains(log, "permission denied") || !strings.Contains(log, `--user "short" needs read and write on --prefix /cmp/`) || strings.Contains(log, "shortpw\"") {
		t.Fatalf("compare as a user that may only read its prefix: exit %d, want a permission error:\n%s", code, log)
	} else {
		t.Logf("compare with one permission less:\n%s", harnessTail(log))
	}
	if rev := head(t, root); rev != revBefore {
		t.Fatalf("the refused compare wrote: revision %d, was %d", rev, revBefore)
	}

	out := t.TempDir()
	code, log := run("cmp", []string{"UNDERSTUDY_PASSWORD=cmppw"}, "--duration", "8s", "--out", out)
	if code != 0 || strings.Contains(log, "cmppw") {
		t.Fatalf("compare with its minimal role, its password in UNDERSTUDY_PASSWORD: exit %d (want 0, the password never shown):\n%s", code, log)
	}
	r := readReport(t, out, log)
	for _, pr := range r.Paths {
		if pr.Run.Reads == 0 || pr.Run.Errors > pr.Run.Reads/100 {
			t.Errorf("%s with the minimal role: %d reads, %d errors", pr.Path, pr.Run.Reads, pr.Run.Errors)
		}
	}
	for _, p := range []compare.Path{compare.PathLeader, compare.PathReplicaStrong, compare.PathCascadedStrong} {
		if pr := pathReport(t, &r, p); pr.Linearizable != compare.VerdictOK {
			t.Errorf("%s: porcupine says %s, want linearizable", p, pr.Linearizable)
		}
	}
	checkWatches(t, &r)
	if n := countPrefix(t, root, "/cmp/"); n != 0 {
		t.Errorf("%d keys left under /cmp/", n)
	}
}
