package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/understudy-kv/understudy/test/harness"
)

// cascaded starts a cascaded replica of c fed by upstreams.
func cascaded(t *testing.T, c *harness.Cluster, name string, upstreams []string, extra ...string) *harness.Replica {
	t.Helper()
	return harness.StartReplica(t, c, harness.ReplicaConfig{Name: name, Upstream: upstreams, Extra: extra})
}

// A cascaded replica serves what its upstream replica copies, with the
// source's revisions: strong reads see a write acknowledged by the voters,
// a write through it is read back from it at once, and a watch on it
// delivers the source's events at the source's revisions, and its progress
// notifications at --watch-progress-notify-interval (Kubernetes' bookmarks).
func TestCascadedReplicaServes(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	voters := client(t, c.Endpoints()...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i := range 10 {
		if _, err := voters.Put(ctx, fmt.Sprintf("k%d", i), "before"); err != nil {
			t.Fatal(err)
		}
	}
	r := startReplica(t, bins, c, "r1", replicaOpts{})
	cr := cascaded(t, c, "c1", []string{r.ClientURL}, "--watch-progress-notify-interval=1s", "--max-txn-ops=2", "--max-request-bytes=4096")
	cc := client(t, cr.ClientURL)
	checkFrontLimits(ctx, t, cc, client(t, r.ClientURL))

	wch := cc.Watch(ctx, "w/", clientv3.WithPrefix())
	pch := cc.Watch(ctx, "p/", clientv3.WithPrefix(), clientv3.WithProgressNotify())
	put, err := voters.Put(ctx, "w/a", "1")
	if err != nil {
		t.Fatal(err)
	}
	got, err := cc.Get(ctx, "w/a")
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "1" || got.Kvs[0].ModRevision != put.Header.Revision {
		t.Fatalf("strong read through the cascaded replica after a put acknowledged at revision %d: %v (%v)", put.Header.Revision, got.Kvs, err)
	}
	own, err := cc.Put(ctx, "w/b", "2")
	if err != nil {
		t.Fatalf("put through the cascaded replica: %v", err)
	}
	weak, err := cc.Get(ctx, "w/b", clientv3.WithSerializable())
	if err != nil || len(weak.Kvs) != 1 || weak.Kvs[0].ModRevision != own.Header.Revision {
		t.Fatalf("weak read of its own write through the cascaded replica: %v (%v), want revision %d", weak.Kvs, err, own.Header.Revision)
	}
	want := []int64{put.Header.Revision, own.Header.Revision}
	for i := 0; i < len(want); {
		select {
		case resp := <-wch:
			for _, ev := range resp.Events {
				if ev.Kv.ModRevision != want[i] {
					t.Fatalf("watch event %d at revision %d, want %d", i, ev.Kv.ModRevision, want[i])
				}
				i++
			}
		case <-ctx.Done():
			t.Fatalf("watch: %d of %d events", i, len(want))
		}
	}
	// etcd's default interval is 10 minutes: a notification within 30 s
	// is the flag's.
	pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
	defer pcancel()
	select {
	case resp := <-pch:
		if !resp.IsProgressNotify() || resp.Header.Revision < own.Header.Revision {
			t.Fatalf("a watch that asked for progress notifications got %+v first; want a progress notification at revision ≥ %d", resp, own.Header.Revision)
		}
	case <-pctx.Done():
		t.Fatalf("no progress notification within 30 s with --watch-progress-notify-interval=1s")
	}
	old, err := cc.Get(ctx, "k3")
	if err != nil || len(old.Kvs) != 1 || string(old.Kvs[0].Value) != "before" {
		t.Fatalf("a key from the bootstrap snapshot: %v (%v)", old.Kvs, err)
	}

	// replica status shows it, fed by r1, caught up; endpoint status
	// answers with the source cluster's ID, as a non-voter.
	out, err := exec.CommandContext(ctx, bins.Replica, "status", "-w", "json", "--endpoints", c.Endpoints()[0], "--cascaded", cr.ClientURL).Output()
	if err != nil {
		t.Fatalf("replica status --cascaded: %v", err)
	}
	var rows []struct {
		Cascaded  bool   `json:"cascaded"`
		Upstreams string `json:"upstream_chain"`
		Revision  int64  `json:"revision"`
	}
	if err := json.Unmarshal(out, &rows); err != nil {
		t.Fatal(err)
	}
	r1ID, _ := memberID(t, voters, r.ClientURL)
	found := false
	for _, row := range rows {
		if row.Cascaded {
			found = true
			if !strings.Contains(row.Upstreams, fmt.Sprintf("%x", r1ID)) || row.Revision < own.Header.Revision {
				t.Errorf("replica status: cascaded row %+v; want its chain through r1 (%x) and revision ≥ %d", row, r1ID, own.Header.Revision)
			}
		}
	}
	if !found {
		t.Errorf("replica status --cascaded shows no cascaded row:\n%s", out)
	}
	st, err := cc.Status(ctx, cr.ClientURL)
	vst, verr := voters.Status(ctx, c.Endpoints()[0])
	if err != nil || verr != nil || st.Header.ClusterId != vst.Header.ClusterId || !st.IsLearner || st.Leader != vst.Leader || st.DbSizeQuota != vst.DbSizeQuota {
		t.Errorf("endpoint status of the cascaded replica: %+v (%v); want the source's cluster ID %x, leader %x and quota %d, as a non-voter", st, err, vst.Header.ClusterId, vst.Leader, vst.DbSizeQuota)
	}
}

// checkFrontLimits: a front started with --max-txn-ops=2 and
// --max-request-bytes=4096 (cc) refuses what a voter with those flags
// refuses, though its store takes any source revision and the learner
// replica it forwards to (dflt, etcd's defaults) takes the same requests.
func checkFrontLimits(ctx context.Context, t *testing.T, cc, dflt *clientv3.Client) {
	t.Helper()
	reads := []clientv3.Op{clientv3.OpGet("k1"), clientv3.OpGet("k2"), clientv3.OpGet("k3")}
	if _, err := cc.Txn(ctx).Then(reads...).Commit(); !errors.Is(err, rpctypes.ErrTooManyOps) {
		t.Errorf("a txn of 3 reads with --max-txn-ops=2: %v, want %v", err, rpctypes.ErrTooManyOps)
	}
	if _, err := cc.Txn(ctx).Then(reads[:2]...).Commit(); err != nil {
		t.Errorf("a txn of 2 reads with --max-txn-ops=2: %v", err)
	}
	// Writes are forwarded, and checked first, as a member checks its own
	// proposals whatever the leader's limits.
	puts := []clientv3.Op{clientv3.OpPut("t1", "1"), clientv3.OpPut("t2", "2"), clientv3.OpPut("t3", "3")}
	if _, err := cc.Txn(ctx).Then(puts...).Commit(); !errors.Is(err, rpctypes.ErrTooManyOps) {
		t.Errorf("a txn of 3 puts with --max-txn-ops=2: %v, want %v", err, rpctypes.ErrTooManyOps)
	}
	if _, err := cc.Put(ctx, "five", strings.Repeat("x", 5<<10)); !errors.Is(err, rpctypes.ErrRequestTooLarge) {
		t.Errorf("a put of 5 KiB with --max-request-bytes=4096: %v, want %v", err, rpctypes.ErrRequestTooLarge)
	}
	// gRPC takes etcd's overhead (512 KiB) on top of --max-request-bytes.
	big := strings.Repeat("x", 600<<10)
	if _, err := cc.Put(ctx, "big", big); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a put of 600 KiB with --max-request-bytes=4096: %v, want ResourceExhausted", err)
	}
	if _, err := dflt.Txn(ctx).Then(puts...).Commit(); err != nil {
		t.Errorf("the same txn through a replica with etcd's 128: %v", err)
	}
	put, err := dflt.Put(ctx, "big", big)
	if err != nil {
		t.Fatalf("the same put through a replica with etcd's 1.5 MiB: %v", err)
	}
	// The store applies a source revision larger than its front takes.
	got, err := cc.Get(ctx, "big")
	if err != nil || len(got.Kvs) != 1 || len(got.Kvs[0].Value) != len(big) || got.Kvs[0].ModRevision != put.Header.Revision {
		t.Errorf("the 600 KiB value read back through the front that refused it: %d keys (%v), want it at revision %d", len(got.Kvs), err, put.Header.Revision)
	}
}

