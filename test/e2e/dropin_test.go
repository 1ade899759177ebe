package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/understudy-kv/understudy/test/harness"
	"github.com/understudy-kv/understudy/wire"
)

func httpGet(url string) (int, string) { return httpDo(http.MethodGet, url, "") }

// A Kubernetes readiness probe admits a caught-up replica, drops it when its
// raft link is cut (the voters keep theirs), and admits it again after.
func TestReplicaReadyzFollowsItsPeerLink(t *testing.T) {
	timed(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3, PeerProxies: true})
	metrics := harness.URL(harness.FreePort(t))
	r := harness.StartReplica(t, c, harness.ReplicaConfig{Name: "r1", PeerProxy: true, Extra: []string{"--listen-metrics-urls", metrics}})
	harness.Must(t, bins.RequireReplica())

	urls := []string{r.ClientURL + "/readyz?verbose", metrics + "/readyz?verbose"}
	waitAll := func(what string, timeout time.Duration, ok func(code int) bool) {
		t.Helper()
		harness.WaitFor(t, timeout, what, func() (bool, error) {
			for _, u := range urls {
				if code, body := httpGet(u); !ok(code) {
					return false, fmt.Errorf("%s: %d %s", u, code, body)
				}
			}
			return true, nil
		})
	}
	waitAll("a caught-up replica ready on its client and metrics URLs", 30*time.Second, func(code int) bool { return code == http.StatusOK })
	// understudy_replica_ready, the alert's input, says what /readyz says.
	readyGauge := func(want float64, timeout time.Duration) {
		t.Helper()
		harness.WaitFor(t, timeout, fmt.Sprintf("understudy_replica_ready %v", want), func() (bool, error) {
			v := metric(t, metrics, "understudy_replica_ready")
			return v == want, fmt.Errorf("understudy_replica_ready %v", v)
		})
	}
	readyGauge(1, 10*time.Second)

	r.CutPeerLinks(t, c)
	cut := time.Now()
	harness.WaitFor(t, 10*time.Second, "leader contact lost", func() (bool, error) {
		code, body := httpGet(r.ClientURL + "/readyz/leader_contact")
		return code == http.StatusServiceUnavailable, fmt.Errorf("%d %s", code, body)
	})
	t.Logf("leader contact lost %v after the cut", time.Since(cut).Round(100*time.Millisecond))
	waitAll("the cut-off replica not ready", 15*time.Second, func(code int) bool { return code == http.StatusServiceUnavailable })
	t.Logf("not ready %v after the cut", time.Since(cut).Round(100*time.Millisecond))
	readyGauge(0, 10*time.Second)
	if code, body := httpGet(r.ClientURL + "/readyz?verbose"); !strings.Contains(body, "[-]leader_contact failed") {
		t.Errorf("cut-off replica's /readyz: %d %s; want leader_contact named as failed", code, body)
	}
	// The voters' quorum is untouched by the cut.
	vctx, vcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer vcancel()
	if _, err := client(t, c.Endpoints()...).Put(vctx, "during-cut", "v"); err != nil {
		t.Fatalf("write to the voters while the replica is cut off: %v", err)
	}

	r.HealPeerLinks(c)
	waitAll("the replica ready again after the heal", 60*time.Second, func(code int) bool { return code == http.StatusOK })
	readyGauge(1, 10*time.Second)
}

