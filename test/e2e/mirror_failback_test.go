package e2e

import (
	"context"
	"maps"
	"strconv"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/mirror"
	"github.com/understudy-kv/understudy/test/harness"
)

// kvVersion is a key's value and ModRevision.
type kvVersion struct {
	v   string
	rev int64
}

// prefixVersions is every key under prefix with its value and ModRevision.
func prefixVersions(t *testing.T, cli *clientv3.Client, prefix string) map[string]kvVersion {
	t.Helper()
	resp, err := cli.Get(context.Background(), prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]kvVersion{}
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = kvVersion{string(kv.Value), kv.ModRevision}
	}
	return out
}

// prefixValues is every key under prefix with its value.
func prefixValues(t *testing.T, cli *clientv3.Client, prefix string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for k, v := range prefixVersions(t, cli, prefix) {
		out[k] = v.v
	}
	return out
}

// TestMirrorFailback: mirror ab copies /p/ of cluster A into B; a
// switchover (drain, ab stopped) moves the writers to B, which overwrites,
// deletes and creates keys; meanwhile A gets a key no mirror copied and a
// write over a key ab had copied, after the cutover. A mirror ba from B
// back to A is refused without --failback, naming ab's checkpoint,
// cutover record and ownership records (and with --failback before the
// drain, for want of the cutover record). With --failback it takes over
// A's keys that ab copied: A ends equal to B under /p/, except A's two own
// keys, left alone (the one B also has is a conflict, which verify
// reports, and nothing else); A's keys outside /p/ are untouched; B's
// writes keep flowing; the checkpoint records the failback, so that a
// restart without the flag is refused and one with it does not adopt again.
func TestMirrorFailback(t *testing.T) {
	beside(t)
	p := startMirrorPair(t) // s: A, d: B
	a, b := p.s, p.d
	ctx := context.Background()
	fill(t, a, "/p/", 40)
	fill(t, a, "/o/", 10)
	ab := p.start(t, "--prefix", "/p/", "--name", "ab")
	p.waitCaughtUp(t, "ab")
	baArgs := func(extra ...string) []string {
		return mirrorArgs(p.dst, p.src, "ba", append([]string{"--prefix", "/p/"}, extra...)...)
	}
	quote := strconv.Quote

	// Not switched over yet: --failback wants the cutover record.
	p.wantRefused(t, baArgs("--failback"), "--failback needs a completed switchover", quote(mirror.CutoverKey("ab")))
	noCheckpoint(t, a, "ba")

	// Switchover: drain, stop ab, writers move to B.
	if code, out := p.run(t, p.drainArgs("--prefix", "/p/", "--name", "ab")...); code != 0 || !strings.Contains(out, "destination ready") {
		t.Fatalf("drain of ab exited %d:\n%s", code, out)
	}
	ab.Stop()
	for _, op := range []clientv3.Op{clientv3.OpPut("/p/000001", "b1"), clientv3.OpDelete("/p/000002"), clientv3.OpPut("/p/b-new", "bn")} {
		if _, err := b.Do(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
	// A's own writes after the cutover: a key no mirror copied, and a
	// write over one ab had copied (B holds its older version).
	for k, v := range map[string]string{"/p/a-only": "a", "/p/000003": "late"} {
		if _, err := a.Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	outside, ownA := prefixVersions(t, a, "/o/"), prefixVersions(t, a, "/p/")

	// Without --failback: refused, naming what it found.
	aRev := head(t, a)
	p.wantRefused(t, baArgs(), `mirror "ab"`, quote(mirror.CheckpointKey("ab")), quote(mirror.CutoverKey("ab")),
		quote(mirror.ReservedPrefix+"ab/own/"), "40 ownership record(s)", "give --failback")
	noCheckpoint(t, a, "ba")
	if rev := head(t, a); rev != aRev {
		t.Fatalf("the refused failback wrote into A: revision %d, %d before", rev, aRev)
	}

	// With --failback.
	ba := harness.Start(t, harness.ProcConfig{Name: "mirror-ba", Bin: p.bins.Replica, Args: baArgs("--failback")})
	caughtUp(t, b, a, "ba")
	want := prefixValues(t, b, "/p/")
	want["/p/a-only"], want["/p/000003"] = "a", "late"
	if got := prefixValues(t, a, "/p/"); !maps.Equal(got, want) {
		t.Fatalf("after the failback A holds under /p/:\n%v\nwant B's keys and A's own two:\n%v", got, want)
	}
	after := prefixVersions(t, a, "/p/")
	for _, k := range []string{"/p/a-only", "/p/000003"} {
		if after[k] != ownA[k] {
			t.Fatalf("the failback touched A's own key %s: %+v, was %+v", k, after[k], ownA[k])
		}
	}
	if got := prefixVersions(t, a, "/o/"); !maps.Equal(got, outside) {
		t.Fatalf("the failback touched A's keys outside /p/:\n%v\nwere\n%v", got, outside)
	}
	line := lastLogLine(t, ba, "took over the destination's keys")
	if line["adopted"] != float64(39) || line["left-newer-than-cutover"] != float64(1) {
		t.Fatalf("adoption log line %v: want 39 keys adopted (40 copied by ab, less /p/000003 written in A after the cutover) and 1 left", line)
	}
	if cp, _, err := mirror.ReadCheckpoint(ctx, a, "ba"); err != nil || cp == nil || cp.FailbackFrom != "ab" || !cp.Adopted {
		t.Fatalf("checkpoint of ba %+v (%v): want failback from ab, adopted", cp, err)
	}

	// B's writes keep flowing, keys ab wrote included.
	for _, op := range []clientv3.Op{clientv3.OpPut("/p/000004", "b4"), clientv3.OpDelete("/p/000005")} {
		if _, err := b.Do(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
	caughtUp(t, b, a, "ba")
	if r, err := a.Get(ctx, "/p/", clientv3.WithPrefix()); err != nil || len(r.Kvs) != len(want)-1 {
		t.Fatalf("A holds %v keys under /p/ after a put and a delete in B, want %d (%v)", r, len(want)-1, err)
	}
	if r, err := a.Get(ctx, "/p/000004"); err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "b4" {
		t.Fatalf("/p/000004 in A: %v %v, want b4", r, err)
	}

	// verify of ba (B → A) copies ab's keys too: the one difference is
	// A's own write over a key B has; A's key no mirror copied is left.
	code, out := p.run(t, append([]string{"mirror", "verify"}, baArgs()[1:]...)...)
	if code != 1 || strings.Count(out, "value differs") != 1 || !strings.Contains(out, `not the mirror's (it leaves it alone; --overwrite copies over it): "/p/000003"`) ||
		!strings.Contains(out, `not written by the mirror (left alone): "/p/a-only"`) || !strings.Contains(out, "1 difference(s)") {
		t.Fatalf("verify of ba exited %d:\n%s\nwant exactly one difference, the conflict on /p/000003, and /p/a-only left alone", code, out)
	}

	// Restarts: without the flag refused, naming the recorded failback;
	// with it, no adoption again.
	ba.Stop()
	p.wantRefused(t, baArgs(), "records a failback from it", "--failback")
	ba = harness.Start(t, harness.ProcConfig{Name: "mirror-ba-again", Bin: p.bins.Replica, Args: baArgs("--failback")})
	if _, err := b.Put(ctx, "/p/000006", "b6"); err != nil {
		t.Fatal(err)
	}
	caughtUp(t, b, a, "ba")
	if line := lastLogLine(t, ba, "--failback: failing back"); line["adopt"] != false {
		t.Fatalf("the restarted failback adopts again: %v", line)
	}
	if strings.Contains(ba.Log(), "took over the destination's keys") {
		t.Fatalf("the restarted failback adopted again:\n%s", ba.Log())
	}
	if got := prefixVersions(t, a, "/o/"); !maps.Equal(got, outside) {
		t.Fatalf("the restarted failback touched A's keys outside /p/: %v", got)
	}
	if r, err := a.Get(ctx, "/p/000006"); err != nil || len(r.Kvs) != 1 || string(r.Kvs[0].Value) != "b6" {
		t.Fatalf("/p/000006 in A after the restart: %v %v, want b6", r, err)
	}
	t.Logf("failback: A holds %d keys under /p/: B's %d (/p/000003 with A's own value) and /p/a-only", countPrefix(t, a, "/p/"), countPrefix(t, b, "/p/"))
}
