package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/mirror"
	"github.com/understudy-kv/understudy/test/harness"
)

// mirrorPair is a source and a destination cluster, one member each.
type mirrorPair struct {
	bins     *harness.Bins
	src, dst *harness.Cluster
	s, d     *clientv3.Client
	// destURL, if set, is where the mirror reaches the destination (a
	// proxy); the test itself always talks to it directly.
	destURL string
	// sourceURL, if set, is where the mirror reaches the source (a
	// replica of it); verify and the test read the source's voters.
	sourceURL string
}

func startMirrorPair(t *testing.T) *mirrorPair {
	t.Helper()
	return startMirrorPairOf(t, 1)
}

// startMirrorPairOf is startMirrorPair with a source of n voters.
func startMirrorPairOf(t *testing.T, n int) *mirrorPair {
	t.Helper()
	return startMirrorPairWith(t, n, nil, nil)
}

// startMirrorPairWith is startMirrorPairOf with extra etcd flags for the
// source's voters and for the destination's.
func startMirrorPairWith(t *testing.T, n int, srcArgs, dstArgs []string) *mirrorPair {
	t.Helper()
	bins := harness.Binaries(t)
	harness.Must(t, bins.RequireReplica())
	p := &mirrorPair{bins: bins}
	p.src = harness.StartCluster(t, harness.ClusterConfig{N: n, Token: "source", ExtraArgs: srcArgs})
	p.dst = harness.StartCluster(t, harness.ClusterConfig{N: 1, Token: "dest", ExtraArgs: dstArgs})
	p.s, p.d = p.src.Client(t), p.dst.Client(t)
	return p
}

func (p *mirrorPair) args(extra ...string) []string {
	dest := p.dst.Endpoints()[0]
	if p.destURL != "" {
		dest = p.destURL
	}
	src := p.src.Endpoints()[0]
	if p.sourceURL != "" {
		src = p.sourceURL
	}
	return append([]string{"mirror", "--source-endpoints", src, "--dest-endpoints", dest, "--progress-interval", "200ms"}, extra...)
}

// proxyDest puts a proxy between the mirror and the destination.
func (p *mirrorPair) proxyDest(t *testing.T) *harness.Proxy {
	t.Helper()
	px := harness.NewProxy(t, strings.TrimPrefix(p.dst.Endpoints()[0], "http://"))
	p.destURL = px.URL()
	return px
}

func (p *mirrorPair) start(t *testing.T, extra ...string) *harness.Proc {
	t.Helper()
	return harness.Start(t, harness.ProcConfig{Name: "mirror", Bin: p.bins.Replica, Args: p.args(extra...)})
}

// verify runs `replica mirror verify` and returns its exit code and output.
func (p *mirrorPair) verify(t *testing.T, extra ...string) (int, string) {
	t.Helper()
	args := append([]string{"mirror", "verify", "--source-endpoints", p.src.Endpoints()[0], "--dest-endpoints", p.dst.Endpoints()[0]}, extra...)
	out, err := exec.Command(p.bins.Replica, args...).CombinedOutput()
	if err == nil {
		return 0, string(out)
	}
	var ee *exec.ExitError
	if !asExitError(err, &ee) {
		t.Fatalf("replica mirror verify: %v", err)
	}
	return ee.ExitCode(), string(out)
}

