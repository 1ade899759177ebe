package e2e

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/test/harness"
)

// run runs `replica mirror …` to its end (it must end within a minute)
// and returns its exit code and output.
func (p *mirrorPair) run(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, p.bins.Replica, args...).CombinedOutput()
	if err == nil {
		return 0, string(out)
	}
	var ee *exec.ExitError
	if !asExitError(err, &ee) {
		t.Fatalf("replica %s: %v", strings.Join(args, " "), err)
	}
	return ee.ExitCode(), string(out)
}

// wantRefused runs a mirror that must exit non-zero saying each of want.
func (p *mirrorPair) wantRefused(t *testing.T, args []string, want ...string) {
	t.Helper()
	code, out := p.run(t, args...)
	if code == 0 {
		t.Fatalf("replica %s exited 0:\n%s\nwant a refusal", strings.Join(args, " "), out)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Fatalf("replica %s exited %d:\n%s\nwant it to say %q", strings.Join(args, " "), code, out, w)
		}
	}
}

// mustHave checks destination keys hold the given values.
func (p *mirrorPair) mustHave(t *testing.T, what string, kvs map[string]string) {
	t.Helper()
	for k, v := range kvs {
		r, err := p.d.Get(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Kvs) != 1 || string(r.Kvs[0].Value) != v {
			t.Fatalf("%s: destination key %q is %v, want %q", what, k, r.Kvs, v)
		}
	}
}

// count is the number of destination keys under prefix.
func (p *mirrorPair) count(t *testing.T, prefix string) int64 {
	t.Helper()
	return countPrefix(t, p.d, prefix)
}

