package e2e

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"

	"github.com/understudy-kv/understudy/test/harness"
)

// The cascaded tier's faults (issue 59): what operators and networks do to
// the upstreams of cascaded replicas. Each runs against a fresh cluster of
// one voter, two learner replicas l1 and l2 (each behind a proxy), a
// cascaded replica c1 fed by both and c2 fed by c1, under a workload of
// writes through the voters and strong reads through c1 and c2; and
// checks that every strong read was linearizable (porcupine, with a
// restore as a write of the backup's values), that both serve again within
// followWithin once the fault has healed, and that each holds a voter's
// keyspace, at one revision.

type cascadeEnv struct {
	t      *testing.T
	bins   *harness.Bins
	c      *harness.Cluster
	token  string
	l1, l2 *harness.Replica
	p1, p2 *harness.Proxy
	c1, c2 *harness.Replica
	voters *clientv3.Client
	w      *cascadeWorkload
}

type cascadeFault struct {
	name   string
	inject func(e *cascadeEnv, rng *rand.Rand) (heal func())
}

var cascadeFaultCases = []cascadeFault{
	// l2 lost for good (blackholed: it accepts connections, answers
	// nothing), and l1 killed and restarted meanwhile.
	{name: "cascade-upstream-lost-for-good", inject: func(e *cascadeEnv, _ *rand.Rand) func() {
		e.p2.Blackhole()
		e.l1.Kill()
		return func() {
			e.l1.Restart(e.t)
			e.l1.WaitServing(e.t, 2*time.Minute)
		}
	}},
	// c1 paused and cut from l1 while the source writes and compacts past
	// it, l2 gone for good (refusing at once): c1 must bootstrap again from
	// l1, and c2 below it too.
	{name: "cascade-compaction-past-a-paused-replica", inject: func(e *cascadeEnv, _ *rand.Rand) func() {
		signal(e.t, e.c1.Proc, syscall.SIGSTOP)
		e.p1.Blackhole()
		e.l2.Kill()
		return func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			resp, err := e.voters.Put(ctx, "fault/compact-here", "v")
			if err != nil {
				e.t.Fatalf("a put to compact at: %v", err)
			}
			if _, err := e.voters.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
				e.t.Fatalf("compact: %v", err)
			}
			e.p1.Heal()
			signal(e.t, e.c1.Proc, syscall.SIGCONT)
		}
	}},
	// The voters restored from a backup taken through l1 when the fault
	// began (with a new cluster token or the old one, drawn), l1 and l2
	// rejoined: everything written since the backup is lost. The writers
	// pause from the restore until both copies served reads after it, so
	// that the restored cluster stays behind what they hold meanwhile.
	{name: "cascade-voters-restored", inject: func(e *cascadeEnv, rng *rand.Rand) func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		snap := filepath.Join(e.t.TempDir(), "backup.db")
		saveSnapshot(ctx, e.t, client(e.t, e.l1.ClientURL), snap)
		newToken := rng.IntN(2) == 0
		return func() {
			e.w.restore(e.t, e, snap, newToken)
		}
	}},
}

// snapshotRevision is the revision of the snapshot file at path.
func snapshotRevision(path string) (int64, error) {
	st, err := snapshot.NewV3(zap.NewNop()).Status(path)
	return st.Revision, err
}