func (p *mirrorPair) checkpoint(t *testing.T, name string) *mirror.Checkpoint {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cp, _, err := mirror.ReadCheckpoint(ctx, p.d, name)
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// head is the source's revision now.
func (p *mirrorPair) head(t *testing.T) int64 {
	t.Helper()
	return head(t, p.s)
}

// waitCaughtUp waits until the mirror's checkpoint has the source's
// revision as of now.
func (p *mirrorPair) waitCaughtUp(t *testing.T, name string) {
	t.Helper()
	head := p.head(t)
	harness.WaitFor(t, 2*time.Minute, fmt.Sprintf("mirror %s caught up with source revision %d", name, head), func() (bool, error) {
		cp := p.checkpoint(t, name)
		return cp != nil && cp.Phase == mirror.PhaseStream && cp.Revision >= head, nil
	})
}

// fill puts n keys prefix000000… with values v0…
func fill(t *testing.T, cli *clientv3.Client, prefix string, n int) {
	t.Helper()
	harness.Fill(t, cli, n, func(i int) (string, string) { return fmt.Sprintf("%s%06d", prefix, i), "v" + strconv.Itoa(i) })
}

// churn makes n random puts and deletes among keys prefix000000…(space).
func churn(t *testing.T, cli *clientv3.Client, rng *rand.Rand, prefix string, n, space int) {
	t.Helper()
	for i := range n {
		k := fmt.Sprintf("%s%06d", prefix, rng.IntN(space))
		var err error
		if rng.IntN(3) == 0 {
			_, err = cli.Delete(context.Background(), k)
		} else {
			_, err = cli.Put(context.Background(), k, "c"+strconv.Itoa(i))
		}
		if err != nil {
			t.Fatalf("churn: %v", err)
		}
	}
}

func mustVerify(t *testing.T, p *mirrorPair, extra ...string) {
	t.Helper()
	if code, out := p.verify(t, extra...); code != 0 {
		t.Fatalf("verify exited %d:\n%s", code, out)
	}
}

func TestMirrorSyncsThenStreams(t *testing.T) {
	beside(t)
	p := startMirrorPair(t)
	fill(t, p.s, "m/", 100000)
	// A destination key the source never had: the sync deletes it, as
	// --prune asks.
	if _, err := p.d.Put(context.Background(), "m/stray", "x"); err != nil {
		t.Fatal(err)
	}
	proc := p.start(t, "--prefix", "m/", "--prune")
	p.waitCaughtUp(t, "default")
	rng := rand.New(rand.NewPCG(1, 2))
	churn(t, p.s, rng, "m/", 10000, 120000)

	// A key on a lease gets a destination lease, and goes when it does.
	lease, err := p.s.Grant(context.Background(), 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.s.Put(context.Background(), "m/leased", "x", clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	p.waitCaughtUp(t, "default")
	mustVerify(t, p, "--prefix", "m/")
	got, err := p.d.Get(context.Background(), "m/leased")
	if err != nil || len(got.Kvs) != 1 || got.Kvs[0].Lease == 0 {
		t.Fatalf("leased key in destination: %v, %v; want it on a lease", got, err)
	}
	if _, err := p.s.Revoke(context.Background(), lease.ID); err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, 30*time.Second, "leased key gone from the destination", func() (bool, error) {
		r, err := p.d.Get(context.Background(), "m/leased")
		return err == nil && len(r.Kvs) == 0, err
	})
	if r, _ := p.d.Get(context.Background(), "m/stray"); len(r.Kvs) != 0 {
		t.Fatal("the destination key the source never had survived the sync")
	}

	// verify is not vacuous: a destination change shows.
	proc.Stop()
	if _, err := p.d.Put(context.Background(), "m/000007", "tampered"); err != nil {
		t.Fatal(err)
	}
	code, out := p.verify(t, "--prefix", "m/")
	if code != 1 || !strings.Contains(out, `value differs: "m/000007"`) {
		t.Fatalf("verify after tampering: exit %d, output:\n%s\nwant exit 1 naming m/000007", code, out)
	}
}

func TestMirrorSurvivesKills(t *testing.T) {
	beside(t)
	p := startMirrorPair(t)
	fill(t, p.s, "k/", 100000)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 7))

	// A writer keeps changing the source throughout.
	ctx, cancel := context.WithCancel(context.Background())
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		wr := rand.New(rand.NewPCG(uint64(seed), 8))
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ctx.Err() == nil; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			k := fmt.Sprintf("k/%06d", wr.IntN(110000))
			if wr.IntN(3) == 0 {
				p.s.Delete(ctx, k)
			} else {
				p.s.Put(ctx, k, "w"+strconv.Itoa(i))
			}
		}
	}()

	proc := p.start(t, "--prefix", "k/", "--page-size", "500")
	var prev *mirror.Checkpoint
	sawSync, sawStream := 0, 0
	for kill := range 10 {
		// Let the mirror make 1 to 5 checkpoints of progress, then kill
		// it: the first five kills land during the full sync, the rest
		// once it streams.
		streaming := kill >= 5
		for range 1 + rng.IntN(5) {
			before := prev
			harness.WaitFor(t, 2*time.Minute, "mirror progress", func() (bool, error) {
				cp := p.checkpoint(t, "default")
				if cp == nil || (before != nil && cp.Updated.Equal(before.Updated)) || (streaming && cp.Phase != mirror.PhaseStream) {
					return false, nil
				}
				prev = cp
				return true, nil
			})
		}
		if prev.Phase == mirror.PhaseSync {
			sawSync++
		} else {
			sawStream++
		}
		t.Logf("kill %d during %s at revision %d (%s)", kill+1, prev.Phase, prev.Revision, prev.SyncedThrough)
		proc.Kill()
		proc.Restart(t)
	}
	t.Logf("kills during sync: %d, during streaming: %d", sawSync, sawStream)
	cancel()
	<-writerDone
	p.waitCaughtUp(t, "default")
	mustVerify(t, p, "--prefix", "k/")
	checkChain(t, p)
	if sawSync == 0 || sawStream != 5 {
		t.Fatalf("kills during sync %d, during streaming %d: want some during the sync and 5 while streaming", sawSync, sawStream)
	}
}