// resyncAfterCompaction kills the mirror, changes the source (deletes
// under del), compacts it past the checkpoint, restarts the mirror and
// waits until it says it resyncs and has caught up.
func (p *mirrorPair) resyncAfterCompaction(t *testing.T, proc *harness.Proc, name, del string) {
	t.Helper()
	proc.Kill()
	if _, err := p.s.Delete(context.Background(), del, clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	// One more revision, so that the compaction removes the one the
	// mirror resumes from.
	if _, err := p.s.Put(context.Background(), "unmirrored", "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.s.Compact(context.Background(), p.head(t)); err != nil {
		t.Fatal(err)
	}
	proc.Restart(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := proc.WaitLog(ctx, "compacted past the checkpoint"); err != nil {
		t.Fatalf("the mirror did not resync: %v", err)
	}
	p.waitCaughtUp(t, name)
}

// TestMirrorOwnsOnlyWhatItWrote: with --no-dest-prefix the mirror's image
// is the whole destination keyspace. A key the destination already held
// stops the initial sync until the operator chooses; with --overwrite it
// survives the sync, a resync after compaction and restarts, while
// deletes made on the source while the mirror was down still arrive; a
// second mirror whose image overlaps is refused; --prune makes the image
// exact.
func TestMirrorOwnsOnlyWhatItWrote(t *testing.T) {
	beside(t)
	p := startMirrorPair(t)
	fill(t, p.s, "/registry/", 300)
	ctx := context.Background()
	if _, err := p.d.Put(ctx, "/other/x", "precious"); err != nil {
		t.Fatal(err)
	}
	flat := []string{"--prefix", "/registry/", "--no-dest-prefix", "--name", "flat"}
	p.wantRefused(t, p.args(flat...), `"/other/x"`, "--overwrite", "--prune", "did not write")
	p.mustHave(t, "after the refusal", map[string]string{"/other/x": "precious"})
	if n := p.count(t, "0"); n != 0 {
		t.Fatalf("the refused mirror wrote %d keys", n)
	}

	proc := p.start(t, append(flat, "--overwrite")...)
	p.waitCaughtUp(t, "flat")
	p.mustHave(t, "after the initial sync", map[string]string{"/other/x": "precious", "000007": "v7"})
	code, out := p.verify(t, flat...)
	if code != 0 || !strings.Contains(out, `not written by the mirror (left alone): "/other/x"`) {
		t.Fatalf("verify: exit %d:\n%s\nwant 0, naming /other/x as not the mirror's", code, out)
	}

	// A key written in the destination while the mirror runs is not the
	// mirror's either.
	if _, err := p.d.Put(ctx, "/other/late", "mine"); err != nil {
		t.Fatal(err)
	}
	p.resyncAfterCompaction(t, proc, "flat", "/registry/0001") // 000100…000199
	p.mustHave(t, "after a resync", map[string]string{"/other/x": "precious", "/other/late": "mine"})
	if n := p.count(t, "0001"); n != 0 {
		t.Fatalf("after a resync: %d keys deleted on the source are still in the destination", n)
	}

	// Deleted while the mirror was down, without compaction: the watch
	// brings the deletes on restart.
	proc.Kill()
	if _, err := p.s.Delete(ctx, "/registry/0002", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	proc.Restart(t)
	p.waitCaughtUp(t, "flat")
	if n := p.count(t, "0002"); n != 0 {
		t.Fatalf("after a restart: %d keys deleted on the source while the mirror was down are still in the destination", n)
	}
	p.mustHave(t, "after a restart", map[string]string{"/other/x": "precious", "/other/late": "mine"})
	mustVerify(t, p, flat...)

	// Another mirror whose image overlaps, from the same source.
	p.wantRefused(t, p.args("--prefix", "/registry/", "--name", "second"), `"second"`, `"flat"`, "overlaps")
	proc.Stop()

	// --prune: an exact copy (a change of policy the checkpoint records:
	// --reset-policy says it is meant).
	proc = p.start(t, append(flat, "--prune", "--reset-policy")...)
	p.resyncAfterCompaction(t, proc, "flat", "/registry/0000")
	for _, k := range []string{"/other/x", "/other/late"} {
		if r, err := p.d.Get(ctx, k); err != nil || len(r.Kvs) != 0 {
			t.Fatalf("--prune left %q (%v)", k, err)
		}
	}
	code, out = p.verify(t, flat...)
	if code != 0 || strings.Contains(out, "not written") {
		t.Fatalf("verify after --prune: exit %d:\n%s\nwant 0 and nothing left that is not the mirror's", code, out)
	}
}

// TestMirrorOwnsOnlyWhatItWroteUnderItsPrefix: a key the destination
// already held under the mirrored prefix survives the sync, resyncs and
// restarts; a source key landing on a destination key the mirror did not
// write is left alone (and verify says so) unless --overwrite.
func TestMirrorOwnsOnlyWhatItWroteUnderItsPrefix(t *testing.T) {
	beside(t)
	p := startMirrorPair(t)
	fill(t, p.s, "/registry/", 300)
	ctx := context.Background()
	if _, err := p.d.Put(ctx, "/registry/local", "here"); err != nil {
		t.Fatal(err)
	}
	reg := []string{"--prefix", "/registry/"}
	p.wantRefused(t, p.args(reg...), `"/registry/local"`, "--overwrite", "--prune")

	proc := p.start(t, append(reg, "--overwrite")...)
	p.waitCaughtUp(t, "default")
	p.mustHave(t, "after the initial sync", map[string]string{"/registry/local": "here", "/registry/000007": "v7"})
	p.resyncAfterCompaction(t, proc, "default", "/registry/0001")
	p.mustHave(t, "after a resync", map[string]string{"/registry/local": "here"})
	if n := p.count(t, "/registry/0001"); n != 0 {
		t.Fatalf("after a resync: %d keys deleted on the source are still in the destination", n)
	}
	proc.Stop()

	// Restarted without --overwrite (--reset-policy: the checkpoint
	// records --overwrite): a key someone writes in the destination is
	// theirs, whatever the source does with its name.
	proc = p.start(t, append(reg, "--reset-policy")...)
	p.waitCaughtUp(t, "default")
	if _, err := p.d.Put(ctx, "/registry/theirs", "dest"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.s.Put(ctx, "/registry/theirs", "source"); err != nil {
		t.Fatal(err)
	}
	p.waitCaughtUp(t, "default")
	p.mustHave(t, "after a conflicting source put", map[string]string{"/registry/theirs": "dest", "/registry/local": "here"})
	code, out := p.verify(t, reg...)
	if code != 1 || !strings.Contains(out, `not the mirror's`) || !strings.Contains(out, `"/registry/theirs"`) {
		t.Fatalf("verify with a conflict: exit %d:\n%s\nwant 1, naming /registry/theirs as a conflict", code, out)
	}
	if _, err := p.s.Delete(ctx, "/registry/theirs"); err != nil {
		t.Fatal(err)
	}
	proc.Kill()
	if _, err := p.s.Delete(ctx, "/registry/0002", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	proc.Restart(t)
	p.waitCaughtUp(t, "default")
	p.mustHave(t, "after a source delete and a restart", map[string]string{"/registry/theirs": "dest", "/registry/local": "here"})
	if n := p.count(t, "/registry/0002"); n != 0 {
		t.Fatalf("after a restart: %d keys deleted on the source while the mirror was down are still in the destination", n)
	}
	mustVerify(t, p, reg...)
}