// A local apply broken on purpose (a test build of the replica,
// harness.BrokenApplyReplica: a wrong value written for one key) is found by the check after the revision:
// the cascaded replica never serves the wrong value, stops serving, and
// serves again, the right value, once it has bootstrapped anew.
func TestCascadedReplicaNeverServesADivergedStore(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	voters := client(t, c.Endpoints()...)
	r := startReplica(t, bins, c, "r1", replicaOpts{})
	cr := harness.StartReplica(t, c, harness.ReplicaConfig{Name: "c1", Upstream: []string{r.ClientURL},
		Bin: harness.BrokenApplyReplica(t), Extra: []string{"--break-apply-key=bad"}})
	cc := client(t, cr.ClientURL)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := voters.Put(ctx, "bad", "right"); err != nil {
		t.Fatal(err)
	}
	// Until it serves the right value, every read of the key fails or
	// returns nothing older: never the broken value.
	harness.WaitFor(t, time.Minute, "the cascaded replica serves the right value again", func() (bool, error) {
		for _, opts := range [][]clientv3.OpOption{nil, {clientv3.WithSerializable()}} {
			rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
			resp, err := cc.Get(rctx, "bad", opts...)
			rcancel()
			if err != nil {
				return false, err
			}
			if len(resp.Kvs) == 1 && string(resp.Kvs[0].Value) != "right" {
				t.Fatalf("the cascaded replica served %q for a key whose apply it broke", resp.Kvs[0].Value)
			}
			if len(resp.Kvs) == 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if !strings.Contains(cr.Log(), "diverged") {
		t.Errorf("the replica's log does not say the store diverged:\n%s", tailLines(cr.Log(), 20))
	}
	if n := metric(t, cr.ClientURL, "understudy_cascade_divergences_total"); n != 0 {
		t.Logf("divergences counted before the bootstrap: %v", n)
	}
	if n := metric(t, cr.ClientURL, "understudy_cascade_bootstraps_total"); n < 2 {
		t.Errorf("understudy_cascade_bootstraps_total %v, want 2 or more (the first, and one after the divergence)", n)
	}
}

// Bad --upstream input is refused with an error naming the flag: with
// --join; an upstream that is not etcd; upstreams of two clusters; an
// upstream that is this replica; a stock etcd learner (it serves no watch).
func TestCascadedReplicaBadInput(t *testing.T) {
	beside(t)
	harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 1})
	other := harness.StartCluster(t, harness.ClusterConfig{N: 1})
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("hello")) }))
	t.Cleanup(web.Close)
	own := harness.URL(harness.FreePort(t))
	stockLearner, _, _ := harness.StartStockLearner(t, c, "stock-learner", false)
	for _, tc := range []struct {
		name     string
		upstream []string
		extra    []string
		want     []string
	}{
		{"with-join", []string{c.Endpoints()[0]}, []string{"--join", c.Endpoints()[0]}, []string{"--upstream and --join"}},
		{"not-etcd", []string{web.URL}, nil, []string{"--upstream " + web.URL, "not an etcd client URL"}},
		{"two-clusters", []string{c.Endpoints()[0], other.Endpoints()[0]}, nil, []string{"--upstream", "of one cluster", other.Endpoints()[0], c.Endpoints()[0]}},
		{"itself", []string{own}, []string{"--listen-client-urls", own}, []string{"--upstream " + own, "this replica's own client URL"}},
		{"role", []string{c.Endpoints()[0]}, []string{"--role", "standby"}, []string{"--role standby with --upstream"}},
		{"stock-learner", []string{stockLearner}, nil, []string{"--upstream", stockLearner, "stock etcd learner", "a replica's client URL"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := harness.StartReplica(t, c, harness.ReplicaConfig{Name: "c-" + tc.name, Upstream: tc.upstream, NoWait: true,
				Extra: append([]string{"--join-timeout", "20s"}, tc.extra...)})
			mustContain(t, exitsWithin(t, r, 30*time.Second), tc.want...)
		})
	}
}