// checkChain reads every version of the checkpoint and checks that the
// streamed revisions form one chain: each write covers From..Revision with
// From right after the previous Revision, so no revision was applied twice
// or skipped.
func checkChain(t *testing.T, p *mirrorPair) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	last, err := p.d.Get(ctx, mirror.CheckpointKey("default"))
	if err != nil || len(last.Kvs) == 0 {
		t.Fatalf("checkpoint: %v", err)
	}
	wch := p.d.Watch(ctx, mirror.CheckpointKey("default"), clientv3.WithRev(1))
	var prev *mirror.Checkpoint
	versions := 0
	for resp := range wch {
		if err := resp.Err(); err != nil {
			t.Fatal(err)
		}
		for _, ev := range resp.Events {
			var cp mirror.Checkpoint
			if err := json.Unmarshal(ev.Kv.Value, &cp); err != nil {
				t.Fatal(err)
			}
			versions++
			if prev != nil && prev.Phase == mirror.PhaseStream && cp.Phase == mirror.PhaseStream && cp.Revision != prev.Revision {
				if cp.From != prev.Revision+1 || cp.Revision < cp.From {
					t.Fatalf("checkpoint covers %d..%d after %d: revisions applied twice or skipped", cp.From, cp.Revision, prev.Revision)
				}
			}
			if prev != nil && prev.Phase == mirror.PhaseStream && cp.Phase == mirror.PhaseStream && cp.Revision < prev.Revision {
				t.Fatalf("checkpoint went back from %d to %d", prev.Revision, cp.Revision)
			}
			prev = &cp
			if ev.Kv.ModRevision >= last.Kvs[0].ModRevision {
				t.Logf("%d checkpoint versions chain", versions)
				return
			}
		}
	}
	t.Fatal("watch of the checkpoint ended early")
}

