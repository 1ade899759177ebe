package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/mirror"
	"github.com/understudy-kv/understudy/test/harness"
)

// mirrorArgs are `replica mirror` arguments from src into dst.
func mirrorArgs(src, dst *harness.Cluster, name string, extra ...string) []string {
	return append([]string{"mirror", "--source-endpoints", src.Endpoints()[0], "--dest-endpoints", dst.Endpoints()[0],
		"--name", name, "--progress-interval", "200ms", "--cycle-check-interval", "200ms"}, extra...)
}

// caughtUp waits until the checkpoint of mirror name in dst has src's
// revision as of now.
func caughtUp(t *testing.T, src, dst *clientv3.Client, name string) {
	t.Helper()
	h := head(t, src)
	harness.WaitFor(t, 2*time.Minute, fmt.Sprintf("mirror %s caught up with source revision %d", name, h), func() (bool, error) {
		cp, _, err := mirror.ReadCheckpoint(context.Background(), dst, name)
		return err == nil && cp != nil && cp.Phase == mirror.PhaseStream && cp.Revision >= h, err
	})
}

// noCheckpoint fails if mirror name has a checkpoint in cli's cluster.
func noCheckpoint(t *testing.T, cli *clientv3.Client, name string) {
	t.Helper()
	cp, _, err := mirror.ReadCheckpoint(context.Background(), cli, name)
	if err != nil || cp != nil {
		t.Fatalf("refused mirror %q left a checkpoint (%v, %v)", name, cp, err)
	}
}

// counts are the number of keys under each prefix.
func counts(t *testing.T, cli *clientv3.Client, prefixes ...string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, p := range prefixes {
		out[p] = countPrefix(t, cli, p)
	}
	return out
}

func sameCounts(t *testing.T, what string, before, after map[string]int64) {
	t.Helper()
	for p, n := range before {
		if after[p] != n {
			t.Fatalf("%s: %d keys under %q, %d before", what, after[p], p, n)
		}
	}
}

