package e2e

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"

	"github.com/understudy-kv/understudy/test/harness"
	"github.com/understudy-kv/understudy/wire"
)

const (
	counterKey  = "fault/counter"
	watchPrefix = "fault/"
	// boundedBound is the staleness bound of the workload's bounded reads.
	boundedBound = 300 * time.Millisecond
	faultOpTime  = 3 * time.Second
)

// ack is a counter write the voters acknowledged: its revision, and when
// (test clock).
type ack struct {
	rev int64
	at  int64
}

// boundedRead is a bounded read through the replica that succeeded: when
// it was sent, and the revision of the store that answered it.
type boundedRead struct {
	call int64
	rev  int64
}

// workload drives every path at once: a counter written through the
// voters (its acknowledgements are the yardstick for bounded reads and the
// watch), register clients writing through voters and replica with strong
// reads through the replica (porcupine), bounded reads of the counter, and
// a watch through the replica.
type workload struct {
	e        *faultEnv
	start    time.Time
	startRev int64
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	mu            sync.Mutex
	lin           []porcupine.Operation
	strongOK      int
	acks          []ack
	bounded       []boundedRead
	events        []*clientv3.Event
	voterWriteErr []error
	watchErr      error
}

func (w *workload) now() int64 { return int64(time.Since(w.start)) }

func startWorkload(t *testing.T, e *faultEnv) *workload {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &workload{e: e, start: time.Now(), cancel: cancel}
	sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
	resp, err := e.voters.Put(sctx, counterKey, "0")
	scancel()
	if err != nil {
		t.Fatalf("workload: first put: %v", err)
	}
	w.startRev = resp.Header.Revision + 1
	w.wg.Add(3 + 3)
	go w.counter(ctx)
	go w.boundedReader(ctx)
	go w.watcher(ctx)
	for c := range 3 {
		go w.register(ctx, c)
	}
	return w
}

func (w *workload) stop() {
	w.cancel()
	w.wg.Wait()
}

// waitOps waits until n strong reads through the replica have succeeded.
func (w *workload) waitOps(t *testing.T, n int) {
	t.Helper()
	harness.WaitFor(t, time.Minute, "the workload under way", func() (bool, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.strongOK >= n && len(w.acks) >= n, fmt.Errorf("%d strong reads, %d counter writes", w.strongOK, len(w.acks))
	})
}

func (w *workload) counter(ctx context.Context) {
	defer w.wg.Done()
	for i := 1; ctx.Err() == nil; i++ {
		octx, cancel := context.WithTimeout(ctx, faultOpTime)
		resp, err := w.e.voters.Put(octx, counterKey, strconv.Itoa(i))
		at := w.now()
		cancel()
		w.mu.Lock()
		if err == nil {
			w.acks = append(w.acks, ack{rev: resp.Header.Revision, at: at})
		} else if ctx.Err() == nil {
			w.voterWriteErr = append(w.voterWriteErr, err)
		}
		w.mu.Unlock()
	}
}

func (w *workload) boundedReader(ctx context.Context) {
	defer w.wg.Done()
	md := metadata.AppendToOutgoingContext(ctx, wire.MaxStalenessKey, boundedBound.String())
	for ctx.Err() == nil {
		octx, cancel := context.WithTimeout(md, faultOpTime)
		call := w.now()
		resp, err := w.e.rep.Get(octx, counterKey, clientv3.WithSerializable())
		cancel()
		if err != nil {
			continue // a failed bounded read observed nothing, as it should when it cannot be fresh
		}
		w.mu.Lock()
		w.bounded = append(w.bounded, boundedRead{call: call, rev: resp.Header.Revision})
		w.mu.Unlock()
	}
}

func (w *workload) watcher(ctx context.Context) {
	defer w.wg.Done()
	// clientv3 resumes a broken watch from the revision after the last one
	// it delivered: across a replica restart that is the resumability under
	// test.
	for resp := range w.e.rep.Watch(ctx, watchPrefix, clientv3.WithPrefix(), clientv3.WithRev(w.startRev)) {
		w.mu.Lock()
		if err := resp.Err(); err != nil && ctx.Err() == nil {
			w.watchErr = err
		}
		w.events = append(w.events, resp.Events...)
		w.mu.Unlock()
	}
}