// 100 watchers on a cascaded replica fed by two learner replicas, while
// the upstream it follows is killed: every watcher sees exactly the events
// a watcher on the leader sees, in order, none lost or repeated, and the
// replica resumes from the other upstream within 2 s of the kill.
func TestCascadedReplicaWatchersThroughAnUpstreamKill(t *testing.T) {
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	voters := client(t, c.Endpoints()...)
	r1 := startReplica(t, bins, c, "r1", replicaOpts{})
	r2 := startReplica(t, bins, c, "r2", replicaOpts{})
	cr := cascaded(t, c, "c1", []string{r1.ClientURL, r2.ClientURL})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start, err := voters.Get(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	from := start.Header.Revision + 1

	type seen struct {
		revs []int64
		at   []time.Time
	}
	collect := func(cli *clientv3.Client, n int) []*seen {
		out := make([]*seen, n)
		for i := range out {
			s := &seen{}
			out[i] = s
			ch := cli.Watch(ctx, "w/", clientv3.WithPrefix(), clientv3.WithRev(from))
			go func() {
				for resp := range ch {
					for _, ev := range resp.Events {
						s.revs = append(s.revs, ev.Kv.ModRevision)
						s.at = append(s.at, time.Now())
					}
				}
			}()
		}
		return out
	}
	leader := collect(voters, 1)[0]
	var watchers []*seen
	for range 4 {
		watchers = append(watchers, collect(client(t, cr.ClientURL), 25)...)
	}

	const n = 400
	var killedAt time.Time
	var killRev int64
	for i := range n {
		resp, err := voters.Put(ctx, fmt.Sprintf("w/%03d", i), "v")
		if err != nil {
			t.Fatal(err)
		}
		if i == n/4 {
			killedAt, killRev = time.Now(), resp.Header.Revision
			r1.Kill()
		}
		time.Sleep(10 * time.Millisecond) // a writer's pace, not a synchronisation
	}
	harness.WaitFor(t, time.Minute, "every watcher has every event", func() (bool, error) {
		for _, w := range append(watchers, leader) {
			if len(w.revs) < n {
				return false, fmt.Errorf("a watcher has %d of %d", len(w.revs), n)
			}
		}
		return true, nil
	})
	cancel()
	for i, w := range watchers {
		if fmt.Sprint(w.revs) != fmt.Sprint(leader.revs) {
			t.Fatalf("watcher %d on the cascaded replica saw other events than the leader's watcher:\n%v\n%v", i, w.revs, leader.revs)
		}
	}
	// The first event written after the kill, at the cascaded replica.
	var resumed time.Duration
	for i, rev := range watchers[0].revs {
		if rev > killRev {
			resumed = watchers[0].at[i].Sub(killedAt)
			break
		}
	}
	t.Logf("the first event after the kill reached the cascaded replica's watchers %v after it", resumed.Round(time.Millisecond))
	if resumed > 2*time.Second {
		t.Errorf("the cascaded replica resumed from the other upstream %v after the kill, want within 2 s", resumed)
	}
	if n := metric(t, cr.ClientURL, "understudy_cascade_upstream_switches_total"); n < 1 {
		t.Errorf("no upstream switch counted")
	}
}

// Cascaded replicas nobody reads from let their upstream go quiet, and stay
// ready and on it while the cluster writes nothing: their
// upkeep (the watch, progress requests, compaction checks, their own
// background rounds) is no client demand (wire.BackgroundKey); and their
// background rounds are answered from the upstream's own last round
// (understudy_cascade_aged_rounds_total), so they cost it, and the leader,
// no round of their own. One tier further down, a reader's upkeep that its
// cascaded upstream cannot answer from its last round (older than the
// reader's period) makes that upstream do a round: upkeep still, so the
// learner replica asked stays quiet too (it went to a round a second: the
// upstream's round, with a read waiting, was taken for a client's). A
// strong read through a cascaded replica wakes the chain above it.
func TestCascadedReplicasLetTheirUpstreamGoQuiet(t *testing.T) {
	timed(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	quiet := []string{"--freshness-quiet-interval", "3s"}
	r := startReplica(t, bins, c, "r1", replicaOpts{Extra: quiet})
	var crs []*harness.Replica
	for i := range 2 {
		// A readiness bound under the quiet period: the ready gauge must
		// allow for the upstream proof's age (readindex.ProofLag).
		crs = append(crs, cascaded(t, c, fmt.Sprintf("c%d", i+1), []string{r.ClientURL}, append([]string{"--ready-max-staleness", "2s"}, quiet...)...))
	}
	leaf := cascaded(t, c, "c3", []string{crs[0].ClientURL}, append([]string{"--ready-max-staleness", "2s"}, quiet...)...)
	period := func(url string) float64 {
		v, _ := harness.MustScrape(t, url+"/metrics").Value("understudy_replica_freshness_period_seconds")
		return v
	}
	allQuiet := func() (bool, error) {
		for _, u := range []string{r.ClientURL, crs[0].ClientURL, crs[1].ClientURL, leaf.ClientURL} {
			if p := period(u); p != 3 {
				return false, fmt.Errorf("%s: rounds every %vs", u, p)
			}
		}
		return true, nil
	}
	harness.WaitFor(t, 30*time.Second, "the upstream and its cascaded replicas quiet", allQuiet)
	rounds := func(url string) float64 { return metric(t, url, "understudy_replica_freshness_round_seconds_count") }
	aged := func() float64 {
		return metric(t, crs[0].ClientURL, "understudy_cascade_aged_rounds_total") + metric(t, crs[1].ClientURL, "understudy_cascade_aged_rounds_total")
	}
	switches := func() float64 {
		return metric(t, crs[0].ClientURL, "understudy_cascade_upstream_switches_total") + metric(t, crs[1].ClientURL, "understudy_cascade_upstream_switches_total")
	}
	// Rounds of c1 and c2 not answered from the upstream's last: each is
	// one of the upstream's.
	notAged := func() float64 { return rounds(crs[0].ClientURL) + rounds(crs[1].ClientURL) - aged() }
	// Bounded reads that waited for a round of the upstream's: c1's and
	// c2's auth confirmations (a bounded read of 1 s) while c3 calls c1,
	// and their upkeep asked when the upstream's last round was older
	// than their period.
	waits := func() float64 { return metric(t, r.ClientURL, "understudy_replica_bounded_read_waits_total") }
	upstream0, aged0, notAged0, waits0, switches0, start := rounds(r.ClientURL), aged(), notAged(), waits(), switches(), time.Now()
	// Held quiet over several compaction checks (every 5 s) and rounds.
	deadline := time.Now().Add(12 * time.Second)
	for time.Now().Before(deadline) {
		if ok, err := allQuiet(); !ok {
			t.Fatalf("woke without a client: %v", err)
		}
		for _, cr := range crs {
			if v := metric(t, cr.ClientURL, "understudy_replica_ready"); v != 1 {
				t.Fatalf("%s: understudy_replica_ready %v while quiet, fresh as of %.1fs ago", cr.ClientURL, v, metric(t, cr.ClientURL, "understudy_replica_freshness_age_seconds"))
			}
		}
		time.Sleep(500 * time.Millisecond) // sampling, not synchronisation
	}
	// 12 s at one round per 3 s: about 4 each. Each cascaded replica's
	// upkeep round used to be a round of the upstream's with the leader:
	// about 12 in all.
	// A cluster that writes nothing answers no watch progress request
	// (etcd's progressIfSync): the cascaded replicas must not take that
	// for a lost upstream (they did, every 2 s, unready half the time).
	if n := switches() - switches0; n != 0 {
		t.Errorf("the cascaded replicas left their upstream %v times while it was quiet and the cluster wrote nothing", n)
	}
	periods := time.Since(start).Seconds() / 3
	upstream, byAge, forBelow, waited := rounds(r.ClientURL)-upstream0, aged()-aged0, notAged()-notAged0, waits()-waits0
	t.Logf("in %.1f quiet periods: the upstream did %.0f rounds, %.0f bounded reads waited for one; the cascaded replicas %.0f answered from its last and %.0f not (for c3's upkeep)", periods, upstream, waited, byAge, forBelow)
	if byAge < 2*(periods-2) {
		t.Errorf("the cascaded replicas' upkeep was answered from the upstream's last round %.0f times in %.1f periods, want about %.0f", byAge, periods, 2*periods)
	}
	// Its rounds: its own, one a period, one for each of c1's rounds for
	// c3's upkeep (c1's last proof older than c3's period: at most one a
	// period), and at most one for each bounded read that waited; a
	// round a second (woken) would be about 12.
	if forBelow > periods+1 {
		t.Errorf("c1 and c2 did %.0f rounds not answered from their upstream's last in %.1f quiet periods, want at most one a period (c3's upkeep)", forBelow, periods)
	}
	if upstream > periods+forBelow+waited+1 {
		t.Errorf("the upstream did %.0f rounds in %.1f quiet periods, %.0f for c1's and c2's rounds, %.0f bounded reads waiting: its cascaded replicas' upkeep costs it rounds", upstream, periods, forBelow, waited)
	}
	for _, cr := range crs {
		// Fresh within two periods and a round: its own period and its
		// upstream's proof's age.
		if age := metric(t, cr.ClientURL, "understudy_replica_freshness_age_seconds"); age > 7 {
			t.Errorf("%s: fresh as of %.1fs ago, quiet, want within two quiet periods (6s) and a round", cr.ClientURL, age)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := client(t, crs[0].ClientURL).Get(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if p := period(crs[0].ClientURL); p == 3 {
		t.Errorf("a strong read did not wake the cascaded replica (rounds every %vs)", p)
	}
	if p := period(r.ClientURL); p == 3 {
		t.Errorf("a strong read through a cascaded replica did not wake its upstream (rounds every %vs)", p)
	}
}