// A replica never runs with a smaller backend quota than a voter's: one
// member over its quota stops writes cluster-wide.
func TestReplicaQuotaFollowsTheVoters(t *testing.T) {
	beside(t)
	const quota = 64 << 20
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3, ExtraArgs: []string{"--quota-backend-bytes", strconv.Itoa(quota)}})
	r := startReplica(t, bins, c, "r1", replicaOpts{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := client(t, r.ClientURL).Status(ctx, r.ClientURL)
	if err != nil {
		t.Fatal(err)
	}
	if st.DbSizeQuota != quota {
		t.Fatalf("replica started without --quota-backend-bytes reports quota %d, want the voters' %d", st.DbSizeQuota, quota)
	}
	out := harness.MustEtcdctl(t, bins, []string{r.ClientURL}, "endpoint", "status", "-w", "json")
	if !strings.Contains(out, `"dbSizeQuota":`+strconv.Itoa(quota)) {
		t.Fatalf("etcdctl endpoint status of the replica: %s; want dbSizeQuota %d", out, quota)
	}

	small := startReplica(t, bins, c, "r2", replicaOpts{NoWait: true, Extra: []string{"--quota-backend-bytes", strconv.Itoa(quota / 2)}})
	wctx, wcancel := context.WithTimeout(context.Background(), time.Minute)
	defer wcancel()
	if code, err := small.Wait(wctx); err != nil || code == 0 {
		t.Fatalf("replica with a quota below the voters': exit %d, %v; want refused", code, err)
	}
	log := small.Log()
	if !strings.Contains(log, "--quota-backend-bytes") || !strings.Contains(log, strconv.Itoa(quota)) {
		t.Fatalf("refusal does not name the flag and the voters' quota:\n%s", harnessTail(log))
	}
	mctx, mcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer mcancel()
	ml, err := client(t, c.Endpoints()...).MemberList(mctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ml.Members) != 4 {
		t.Fatalf("%d members after the refused replica, want 3 voters and r1: the refusal must come before joining", len(ml.Members))
	}
}

// Voters restarted one at a time with a larger quota: while any voter
// keeps the old quota, that voter stops the cluster's writes no later than
// the replica would, and the replica stays. Once every voter's quota is
// larger, the learner stops (with an error naming the smallest voter's
// quota and what to do) before it can pass its own quota and stop the
// cluster's writes; started again, it takes the voters' new quota.
func TestReplicaStopsWhenEveryVoterQuotaPassesIt(t *testing.T) {
	beside(t)
	const quota, raised = 64 << 20, 128 << 20
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3, ExtraArgs: []string{"--quota-backend-bytes", strconv.Itoa(quota)}})
	r := startReplica(t, bins, c, "r1", replicaOpts{Extra: []string{"--quota-check-interval", "300ms"}})
	if got := replicaQuota(t, r.ClientURL); got != quota {
		t.Fatalf("replica quota %d, want the voters' %d", got, quota)
	}
	raise := func(v *harness.Member) {
		args := v.Proc.Args()
		for i := range args[:len(args)-1] {
			if args[i] == "--quota-backend-bytes" {
				args[i+1] = strconv.Itoa(raised)
			}
		}
		v.Proc.RestartWithArgs(t, args)
		harness.WaitFor(t, time.Minute, "voter "+v.Name+" reports the raised quota", func() (bool, error) {
			st, err := c.Status(v)
			return err == nil && st.DbSizeQuota == raised, err
		})
	}
	// checks is how many checks had the outcome, as long as the replica
	// runs.
	checks := func(outcome string) float64 {
		if r.Exited() {
			t.Fatalf("the replica stopped while a voter may keep the old quota:\n%s", harnessTail(r.Log()))
		}
		return metric(t, r.ClientURL, "understudy_replica_quota_checks_total", "outcome="+outcome)
	}
	stays := func(outcome, after string) {
		n := checks(outcome)
		harness.WaitFor(t, 30*time.Second, "three quota checks ("+outcome+") after "+after, func() (bool, error) {
			return checks(outcome) >= n+3, nil
		})
	}
	for _, v := range c.Members[:2] {
		raise(v)
		stays("ok", v.Name+"'s raise")
	}
	// The one voter left with the old quota is down: the voters that
	// answer all have a larger one, but the replica does not stop on
	// what it cannot see.
	last := c.Members[2]
	last.Proc.Kill()
	stays("partial", last.Name+" went down")
	raise(last)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if code, err := r.Wait(ctx); err != nil || code == 0 {
		t.Fatalf("replica after every voter's quota passed its own: exit %d, %v; want it stopped with an error", code, err)
	}
	log := r.Log()
	if !strings.Contains(log, "voter m1's "+strconv.Itoa(raised)) || !strings.Contains(log, "start it again to take the voters' quota") {
		t.Fatalf("the replica's stop does not name the smallest voter's quota %d and what to do:\n%s", raised, harnessTail(log))
	}
	// Nothing else changed: the learner is still a member, and writes go on.
	if _, err := client(t, c.Endpoints()...).Put(ctx, "after", "x"); err != nil {
		t.Fatalf("write after the replica stopped: %v", err)
	}
	r.Restart(t)
	r.WaitServing(t, 2*time.Minute)
	if got := replicaQuota(t, r.ClientURL); got != raised {
		t.Fatalf("replica started again: quota %d, want the voters' %d", got, raised)
	}
}

// replicaQuota is the backend quota the replica at url reports in Status.
func replicaQuota(t *testing.T, url string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := client(t, url).Status(ctx, url)
	if err != nil {
		t.Fatalf("status of %s: %v", url, err)
	}
	return st.DbSizeQuota
}

// With --client-cert-auth, a client's certificate CN is its user, through
// the replica as through a voter; an anonymous client cannot defragment.
func TestReplicaCertificateCNIsTheUser(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	certs := harness.NewCerts(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3, TLS: certs})
	r := startReplica(t, bins, c, "r1", replicaOpts{})
	v := c.Endpoints()[:1]
	etcdctl := func(eps []string, args ...string) (string, error) {
		return harness.Etcdctl(t, bins, eps, append(certs.EtcdctlFlags(), args...)...)
	}
	for _, args := range authSetup {
		if out, err := etcdctl(v, args...); err != nil {
			t.Fatalf("etcdctl %v: %v %s", args, err, out)
		}
	}
	cert, key := harness.ClientCert(t, certs, "alice")
	tlsCfg, err := transport.TLSInfo{CertFile: cert, KeyFile: key, TrustedCAFile: certs.CA}.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range []string{c.Members[1].ClientURL, r.ClientURL} {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, TLS: tlsCfg, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		resp, err := cli.Get(ctx, "pub/a")
		if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "1" {
			t.Errorf("%s: alice (by certificate) reading pub/a: %v %v", ep, resp, err)
		}
		if _, err := cli.Get(ctx, "secret/a"); err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("%s: alice (by certificate) reading secret/a: %v, want permission denied", ep, err)
		}
		if _, err := cli.Defragment(ctx, ep); err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("%s: alice (by certificate) defragmenting: %v, want permission denied", ep, err)
		}
		cancel()
		cli.Close()
		// HTTP shares the TLS port, as on a voter.
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}, Timeout: 10 * time.Second}
		hresp, err := hc.Get(ep + "/version")
		if err != nil {
			t.Errorf("%s/version over https: %v", ep, err)
			continue
		}
		body, _ := io.ReadAll(hresp.Body)
		hresp.Body.Close()
		if hresp.StatusCode != http.StatusOK || !strings.Contains(string(body), "etcdserver") {
			t.Errorf("%s/version over https: %d %s", ep, hresp.StatusCode, body)
		}
	}
}

