package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/test/harness"
)

// lastLogLine is the fields of the last line of proc's log whose message
// contains msg; it fails the test if there is none.
func lastLogLine(t *testing.T, proc *harness.Proc, msg string) map[string]any {
	t.Helper()
	lines := strings.Split(proc.Log(), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		var f map[string]any
		if json.Unmarshal([]byte(lines[i]), &f) != nil {
			continue
		}
		if m, _ := f["msg"].(string); strings.Contains(m, msg) {
			return f
		}
	}
	t.Fatalf("no log line %q in %s", msg, proc.LogPath())
	return nil
}

// newestModRev is the highest ModRevision among the keys under prefix.
func newestModRev(t *testing.T, cli *clientv3.Client, prefix string) int64 {
	t.Helper()
	r, err := cli.Get(context.Background(), prefix, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortDescend), clientv3.WithLimit(1))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Kvs) == 0 {
		return 0
	}
	return r.Kvs[0].ModRevision
}

// resyncCompared waits for a resync of the mirror's latest start to
// finish comparing and catch up, and checks what its log line and its
// metrics say it wrote and left.
func resyncCompared(t *testing.T, p *mirrorPair, proc *harness.Proc, metrics string, written, unchanged int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := proc.WaitLog(ctx, "compacted past the checkpoint"); err != nil {
		t.Fatalf("the mirror did not resync: %v", err)
	}
	if err := proc.WaitLog(ctx, "full sync compared the destination first"); err != nil {
		t.Fatalf("the resync did not report what it wrote: %v", err)
	}
	p.waitCaughtUp(t, "default")
	f := lastLogLine(t, proc, "full sync compared the destination first")
	if f["written"] != float64(written) || f["unchanged"] != float64(unchanged) {
		t.Fatalf("resync log line %v: want written %d, unchanged %d", f, written, unchanged)
	}
	if w, u := metric(t, metrics, "understudy_mirror_resync_keys_written_total"), metric(t, metrics, "understudy_mirror_resync_keys_unchanged_total"); w != float64(written) || u != float64(unchanged) {
		t.Fatalf("resync metrics: written %v, unchanged %v; want %d, %d", w, u, written, unchanged)
	}
}

// TestMirrorResyncWritesOnlyWhatDiffers: a resync after compaction of an
// unchanged prefix (20,000 keys in CI, 100,000 with -mirror.long, and 20
// keys on live leases) writes no key: its log line and metrics say 0
// written, and no destination key under the prefix has a new revision.
// After a change, a delete and a new key made while the mirror was down,
// a second resync writes exactly the changed and the new key, deletes the
// deleted one, and the keys it did not rewrite are still the mirror's: a
// later source delete of one reaches the destination.
func TestMirrorResyncWritesOnlyWhatDiffers(t *testing.T) {
	beside(t)
	keys := 20000
	if *mirrorLong {
		keys = 100000
	}
	p := startMirrorPair(t)
	fill(t, p.s, "r/", keys)
	leasedKeys(t, p.s, "r/l", 20, 120)
	total := keys + 20
	metrics := harness.URL(harness.FreePort(t))
	proc := p.start(t, "--prefix", "r/", "--listen-metrics-urls", metrics)
	p.waitCaughtUp(t, "default")
	before := newestModRev(t, p.d, "r/")

	// Two revisions outside the prefix, so that the compaction removes
	// the one the mirror resumes from.
	proc.Kill()
	for range 2 {
		if _, err := p.s.Put(context.Background(), "unmirrored", "x"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.s.Compact(context.Background(), p.head(t)); err != nil {
		t.Fatal(err)
	}
	proc.Restart(t)
	resyncCompared(t, p, proc, metrics, 0, total)
	if after := newestModRev(t, p.d, "r/"); after != before {
		t.Fatalf("a resync of an unchanged prefix rewrote keys: the newest destination revision under r/ is %d, was %d", after, before)
	}
	mustVerify(t, p, "--prefix", "r/")

	proc.Kill()
	for k, v := range map[string]string{"r/000007": "changed", "r/999999": "new"} {
		if _, err := p.s.Put(context.Background(), k, v); err != nil {
			t.Fatal(err)
		}
	}
	p.resyncAfterCompaction(t, proc, "default", "r/000005")
	resyncCompared(t, p, proc, metrics, 2, total-2) // one key fewer, one more, one changed
	p.mustHave(t, "after the second resync", map[string]string{"r/000007": "changed", "r/999999": "new", "r/000008": "v8"})
	if n := p.count(t, "r/000005"); n != 0 {
		t.Fatalf("r/000005, deleted while the mirror was down, is still in the destination")
	}
	mustVerify(t, p, "--prefix", "r/")

	// Not rewritten, still owned: a source delete reaches the destination.
	if _, err := p.s.Delete(context.Background(), "r/000010"); err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, time.Minute, "r/000010 deleted in the destination", func() (bool, error) {
		return p.count(t, "r/000010") == 0, nil
	})
	t.Logf("two resyncs of %d keys: the first wrote 0, the second %s", total, fmt.Sprint(lastLogLine(t, proc, "full sync compared")["written"]))
}