func runCascadeFault(t *testing.T, fc cascadeFault, rng *rand.Rand, fixed bool) {
	bins := harness.Binaries(t)
	e := &cascadeEnv{t: t, bins: bins, token: fmt.Sprintf("cascade-fault-%d", time.Now().UnixNano())}
	e.c = harness.StartCluster(t, harness.ClusterConfig{N: 1, Token: e.token})
	e.voters = client(t, e.c.Endpoints()...)
	e.l1 = startReplica(t, bins, e.c, "l1", replicaOpts{})
	e.l2 = startReplica(t, bins, e.c, "l2", replicaOpts{})
	e.p1 = harness.NewProxy(t, strings.TrimPrefix(e.l1.ClientURL, "http://"))
	e.p2 = harness.NewProxy(t, strings.TrimPrefix(e.l2.ClientURL, "http://"))
	e.c1 = cascaded(t, e.c, "c1", []string{e.p1.URL(), e.p2.URL()})
	e.c2 = cascaded(t, e.c, "c2", []string{e.c1.ClientURL})

	before, during, after := time.Second, 4*time.Second, time.Second
	if !fixed {
		before = time.Duration(500+rng.IntN(2500)) * time.Millisecond
		during = time.Duration(1000+rng.IntN(6000)) * time.Millisecond
		after = time.Duration(500+rng.IntN(2500)) * time.Millisecond
	}
	t.Logf("fault %s: after %v, for %v, then %v more", fc.name, before, during, after)
	e.w = startCascadeWorkload(t, e)
	e.w.waitReads(t, 20)
	hold(before)
	heal := fc.inject(e, rng)
	hold(during)
	heal()
	healed := time.Now()
	for _, r := range []*harness.Replica{e.c1, e.c2} {
		// Beside other tests: many times the few seconds it takes
		// (TestCascadedReplicaSkipsAnUpstreamThatDoesNotAnswer holds the
		// tight bound, alone).
		servesWithin(t, e.voters, r, "fault/healed-"+r.Name, healed, 3*followWithin)
	}
	hold(after)
	e.w.stop()
	t.Logf("%d operations, strong reads served: %v", len(e.w.ops), e.w.served)
	if res := check(t, e.w.ops); res != porcupine.Ok {
		t.Errorf("strong reads through the cascaded replicas: porcupine says %s over %d operations, want Ok", res, len(e.w.ops))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	last, err := e.voters.Put(ctx, "fault/last", "v")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*harness.Replica{e.c1, e.c2} {
		waitHolds(t, ctx, r, last.Header.Revision)
		sameKeyspace(t, ctx, e.voters, client(t, r.ClientURL), last.Header.Revision)
	}
}

// cascadeWorkload writes registers through the voters and reads them
// strongly through c1 and c2, recording every operation for porcupine.
type cascadeWorkload struct {
	start  time.Time
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	ops    []porcupine.Operation
	served map[string]int
	// voters is the writers' client, replaced across a restore; paused
	// holds the writers (resume closes it).
	voters *clientv3.Client
	paused chan struct{}
}

const cascadeKeys = 3

func (w *cascadeWorkload) now() int64 { return int64(time.Since(w.start)) }

func (w *cascadeWorkload) record(op porcupine.Operation, reader string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ops = append(w.ops, op)
	if reader != "" {
		w.served[reader]++
	}
}

func startCascadeWorkload(t *testing.T, e *cascadeEnv) *cascadeWorkload {
	ctx, cancel := context.WithCancel(context.Background())
	w := &cascadeWorkload{start: time.Now(), cancel: cancel, served: map[string]int{}, voters: e.voters}
	for i := range 2 {
		w.wg.Add(1)
		go w.writer(ctx, i)
	}
	for i, r := range []*harness.Replica{e.c1, e.c2, e.c1, e.c2} {
		w.wg.Add(1)
		go w.reader(ctx, 10+i, r.Name, client(t, r.ClientURL))
	}
	return w
}

func (w *cascadeWorkload) writer(ctx context.Context, id int) {
	defer w.wg.Done()
	for i := 0; ctx.Err() == nil; i++ {
		key, val := fmt.Sprintf("fault/k%d", (id+i)%cascadeKeys), fmt.Sprintf("w%d-%d", id, i)
		w.mu.Lock()
		voters, paused := w.voters, w.paused
		w.mu.Unlock()
		if paused != nil {
			select {
			case <-ctx.Done():
				return
			case <-paused:
			}
		}
		pctx, cancel := context.WithTimeout(ctx, faultOpTime)
		call := w.now()
		_, err := voters.Put(pctx, key, val)
		ret := w.now()
		cancel()
		if err != nil {
			ret = math.MaxInt64 // ambiguous: it may take effect later, or never
		}
		w.record(porcupine.Operation{ClientId: id, Input: regInput{Put: true, Key: key, Value: val}, Call: call, Output: regOutput{}, Return: ret}, "")
		if err != nil {
			pace(ctx)
		}
	}
}

func (w *cascadeWorkload) reader(ctx context.Context, id int, name string, cli *clientv3.Client) {
	defer w.wg.Done()
	for i := 0; ctx.Err() == nil; i++ {
		key := fmt.Sprintf("fault/k%d", i%cascadeKeys)
		rctx, cancel := context.WithTimeout(ctx, faultOpTime)
		call := w.now()
		resp, err := cli.Get(rctx, key)
		ret := w.now()
		cancel()
		if err != nil {
			pace(ctx) // a failed read observed nothing
			continue
		}
		got := ""
		if len(resp.Kvs) > 0 {
			got = string(resp.Kvs[0].Value)
		}
		w.record(porcupine.Operation{ClientId: id, Input: regInput{Key: key}, Call: call, Output: regOutput{Value: got}, Return: ret}, name)
	}
}

// pace spaces a failing client's attempts: not a synchronisation.
func pace(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(50 * time.Millisecond):
	}
}