// A bounded read with no deadline of its own, against a replica cut off
// from the leader, fails with Unavailable within the request timeout
// rather than wait forever or answer staler than its bound.
func TestReplicaBoundedReadWithoutDeadlineFailsWhenCutOff(t *testing.T) {
	timed(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3, PeerProxies: true})
	r := harness.StartReplica(t, c, harness.ReplicaConfig{Name: "r1", PeerProxy: true})
	rep := client(t, r.ClientURL)
	bounded := metadata.AppendToOutgoingContext(context.Background(), wire.MaxStalenessKey, "200ms")
	if _, err := rep.Get(bounded, "k", clientv3.WithSerializable()); err != nil {
		t.Fatalf("bounded read of a connected replica: %v", err)
	}
	r.CutPeerLinks(t, c)
	defer r.HealPeerLinks(c)
	// Let the replica's freshness age past the bound: wait until the
	// replica says so itself (a weak read answers locally all along).
	harness.WaitFor(t, 30*time.Second, "freshness older than the bound", func() (bool, error) {
		_, body := httpGet(r.ClientURL + "/readyz/freshness")
		return strings.Contains(body, "failed"), errors.New(body)
	})
	// A plain gRPC client: clientv3 would retry Unavailable on a
	// serializable read (as it does a voter's "request timed out"), which
	// is the client's policy, not the replica's answer.
	conn, err := grpc.NewClient(strings.TrimPrefix(r.ClientURL, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	done := make(chan error, 1)
	go func() {
		_, err := pb.NewKVClient(conn).Range(bounded, &pb.RangeRequest{Key: []byte("k"), Serializable: true}) // no deadline
		done <- err
	}()
	select {
	case err := <-done:
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("bounded read without a deadline, cut off: %v, want Unavailable", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("bounded read without a deadline still waiting after a minute, cut off")
	}
}

// Leader contact comes from raft's own traffic, not from freshness rounds:
// a replica with rounds 10s apart keeps require-leader streams (watches,
// lease keep-alives) open. Had contact come from the rounds alone, the
// streams would end a few seconds after a round (no leader for three
// election timeouts), long before the next: within the 20 s watched.
func TestReplicaSlowFreshnessKeepsLeaderStreams(t *testing.T) {
	timed(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	r := startReplica(t, bins, c, "r1", replicaOpts{Extra: []string{"--freshness-interval", "10s"}})
	rep := client(t, r.ClientURL)
	voters := client(t, c.Endpoints()...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watch := rep.Watch(clientv3.WithRequireLeader(ctx), "tick")
	gctx, gcancel := context.WithTimeout(ctx, 10*time.Second)
	lease, err := rep.Grant(gctx, 10)
	gcancel()
	if err != nil {
		t.Fatal(err)
	}
	alive, err := rep.KeepAlive(ctx, lease.ID) // clientv3 sends keep-alives require-leader
	if err != nil {
		t.Fatal(err)
	}
	end := time.Now().Add(20 * time.Second)
	ticks, keepAlives := 0, 0
	put := time.NewTicker(time.Second)
	defer put.Stop()
	for time.Now().Before(end) {
		select {
		case <-put.C:
			pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := voters.Put(pctx, "tick", strconv.Itoa(ticks))
			pcancel()
			if err != nil {
				t.Fatalf("put: %v", err)
			}
		case resp, ok := <-watch:
			if !ok || resp.Err() != nil {
				t.Fatalf("require-leader watch ended after %d events: %v", ticks, resp.Err())
			}
			ticks += len(resp.Events)
		case ka, ok := <-alive:
			if !ok {
				t.Fatalf("lease keep-alive ended after %d answers", keepAlives)
			}
			if ka.TTL <= 0 {
				t.Fatalf("keep-alive answered TTL %d", ka.TTL)
			}
			keepAlives++
		}
	}
	if ticks < 16 || keepAlives < 4 {
		t.Fatalf("over 20 s: %d watch events (want ≥ 16 of ~20 puts), %d keep-alive answers (want ≥ 4: one every TTL/3)", ticks, keepAlives)
	}
}