func TestMirrorDeletesWhatWasDeletedWhileDown(t *testing.T) {
	beside(t)
	p := startMirrorPair(t)
	fill(t, p.s, "d/", 1000)
	proc := p.start(t, "--prefix", "d/")
	p.waitCaughtUp(t, "default")
	proc.Kill()
	if _, err := p.s.Delete(context.Background(), "d/0001", clientv3.WithPrefix()); err != nil { // d/000100…d/000199
		t.Fatal(err)
	}
	if _, err := p.s.Put(context.Background(), "d/new", "n"); err != nil {
		t.Fatal(err)
	}
	proc.Restart(t)
	p.waitCaughtUp(t, "default")
	r, err := p.d.Get(context.Background(), "d/0001", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || r.Count != 0 {
		t.Fatalf("keys deleted while the mirror was down: %d left in the destination (%v)", r.Count, err)
	}
	mustVerify(t, p, "--prefix", "d/")
}

func TestMirrorResyncsAfterCompaction(t *testing.T) {
	beside(t)
	p := startMirrorPair(t)
	fill(t, p.s, "c/", 1000)
	proc := p.start(t, "--prefix", "c/")
	p.waitCaughtUp(t, "default")
	proc.Kill()
	before := p.checkpoint(t, "default")
	if _, err := p.s.Delete(context.Background(), "c/0002", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	churn(t, p.s, rand.New(rand.NewPCG(3, 4)), "c/", 200, 1100)
	if _, err := p.s.Compact(context.Background(), p.head(t)); err != nil {
		t.Fatal(err)
	}
	proc.Restart(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := proc.WaitLog(ctx, "compacted past the checkpoint"); err != nil {
		t.Fatalf("the mirror did not say it resyncs: %v", err)
	}
	p.waitCaughtUp(t, "default")
	if after := p.checkpoint(t, "default"); after.Resyncs != before.Resyncs+1 {
		t.Fatalf("checkpoint resyncs %d, want %d", after.Resyncs, before.Resyncs+1)
	}
	mustVerify(t, p, "--prefix", "c/")
}

func TestMirrorRevKeepsTheDestPrefix(t *testing.T) {
	beside(t)
	p := startMirrorPair(t)
	if _, err := p.s.Put(context.Background(), "a/before", "1"); err != nil {
		t.Fatal(err)
	}
	from := p.head(t) + 1
	for i := range 10 {
		if _, err := p.s.Put(context.Background(), "a/"+strconv.Itoa(i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	p.start(t, "--prefix", "a/", "--dest-prefix", "b/", "--rev", strconv.FormatInt(from, 10))
	p.waitCaughtUp(t, "default")
	all, err := p.d.Get(context.Background(), "\x01", clientv3.WithFromKey())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range all.Kvs {
		keys = append(keys, string(kv.Key))
	}
	if len(keys) != 10 {
		t.Fatalf("destination keys %q: want b/0…b/9 only (nothing before --rev)", keys)
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, "b/") {
			t.Fatalf("destination key %q is not under --dest-prefix b/", k)
		}
	}
}

func TestMirrorRefusesWhatWouldCorruptData(t *testing.T) {
	beside(t)
	p := startMirrorPair(t)
	refused := func(t *testing.T, args []string, want string) {
		t.Helper()
		out, err := exec.Command(p.bins.Replica, args...).CombinedOutput()
		var ee *exec.ExitError
		if !asExitError(err, &ee) || ee.ExitCode() == 0 || !strings.Contains(string(out), want) {
			t.Fatalf("replica %s: %v\n%s\nwant a non-zero exit saying %q", strings.Join(args, " "), err, out, want)
		}
	}
	src := p.src.Endpoints()[0]
	t.Run("same cluster, overlapping prefixes", func(t *testing.T) {
		refused(t, []string{"mirror", "--source-endpoints", src, "--dest-endpoints", src, "--prefix", "a/", "--dest-prefix", "a/b/"}, "same cluster")
	})
	t.Run("a destination prefix another source writes", func(t *testing.T) {
		proc := p.start(t, "--prefix", "x/")
		p.waitCaughtUp(t, "default")
		proc.Stop()
		other := harness.StartCluster(t, harness.ClusterConfig{N: 1, Token: "other"})
		args := []string{"mirror", "--source-endpoints", other.Endpoints()[0], "--dest-endpoints", p.dst.Endpoints()[0], "--prefix", "x/"}
		refused(t, args, "belongs to source cluster")
		refused(t, append(args, "--name", "second"), "overlaps")
	})
}