func (w *cascadeWorkload) waitReads(t *testing.T, n int) {
	t.Helper()
	harness.WaitFor(t, time.Minute, fmt.Sprintf("%d strong reads through each cascaded replica", n), func() (bool, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.served["c1"] >= n && w.served["c2"] >= n, nil
	})
}

func (w *cascadeWorkload) stop() {
	w.cancel()
	w.wg.Wait()
}

// restore restores the voters from snap as docs/operations.md says, the
// learner replicas rejoining, and records it as a write of the backup's
// value of every key, between the voters' stop and the restored cluster's
// first write.
func (w *cascadeWorkload) restore(t *testing.T, e *cascadeEnv, snap string, newToken bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	st, err := snapshotRevision(snap)
	if err != nil {
		t.Fatal(err)
	}
	backup := map[string]string{}
	for k := range cascadeKeys {
		key := fmt.Sprintf("fault/k%d", k)
		resp, err := e.voters.Get(ctx, key, clientv3.WithRev(st))
		if err != nil {
			t.Fatalf("the backup's value of %s (revision %d): %v", key, st, err)
		}
		if len(resp.Kvs) > 0 {
			backup[key] = string(resp.Kvs[0].Value)
		}
	}
	resume := make(chan struct{})
	w.mu.Lock()
	w.paused = resume
	w.mu.Unlock()
	call := w.now()
	e.l1.Stop()
	e.l2.Stop()
	token := e.token
	if newToken {
		token = fmt.Sprintf("restored-%d", time.Now().UnixNano())
	}
	t.Logf("restoring the voters from the backup at revision %d (new cluster token: %v)", st, newToken)
	restoreVoters(t, e.c, snap, token, 0)
	voters := client(t, e.c.Endpoints()...)
	harness.WaitFor(t, time.Minute, "the restored cluster takes a write", func() (bool, error) {
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		defer pcancel()
		_, err := voters.Put(pctx, "fault/restored", "yes")
		return err == nil, err
	})
	ret := w.now()
	for k := range cascadeKeys {
		key := fmt.Sprintf("fault/k%d", k)
		w.record(porcupine.Operation{ClientId: 100 + k, Input: regInput{Put: true, Key: key, Value: backup[key]}, Call: call, Output: regOutput{}, Return: ret}, "")
	}
	w.mu.Lock()
	w.voters = voters
	w.mu.Unlock()
	e.voters = voters
	id := clusterID(t, ctx, voters)
	for _, l := range []*harness.Replica{e.l1, e.l2} {
		l.RestartWithArgs(t, append(l.Args(), fmt.Sprintf("--replace-stale-data-dir=%x", id)))
	}
	for _, l := range []*harness.Replica{e.l1, e.l2} {
		l.WaitServing(t, 2*time.Minute)
	}
	// Reads through both copies while the restored cluster is behind
	// what they held (a fixed window if they serve none: not fatal).
	w.mu.Lock()
	c1, c2 := w.served["c1"], w.served["c2"]
	w.mu.Unlock()
	waitUntil(20*time.Second, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.served["c1"] >= c1+20 && w.served["c2"] >= c2+20
	})
	w.mu.Lock()
	w.paused = nil
	w.mu.Unlock()
	close(resume)
}