// TestMirrorRefusesACycleInOneCluster: a mirror of /b/ into /a/x/ beside
// a mirror of /a/ into /b/ in the same cluster (the first cycle,
// which grew /a/ to 12,054 keys in 12 s) is refused before it writes
// anything, naming both mirrors, whichever of the two starts second; a
// mirror that a cycle forms around while it runs (a checkpoint written
// behind its back) stops at its next check, naming the other.
func TestMirrorRefusesACycleInOneCluster(t *testing.T) {
	beside(t)
	p := startMirrorPair(t)
	x, cx := p.src, p.s
	fill(t, cx, "/a/", 100)
	fill(t, cx, "/q/", 100)
	procs := map[string]*harness.Proc{}
	for _, c := range []struct{ first, second []string }{
		{[]string{"ab", "--prefix", "/a/", "--dest-prefix", "/b/"}, []string{"ba", "--prefix", "/b/", "--dest-prefix", "/a/x/"}},
		{[]string{"qp", "--prefix", "/q/", "--dest-prefix", "/p/x/"}, []string{"pq", "--prefix", "/p/", "--dest-prefix", "/q/"}},
	} {
		first := harness.Start(t, harness.ProcConfig{Name: "mirror-" + c.first[0], Bin: p.bins.Replica, Args: mirrorArgs(x, x, c.first[0], c.first[1:]...)})
		procs[c.first[0]] = first
		caughtUp(t, cx, cx, c.first[0])
		before := counts(t, cx, "/a/", "/b/", "/p/", "/q/")
		p.wantRefused(t, mirrorArgs(x, x, c.second[0], c.second[1:]...), fmt.Sprintf("mirror %q", c.second[0]), fmt.Sprintf("mirror %q", c.first[0]), "cycle")
		noCheckpoint(t, cx, c.second[0])
		caughtUp(t, cx, cx, c.first[0])
		sameCounts(t, "after the refusal of "+c.second[0], before, counts(t, cx, "/a/", "/b/", "/p/", "/q/"))
		if first.Exited() {
			t.Fatalf("mirror %s exited when %s was refused:\n%s", c.first[0], c.second[0], first.Log())
		}
	}

	// A cycle formed behind the running mirror "ab": a checkpoint of a
	// mirror of /b/ into /a/r/ appears (an older mirror, or one that
	// could not read ab's). ab stops at its next check, naming it.
	resp, err := cx.Get(context.Background(), "/a/", clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	rogue := mirror.Checkpoint{SourceClusterID: fmt.Sprintf("%x", resp.Header.ClusterId), SourcePrefix: "/b/", DestPrefix: "/a/r/", Phase: mirror.PhaseStream, Revision: resp.Header.Revision}
	b, err := json.Marshal(rogue)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cx.Put(context.Background(), mirror.CheckpointKey("rogue"), string(b)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ab := procs["ab"]
	code, err := ab.Wait(ctx)
	if err != nil || code == 0 {
		t.Fatalf("mirror ab: exit %d (%v) once a cycle formed around it, want non-zero\n%s", code, err, ab.Log())
	}
	if log := ab.Log(); !strings.Contains(log, `mirror "rogue"`) || !strings.Contains(log, `mirror "ab"`) || !strings.Contains(log, "cycle") {
		t.Fatalf("mirror ab stopped without naming the cycle with rogue:\n%s", log)
	}
	if procs["qp"].Exited() {
		t.Fatalf("mirror qp, outside the cycle, stopped:\n%s", procs["qp"].Log())
	}
}

// TestMirrorRefusesACycleAcrossClusters: two clusters mirroring /c/ into
// each other with --overwrite (the second cycle, ~600 revisions/s
// each, forever): the mirror started second is refused before it writes
// anything in either cluster, naming the first.
func TestMirrorRefusesACycleAcrossClusters(t *testing.T) {
	beside(t)
	p := startMirrorPair(t)
	fill(t, p.s, "/c/x", 100)
	fill(t, p.d, "/c/y", 50)
	p.start(t, "--prefix", "/c/", "--overwrite", "--name", "c-xy")
	p.waitCaughtUp(t, "c-xy")
	srcBefore, dstBefore := counts(t, p.s, "/c/"), counts(t, p.d, "/c/")
	srcRev := head(t, p.s)
	p.wantRefused(t, mirrorArgs(p.dst, p.src, "c-yx", "--prefix", "/c/", "--overwrite"), `mirror "c-yx"`, `mirror "c-xy"`, "cycle")
	if rev := head(t, p.s); rev != srcRev {
		t.Fatalf("the refused mirror wrote into its destination: revision %d, %d before", rev, srcRev)
	}
	noCheckpoint(t, p.s, "c-yx")
	p.waitCaughtUp(t, "c-xy")
	sameCounts(t, "source after the refusal", srcBefore, counts(t, p.s, "/c/"))
	sameCounts(t, "destination after the refusal", dstBefore, counts(t, p.d, "/c/"))
}

// TestMirrorRefusesACycleClaimedLate: a mirror that passed the check at
// start but has not written its checkpoint yet is invisible to the other
// mirror of a cycle starting then; it checks again once its checkpoint is
// written, before it copies a key, and stops, naming the cycle. Mirror ba
// streams from --rev and writes its first checkpoint only when the
// source's revision moves, which ab's start does; the prefixes are empty
// and the periodic check is an hour away, so nothing but the check after
// the first checkpoint can find the cycle. The keys written afterwards do
// not loop.
func TestMirrorRefusesACycleClaimedLate(t *testing.T) {
	beside(t)
	p := startMirrorPair(t)
	x, cx := p.src, p.s
	once := []string{"--cycle-check-interval", "1h"}
	ba := harness.Start(t, harness.ProcConfig{Name: "mirror-ba", Bin: p.bins.Replica, Args: mirrorArgs(x, x, "ba",
		append(once, "--prefix", "/b/", "--dest-prefix", "/a/x/", "--rev", fmt.Sprint(head(t, cx)+1))...)})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := ba.WaitLog(ctx, "streaming from --rev"); err != nil {
		t.Fatal(err)
	}
	noCheckpoint(t, cx, "ba")
	ab := harness.Start(t, harness.ProcConfig{Name: "mirror-ab", Bin: p.bins.Replica, Args: mirrorArgs(x, x, "ab", append(once, "--prefix", "/a/", "--dest-prefix", "/b/")...)})
	harness.WaitFor(t, time.Minute, "one of two mirrors of a cycle stopped", func() (bool, error) { return ab.Exited() || ba.Exited(), nil })
	fill(t, cx, "/a/", 100)
	fill(t, cx, "/b/", 100)
	for _, m := range []struct {
		proc *harness.Proc
		name string
	}{{ab, "ab"}, {ba, "ba"}} {
		if !m.proc.Exited() {
			caughtUp(t, cx, cx, m.name)
			continue
		}
		log := m.proc.Log()
		if !strings.Contains(log, "cycle") {
			t.Fatalf("mirror %s exited without naming a cycle:\n%s", m.name, log)
		}
		t.Logf("mirror %s stopped:\n%s", m.name, log)
		noCheckpoint(t, cx, m.name)
	}
	// Whichever runs on copies its prefix once.
	if n := countPrefix(t, cx, "/a/") + countPrefix(t, cx, "/b/"); n > 300 {
		t.Fatalf("%d keys under /a/ and /b/ from 200: the cycle copied keys again", n)
	}
}

// TestMirrorLeavesOutKeysAnotherMirrorWrote: mirror "out" copies /a/ of
// cluster X into /out/ of Y; mirror "in" copies /in/ of Y into /a/in/ of
// X (no cycle: out does not write /in/). out copies X's own keys, not
// those in wrote, at the sync and while streaming; a key out had copied
// before in wrote over it is deleted from out's image; verify agrees.
func TestMirrorLeavesOutKeysAnotherMirrorWrote(t *testing.T) {
	beside(t)
	p := startMirrorPair(t) // s: X, d: Y
	ctx := context.Background()
	fill(t, p.s, "/a/local/", 50)
	fill(t, p.d, "/in/", 30)
	if _, err := p.s.Put(ctx, "/a/in/000007", "local"); err != nil {
		t.Fatal(err)
	}
	out := []string{"--prefix", "/a/", "--dest-prefix", "/out/", "--name", "out"}
	p.start(t, out...)
	p.waitCaughtUp(t, "out")
	p.mustHave(t, "before in", map[string]string{"/out/local/000007": "v7", "/out/in/000007": "local"})

	harness.Start(t, harness.ProcConfig{Name: "mirror-in", Bin: p.bins.Replica,
		Args: mirrorArgs(p.dst, p.src, "in", "--prefix", "/in/", "--dest-prefix", "/a/in/", "--overwrite")})
	caughtUp(t, p.d, p.s, "in")
	if n := countPrefix(t, p.s, "/a/in/"); n != 30 {
		t.Fatalf("mirror in copied %d keys into /a/in/, want 30", n)
	}
	p.waitCaughtUp(t, "out")
	if n := p.count(t, "/out/in/"); n != 0 {
		t.Fatalf("mirror out copied %d keys that mirror in wrote into its source (or kept its copy of one in wrote over)", n)
	}

	// Streaming: in's new keys stay out, X's own arrive.
	fill(t, p.d, "/in/new/", 20)
	fill(t, p.s, "/a/local/new/", 20)
	caughtUp(t, p.d, p.s, "in")
	p.waitCaughtUp(t, "out")
	if n := p.count(t, "/out/in/"); n != 0 {
		t.Fatalf("while streaming, mirror out copied %d keys that mirror in wrote", n)
	}
	if n := p.count(t, "/out/local/"); n != 70 {
		t.Fatalf("mirror out holds %d of X's 70 own keys", n)
	}
	// A key in wrote, written over in X: X's own again, copied.
	if _, err := p.s.Put(ctx, "/a/in/000003", "local again"); err != nil {
		t.Fatal(err)
	}
	p.waitCaughtUp(t, "out")
	p.mustHave(t, "after a local write over in's key", map[string]string{"/out/in/000003": "local again"})
	mustVerify(t, p, out...)
}