func (w *workload) register(ctx context.Context, c int) {
	defer w.wg.Done()
	for i := 0; ctx.Err() == nil; i++ {
		key := fmt.Sprintf("lin/k%d", (c+i)%4)
		writer := w.e.voters
		if i%3 == 0 {
			writer = w.e.rep
		}
		val := fmt.Sprintf("c%d-%d", c, i)
		octx, cancel := context.WithTimeout(ctx, faultOpTime)
		call := w.now()
		_, err := writer.Put(octx, key, val)
		ret := w.now()
		cancel()
		if err != nil {
			ret = math.MaxInt64 // ambiguous: may take effect at any later time
		}
		w.record(porcupine.Operation{ClientId: c, Input: regInput{Put: true, Key: key, Value: val}, Call: call, Output: regOutput{}, Return: ret}, false)

		octx, cancel = context.WithTimeout(ctx, faultOpTime)
		call = w.now()
		resp, err := w.e.rep.Get(octx, key)
		ret = w.now()
		cancel()
		if err != nil {
			continue
		}
		got := ""
		if len(resp.Kvs) > 0 {
			got = string(resp.Kvs[0].Value)
		}
		w.record(porcupine.Operation{ClientId: c, Input: regInput{Key: key}, Call: call, Output: regOutput{Value: got}, Return: ret}, true)
	}
}

func (w *workload) record(op porcupine.Operation, strongRead bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lin = append(w.lin, op)
	if strongRead {
		w.strongOK++
	}
}

// checkFaultRun checks every guarantee that applies to the run; the
// workload has stopped.
func checkFaultRun(t *testing.T, e *faultEnv, w *workload, fc faultCase, injected, healed int64) {
	t.Helper()
	// Strong reads through the replica: linearizable with every write.
	if res := check(t, w.lin); res != porcupine.Ok {
		t.Errorf("strong reads through the replica: porcupine says %s over %d operations", res, len(w.lin))
	}

	// Bounded reads: never older than the bound, by the writer's own
	// acknowledgements: the store that answers has every write acknowledged
	// before call − bound. (Revisions, not counter values: a write that
	// timed out at a paused member may still be applied later, after
	// higher values.)
	violations := 0
	for _, b := range w.bounded {
		var need int64
		for _, a := range w.acks {
			if a.at <= b.call-int64(boundedBound) {
				need = max(need, a.rev)
			}
		}
		if b.rev < need {
			if violations < 5 {
				t.Errorf("bounded read at %v answered at revision %d; revision %d was acknowledged more than %v before", time.Duration(b.call), b.rev, need, boundedBound)
			}
			violations++
		}
	}

	if violations > 0 {
		keepLogs(t, e)
	}

	// The voters: quorum and writes untouched by a replica's fault.
	if !fc.touchesVoters && len(w.voterWriteErr) > 0 {
		t.Errorf("%d writes through the voters failed during a replica fault, first: %v", len(w.voterWriteErr), w.voterWriteErr[0])
	}
	checkQuorum(t, e)
	checkWatch(t, e, w)
	t.Logf("checked: %d register operations (%d strong reads), %d bounded reads, %d counter writes, %d watch events; fault from %v to %v",
		len(w.lin), w.strongOK, len(w.bounded), len(w.acks), len(w.events), time.Duration(injected), time.Duration(healed))
}

func checkQuorum(t *testing.T, e *faultEnv) {
	t.Helper()
	harness.WaitFor(t, time.Minute, "the voters agree on a leader and take writes", func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ml, err := e.voters.MemberList(ctx)
		if err != nil {
			return false, err
		}
		voters := 0
		for _, m := range ml.Members {
			if !m.IsLearner {
				voters++
			}
		}
		want := 4 // 3 voters and the replica
		if e.hub != nil {
			want++
		}
		if voters != 3 || len(ml.Members) != want {
			return false, fmt.Errorf("%d members, %d voters; want the 3 voters and %d replicas", len(ml.Members), voters, want-3)
		}
		_, err = e.voters.Put(ctx, "fault/quorum-check", "ok")
		return err == nil, err
	})
}

