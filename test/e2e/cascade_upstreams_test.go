package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/test/harness"
)

// followWithin is how soon a cascaded replica must serve from a live
// upstream once the one it had is lost (issue 59).
const followWithin = 10 * time.Second

// An upstream that accepts connections and never answers (a blackholed
// proxy) costs a cascaded replica one timeout, never its store: it serves
// from the live one within followWithin, whether the dead one is listed
// first from the start, dies while the replica follows the other and then
// that one restarts, or dies while the replica follows it. While it
// follows none, its /readyz fails and says why.
func TestCascadedReplicaSkipsAnUpstreamThatDoesNotAnswer(t *testing.T) {
	timed(t)
	// Timed: it bounds how soon the replica serves again (followWithin).
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 1})
	voters := client(t, c.Endpoints()...)
	l1 := startReplica(t, bins, c, "l1", replicaOpts{})
	l2 := startReplica(t, bins, c, "l2", replicaOpts{})

	t.Run("dead,live", func(t *testing.T) {
		dead := harness.NewProxy(t, strings.TrimPrefix(l2.ClientURL, "http://"))
		dead.Blackhole()
		cr := cascaded(t, c, "c-dead-live", []string{dead.URL(), l1.ClientURL})
		servesWithin(t, voters, cr, "dead-live", time.Now(), followWithin)
	})

	t.Run("live,dead-later", func(t *testing.T) {
		p2 := harness.NewProxy(t, strings.TrimPrefix(l2.ClientURL, "http://"))
		cr := cascaded(t, c, "c-live-dead", []string{l1.ClientURL, p2.URL()})
		servesWithin(t, voters, cr, "live-dead/before", time.Now(), followWithin)
		p2.Blackhole() // lost for good
		l1.Kill()
		// While l1 is down and l2 silent, the replica follows no upstream:
		// /readyz says so.
		said := ""
		harness.WaitFor(t, 30*time.Second, "/readyz of the replica fails, naming its upstreams", func() (bool, error) {
			code, body := httpGet(cr.ClientURL + "/readyz?verbose")
			if code == http.StatusServiceUnavailable && strings.Contains(body, "[-]upstream failed") && strings.Contains(body, p2.URL()) {
				said = body
				return true, nil
			}
			return false, fmt.Errorf("%d %s", code, body)
		})
		t.Logf("/readyz while no upstream answers:\n%s", said)
		l1.Restart(t)
		l1.WaitServing(t, time.Minute)
		servesWithin(t, voters, cr, "live-dead/after", time.Now(), followWithin)
	})

	t.Run("followed,dies", func(t *testing.T) {
		p1 := harness.NewProxy(t, strings.TrimPrefix(l1.ClientURL, "http://"))
		cr := cascaded(t, c, "c-followed-dies", []string{p1.URL(), l2.ClientURL})
		servesWithin(t, voters, cr, "followed/before", time.Now(), followWithin)
		p1.Blackhole()
		servesWithin(t, voters, cr, "followed/after", time.Now(), followWithin)
	})
}

// servesWithin puts key through the voters and waits until a strong read
// through r returns it, within d of since.
func servesWithin(t *testing.T, voters *clientv3.Client, r *harness.Replica, key string, since time.Time, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	put, err := voters.Put(ctx, key, "v")
	if err != nil {
		t.Fatal(err)
	}
	cli := client(t, r.ClientURL)
	var served time.Duration
	harness.WaitFor(t, time.Minute, r.Name+" serves "+key, func() (bool, error) {
		rctx, rcancel := context.WithTimeout(ctx, time.Second)
		defer rcancel()
		resp, err := cli.Get(rctx, key)
		if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].ModRevision != put.Header.Revision {
			return false, err
		}
		served = time.Since(since)
		return true, nil
	})
	t.Logf("%s: a strong read through %s returned %s %v after", key, r.Name, key, served.Round(10*time.Millisecond))
	if served > d {
		t.Errorf("%s: a strong read through %s returned %s only %v after; want within %v", key, r.Name, key, served.Round(10*time.Millisecond), d)
	}
}

// A cascaded replica cut from its upstream while the source wrote and
// compacted past it, whose other upstream is gone: once the cut heals it
// cannot follow either (one compacted past what it needs, one down), so it
// bootstraps again within followWithin, and once it has noticed the cut
// its /readyz never says ready while its store lacks what the source wrote.
func TestCascadedReplicaBootstrapsAgainPastACompactionGap(t *testing.T) {
	timed(t)
	// Timed: it bounds how soon the replica serves again (followWithin),
	// and a readiness change.
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 1})
	voters := client(t, c.Endpoints()...)
	l1 := startReplica(t, bins, c, "l1", replicaOpts{})
	l2 := startReplica(t, bins, c, "l2", replicaOpts{})
	p1 := harness.NewProxy(t, strings.TrimPrefix(l1.ClientURL, "http://"))
	cr := cascaded(t, c, "c1", []string{p1.URL(), l2.ClientURL})
	servesWithin(t, voters, cr, "before", time.Now(), followWithin)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	l2.Kill() // gone for good: a connection refused at once
	p1.Blackhole()
	var last *clientv3.PutResponse
	for i := range 50 {
		resp, err := voters.Put(ctx, fmt.Sprintf("gap/%d", i), "v")
		if err != nil {
			t.Fatal(err)
		}
		last = resp
	}
	if _, err := voters.Compact(ctx, last.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	// Once it has noticed the cut (its /readyz failed), /readyz never says
	// ready again until its store holds what the source wrote (before it
	// noticed, it is as ready as its silence timeout allows).
	cli := client(t, cr.ClientURL)
	readyWithout := 0
	probe := func() (has bool, err error) {
		code, body := httpGet(cr.ClientURL + "/readyz?verbose")
		rctx, rcancel := context.WithTimeout(ctx, time.Second)
		defer rcancel()
		resp, err := cli.Get(rctx, "gap/49", clientv3.WithSerializable())
		has = err == nil && len(resp.Kvs) == 1
		if code == http.StatusOK && !has {
			readyWithout++
			t.Logf("/readyz 200 while the store lacks gap/49 (%v):\n%s", err, body)
		}
		return has, err
	}
	// Cut off: not ready, and says why.
	harness.WaitFor(t, 30*time.Second, "/readyz fails while the replica follows no upstream", func() (bool, error) {
		code, body := httpGet(cr.ClientURL + "/readyz?verbose")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "[-]upstream failed"), fmt.Errorf("%d %s", code, body)
	})
	p1.Heal()
	since := time.Now()
	var holds time.Duration
	harness.WaitFor(t, time.Minute, "the cascaded replica holds the writes past the gap", func() (bool, error) {
		has, err := probe()
		if has {
			holds = time.Since(since)
		}
		return has, err
	})
	t.Logf("held the writes past the gap %v after the cut healed", holds.Round(10*time.Millisecond))
	if holds > followWithin {
		t.Errorf("the cascaded replica held the writes past the gap %v after the cut healed; want within %v", holds.Round(10*time.Millisecond), followWithin)
	}
	if readyWithout > 0 {
		t.Errorf("/readyz said ready %d times while the store lacked the source's writes", readyWithout)
	}
	if n := metric(t, cr.ClientURL, "understudy_cascade_bootstraps_total"); n < 2 {
		t.Errorf("understudy_cascade_bootstraps_total %v, want 2 or more (bootstrapped again past the gap)", n)
	}
	servesWithin(t, voters, cr, "after", time.Now(), followWithin)
}
