package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/test/harness"
)

// mirrorFaultEnv is one mirror scenario: a source and a destination cluster,
// the mirror reaching the destination through a proxy.
type mirrorFaultEnv struct {
	t      *testing.T
	p      *mirrorPair
	toDest *harness.Proxy
	mirror *harness.Proc
}

// mirrorFaultCase is one fault on the mirror's path: inject starts it and
// returns what ends it.
type mirrorFaultCase struct {
	name   string
	inject func(e *mirrorFaultEnv) (heal func())
}

var mirrorFaultCases = []mirrorFaultCase{
	{name: "mirror-kill-restart", inject: func(e *mirrorFaultEnv) func() {
		e.mirror.Kill()
		return func() { e.mirror.Restart(e.t) }
	}},
	{name: "mirror-dest-blackhole", inject: func(e *mirrorFaultEnv) func() {
		e.toDest.Blackhole()
		return e.toDest.Heal
	}},
}

// faultPrefix is where the mirror scenarios' writer works.
const faultPrefix = "f/"

// runMirrorFault mirrors faultPrefix while a writer puts and deletes under
// it, injects the fault, heals it, and checks: the mirror never exited on
// its own; it catches up; `verify` passes; and the destination's history of
// the prefix is the source's, event for event, in order (nothing lost,
// repeated or reordered, across the fault).
func runMirrorFault(t *testing.T, fc mirrorFaultCase, rng *rand.Rand, fixed bool) {
	p := startMirrorPair(t)
	e := &mirrorFaultEnv{t: t, p: p}
	e.toDest = harness.NewProxy(t, strings.TrimPrefix(p.dst.Endpoints()[0], "http://"))
	e.mirror = harness.Start(t, harness.ProcConfig{Name: "mirror", Bin: p.bins.Replica, Args: []string{
		"mirror", "--source-endpoints", p.src.Endpoints()[0], "--dest-endpoints", e.toDest.URL(),
		"--prefix", faultPrefix, "--progress-interval", "200ms",
	}})

	before, during, after := 2*time.Second, 4*time.Second, 2*time.Second
	if !fixed {
		before = time.Duration(500+rng.IntN(2500)) * time.Millisecond
		during = time.Duration(1000+rng.IntN(6000)) * time.Millisecond
		after = time.Duration(500+rng.IntN(2500)) * time.Millisecond
	}
	t.Logf("fault %s: after %v, for %v, then %v more", fc.name, before, during, after)

	// The (empty) initial sync done, every write is streamed: the
	// destination's history must then be the source's, event for event.
	p.waitCaughtUp(t, "default")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("mirror log:\n%s", e.mirror.Log())
		}
	})
	w := startMirrorWriter(t, p.s, rng.Uint64())
	hold(before)
	heal := fc.inject(e)
	hold(during)
	if fc.name != "mirror-kill-restart" && e.mirror.Exited() {
		t.Fatalf("the mirror exited during %s:\n%s", fc.name, e.mirror.Log())
	}
	heal()
	hold(after)
	writes := w.stop(t)
	if e.mirror.Exited() {
		t.Fatalf("the mirror exited after %s:\n%s", fc.name, e.mirror.Log())
	}
	p.waitCaughtUp(t, "default")
	mustVerify(t, p, "--prefix", faultPrefix)
	src, dst := prefixHistory(t, p.s), prefixHistory(t, p.d)
	if len(src) == 0 {
		t.Fatal("the source has no history under the prefix: the writer wrote nothing")
	}
	compareHistories(t, src, dst)
	t.Logf("%d acknowledged writes; %d events mirrored in order", writes, len(src))
}

// mirrorWriter puts and deletes keys under faultPrefix through the source,
// one at a time, as fast as the source answers (paced a little).
type mirrorWriter struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	acked  int
	err    error
}

func startMirrorWriter(t *testing.T, cli *clientv3.Client, seed uint64) *mirrorWriter {
	ctx, cancel := context.WithCancel(context.Background())
	w := &mirrorWriter{cancel: cancel}
	rng := rand.New(rand.NewPCG(seed, 11))
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			k := fmt.Sprintf("%s%03d", faultPrefix, rng.IntN(50))
			var err error
			if rng.IntN(4) == 0 {
				_, err = cli.Delete(ctx, k)
			} else {
				_, err = cli.Put(ctx, k, "w"+strconv.Itoa(i))
			}
			if ctx.Err() != nil {
				return
			}
			w.mu.Lock()
			if err != nil && w.err == nil {
				w.err = err
			}
			if err == nil {
				w.acked++
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// stop ends the writer and returns how many writes were acknowledged; the
// source is not faulted, so every write must succeed.
func (w *mirrorWriter) stop(t *testing.T) int {
	t.Helper()
	w.cancel()
	w.wg.Wait()
	if w.err != nil {
		t.Fatalf("a write to the source failed (the source is not faulted): %v", w.err)
	}
	return w.acked
}

// histEvent is one change of a key, as a watcher sees it.
type histEvent struct {
	del        bool
	key, value string
}

func (h histEvent) String() string {
	if h.del {
		return "delete " + h.key
	}
	return "put " + h.key + "=" + h.value
}

// prefixHistory reads every event under faultPrefix from revision 1 to the
// cluster's revision now, in order.
func prefixHistory(t *testing.T, cli *clientv3.Client) []histEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	head, err := cli.Get(ctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		t.Fatalf("head revision: %v", err)
	}
	var out []histEvent
	// Once the watcher has sent everything up to head, a progress
	// notification at head or later says so.
	for resp := range cli.Watch(ctx, faultPrefix, clientv3.WithPrefix(), clientv3.WithRev(1), clientv3.WithCreatedNotify()) {
		if err := resp.Err(); err != nil {
			t.Fatalf("history watch: %v", err)
		}
		for _, ev := range resp.Events {
			out = append(out, histEvent{del: ev.Type == mvccpb.DELETE, key: string(ev.Kv.Key), value: string(ev.Kv.Value)})
		}
		if resp.IsProgressNotify() && resp.Header.Revision >= head.Header.Revision {
			return out
		}
		if err := cli.RequestProgress(ctx); err != nil {
			t.Fatalf("history watch: request progress: %v", err)
		}
	}
	t.Fatal("history watch ended before the head revision")
	return nil
}

// compareHistories requires dst to be src, event for event, reporting the
// first difference as lost, repeated or reordered.
func compareHistories(t *testing.T, src, dst []histEvent) {
	t.Helper()
	for i := range min(len(src), len(dst)) {
		if src[i] == dst[i] {
			continue
		}
		what := "reordered or lost"
		if i > 0 && dst[i] == dst[i-1] {
			what = "repeated"
		}
		t.Fatalf("destination history differs from the source's at event %d of %d (%s): source %v, destination %v", i+1, len(src), what, src[i], dst[i])
	}
	if len(dst) != len(src) {
		t.Fatalf("destination has %d events under %s, the source %d: %d lost or repeated at the end", len(dst), faultPrefix, len(src), len(dst)-len(src))
	}
}