// checkWatch waits for the replica's watch to reach the voters' revision,
// then requires it to equal the voters' own history of the prefix: same
// events, same order, no gap, no duplicate.
func checkWatch(t *testing.T, e *faultEnv, w *workload) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	last, err := e.voters.Get(ctx, "fault/quorum-check")
	if err != nil {
		t.Fatalf("voters' revision: %v", err)
	}
	target := last.Header.Revision
	// The replica's watch ran until stop; read the rest of the history
	// through the replica from where it stopped, with a new watch, as a
	// client resuming would.
	got := append([]*clientv3.Event(nil), w.events...)
	if w.watchErr != nil {
		t.Errorf("the replica's watch failed: %v", w.watchErr)
	}
	from := w.startRev
	if len(got) > 0 {
		from = got[len(got)-1].Kv.ModRevision + 1
	}
	got = append(got, collect(t, e.rep, from, target)...)
	want := collect(t, e.voters, w.startRev, target)
	if len(want) == 0 {
		t.Fatal("the voters' history of the prefix is empty: the workload wrote nothing")
	}
	if err := sameEvents(got, want); err != nil {
		t.Errorf("the replica's watch (%d events) differs from the voters' history (%d): %v", len(got), len(want), err)
	}
}

// collect watches prefix from rev through cli until it has the event at
// target (a write under the prefix).
func collect(t *testing.T, cli *clientv3.Client, rev, target int64) []*clientv3.Event {
	t.Helper()
	if rev > target {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var evs []*clientv3.Event
	for resp := range cli.Watch(ctx, watchPrefix, clientv3.WithPrefix(), clientv3.WithRev(rev)) {
		if err := resp.Err(); err != nil {
			t.Fatalf("watch from %d: %v", rev, err)
		}
		evs = append(evs, resp.Events...)
		if len(evs) > 0 && evs[len(evs)-1].Kv.ModRevision >= target {
			return evs
		}
	}
	t.Fatalf("watch from %d did not reach revision %d within a minute", rev, target)
	return nil
}

func sameEvents(got, want []*clientv3.Event) error {
	seen := map[int64]bool{}
	for i, ev := range got {
		if seen[ev.Kv.ModRevision] {
			return fmt.Errorf("event %d: revision %d delivered twice", i, ev.Kv.ModRevision)
		}
		seen[ev.Kv.ModRevision] = true
		if i > 0 && ev.Kv.ModRevision <= got[i-1].Kv.ModRevision {
			return fmt.Errorf("event %d: revision %d after %d (out of order)", i, ev.Kv.ModRevision, got[i-1].Kv.ModRevision)
		}
	}
	for i := range min(len(got), len(want)) {
		g, w := got[i], want[i]
		if g.Type != w.Type || g.Kv.ModRevision != w.Kv.ModRevision || string(g.Kv.Key) != string(w.Kv.Key) || string(g.Kv.Value) != string(w.Kv.Value) {
			return fmt.Errorf("event %d: got %s %s=%q@%d, want %s %s=%q@%d (a gap or a wrong event)", i,
				g.Type, g.Kv.Key, g.Kv.Value, g.Kv.ModRevision, w.Type, w.Kv.Key, w.Kv.Value, w.Kv.ModRevision)
		}
	}
	if len(got) != len(want) {
		return errors.New("the histories have different lengths")
	}
	return nil
}

// keepLogs copies every process's log of a failed run where it outlives
// the test's temporary directories, and says where.
func keepLogs(t *testing.T, e *faultEnv) {
	t.Helper()
	dir, err := os.MkdirTemp("", "understudy-fault-logs-")
	if err != nil {
		return
	}
	procs := []*harness.Proc{e.r.Proc}
	for _, m := range e.c.Members {
		procs = append(procs, m.Proc)
	}
	for _, p := range procs {
		_ = os.WriteFile(filepath.Join(dir, p.Name()+".log"), []byte(p.Log()), 0o644)
	}
	t.Logf("process logs kept in %s", dir)
}
