package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/understudy-kv/understudy/test/harness"
)

// Whom a replica started with --read-index-via trusts (docs/trust-model.md):
// a hub that is not a member of its cluster, by its own member list, is
// never used; a member hub whose index the replica cannot reach, or that
// answers slowly, is dropped for a back-off; the hub's endpoint follows the
// cluster's auth.

const readIndexPath = "/understudy/v1/readindex"

// hubAnswer is a hub's answer on readIndexPath.
type hubAnswer struct {
	Cluster string `json:"cluster"`
	Member  string `json:"member"`
	Term    uint64 `json:"term,string"`
	Index   uint64 `json:"index,string"`
	Nonce   string `json:"nonce"`
}

// clusterOf returns the cluster ID, the leader's member ID and the term, as
// the voters answer them.
func clusterOf(t *testing.T, voters *clientv3.Client) (cluster, leader, term uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := voters.Status(ctx, voters.Endpoints()[0])
	if err != nil {
		t.Fatal(err)
	}
	return st.Header.ClusterId, st.Leader, st.RaftTerm
}

func hex(id uint64) string { return strconv.FormatUint(id, 16) }

// A fake hub in the test process, answering index 1 with the cluster's ID,
// its leader's member ID and term, while the replica's raft links are cut:
// not one strong read and not one bounded read past its bound is served
// from the replica's old state, and its freshness does not move.
func TestHubTrustFakeHubWithCutLinks(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	harness.Must(t, bins.RequireReplica())
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3, PeerProxies: true})
	voters := client(t, c.Endpoints()...)
	cluster, leader, term := clusterOf(t, voters)
	var asked atomic.Int64
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		_ = json.NewEncoder(w).Encode(hubAnswer{Cluster: hex(cluster), Member: hex(leader), Term: term + 1, Index: 1, Nonce: r.URL.Query().Get("nonce")})
	}))
	t.Cleanup(fake.Close)
	r := harness.StartReplica(t, c, harness.ReplicaConfig{Name: "r1", PeerProxy: true,
		Extra: []string{"--read-index-via", fake.URL, "--max-staleness", "100ms"}})
	checkNoStaleReadsWhenCut(t, c, r, voters)
	if n := asked.Load(); n != 0 {
		t.Errorf("the fake hub was asked %d times; it is at no member's client URL", n)
	}
	if n := metric(t, r.ClientURL, "understudy_replica_read_index_via_rejections_total", "reason=not_member"); n == 0 {
		t.Errorf("no not_member rejection counted")
	}
}

// A hub of a second cluster whose answers carry this cluster's ID (as every
// cluster started with etcd's default peer URL and token has the same ID;
// here a proxy rewrites the ID) is never used either: its URL is no member's
// of the replica's cluster.
func TestHubTrustHubOfAnotherCluster(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	harness.Must(t, bins.RequireReplica())
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3, PeerProxies: true})
	voters := client(t, c.Endpoints()...)
	cluster, _, _ := clusterOf(t, voters)
	other := harness.StartCluster(t, harness.ClusterConfig{N: 1})
	otherHub := harness.StartReplica(t, other, harness.ReplicaConfig{Name: "hub2"})
	var answered atomic.Int64
	proxy := newHubProxy(t, otherHub.ClientURL, func(a *hubAnswer) bool {
		answered.Add(1)
		a.Cluster = hex(cluster)
		return true
	})
	// The proxy answers as the other cluster's hub, with this cluster's ID.
	code, body := httpDo("GET", proxy.URL+readIndexPath, "")
	var a hubAnswer
	if err := json.Unmarshal([]byte(body), &a); code != http.StatusOK || err != nil || a.Cluster != hex(cluster) || a.Index == 0 {
		t.Fatalf("the other cluster's hub through the proxy: %d %s (%v)", code, body, err)
	}
	answered.Store(0)
	r := harness.StartReplica(t, c, harness.ReplicaConfig{Name: "r1", PeerProxy: true,
		Extra: []string{"--read-index-via", proxy.URL, "--max-staleness", "100ms"}})
	checkNoStaleReadsWhenCut(t, c, r, voters)
	if n := answered.Load(); n != 0 {
		t.Errorf("the other cluster's hub was asked %d times", n)
	}
}

// checkNoStaleReadsWhenCut writes x=old, cuts r's raft links, writes x=new
// through the voters, and then requires 100 strong and 100 bounded (100ms,
// --max-staleness) reads through r to fail rather than return x=old, r's
// freshness age to pass the bound, and no round through the hub.
func checkNoStaleReadsWhenCut(t *testing.T, c *harness.Cluster, r *harness.Replica, voters *clientv3.Client) {
	t.Helper()
	rep := client(t, r.ClientURL)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := voters.Put(ctx, "x", "old"); err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, 30*time.Second, "the replica reads x=old", func() (bool, error) {
		gctx, gcancel := context.WithTimeout(ctx, 2*time.Second)
		defer gcancel()
		resp, err := rep.Get(gctx, "x")
		return err == nil && len(resp.Kvs) == 1 && string(resp.Kvs[0].Value) == "old", err
	})
	r.CutPeerLinks(t, c)
	t.Cleanup(func() { r.HealPeerLinks(c) })
	if _, err := voters.Put(ctx, "x", "new"); err != nil {
		t.Fatal(err)
	}
	acked := time.Now()
	harness.WaitFor(t, 10*time.Second, "the replica's freshness age past the 100ms bound", func() (bool, error) {
		age := metric(t, r.ClientURL, "understudy_replica_freshness_age_seconds")
		return age > 0.2, fmt.Errorf("freshness age %vs", age)
	})

	var stale, pastBound, failed, served atomic.Int64
	var wg sync.WaitGroup
	for w := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				for _, serializable := range []bool{false, true} {
					opts := []clientv3.OpOption{}
					if serializable {
						opts = append(opts, clientv3.WithSerializable())
					}
					start := time.Now()
					gctx, gcancel := context.WithTimeout(ctx, 500*time.Millisecond)
					resp, err := rep.Get(gctx, "x", opts...)
					gcancel()
					switch {
					case err != nil:
						failed.Add(1)
					case len(resp.Kvs) == 1 && string(resp.Kvs[0].Value) == "old":
						if !serializable {
							stale.Add(1)
							t.Errorf("worker %d try %d: a strong read returned x=old after x=new was acknowledged", w, i)
						} else if start.Add(-100 * time.Millisecond).After(acked) {
							pastBound.Add(1)
							t.Errorf("worker %d try %d: a bounded read (100ms) returned x=old %v after x=new was acknowledged", w, i, start.Sub(acked))
						}
					default:
						served.Add(1)
					}
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("200 reads with the links cut: %d failed, %d served x=new, %d stale strong, %d bounded past their bound", failed.Load(), served.Load(), stale.Load(), pastBound.Load())
	if via := metric(t, r.ClientURL, "understudy_replica_read_index_rounds_total", "source=via"); via != 0 {
		t.Errorf("%v rounds through the hub, want none", via)
	}
	if code, body := httpDo("GET", r.ClientURL+"/readyz", ""); code == http.StatusOK || !strings.Contains(body, "[-]leader_contact") {
		t.Errorf("/readyz with the links cut: %d\n%s", code, body)
	}
}

// newHubProxy serves readIndexPath by asking hub and passing its answer
// through edit.
func newHubProxy(t *testing.T, hub string, edit func(*hubAnswer) bool) *httptest.Server {
	t.Helper()
	p := httptest.NewServer(hubProxy(hub, edit))
	t.Cleanup(p.Close)
	return p
}

// hubProxy is newHubProxy's handler; edit returning false answers 502.
func hubProxy(hub string, edit func(*hubAnswer) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != readIndexPath {
			http.NotFound(w, r)
			return
		}
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, hub+readIndexPath+"?"+r.URL.RawQuery, nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var a hubAnswer
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &a) != nil {
			w.WriteHeader(resp.StatusCode)
			_, _ = w.Write(body)
			return
		}
		if !edit(&a) {
			http.Error(w, "proxy: no answer", http.StatusBadGateway)
			return
		}
		_ = json.NewEncoder(w).Encode(a)
	})
}

// A member hub (advertising a proxy of the test as its client URL) that
// answers an index the replica never reaches, or answers 150ms late: the
// replica drops it within 2s, serves every strong read meanwhile, and goes
// on with its own rounds.
func TestHubTrustHubFaultsFallBack(t *testing.T) {
	bins := harness.Binaries(t)
	harness.Must(t, bins.RequireReplica())
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	// The proxy's address first, so the hub can advertise it.
	var mode atomic.Value // "pass", "huge" or "late"
	mode.Store("pass")
	proxy := httptest.NewUnstartedServer(nil)
	proxyURL := "http://" + proxy.Listener.Addr().String()
	hub := harness.StartReplica(t, c, harness.ReplicaConfig{Name: "hub", Extra: []string{"--advertise-client-urls", proxyURL}})
	proxy.Config.Handler = hubProxy(hub.ClientURL, func(a *hubAnswer) bool {
		switch mode.Load() {
		case "huge":
			a.Index = 1 << 62
		case "late":
			<-time.After(150 * time.Millisecond) // the fault: a slow hub
		}
		return true
	})
	proxy.Start()
	t.Cleanup(proxy.Close)

	r := harness.StartReplica(t, c, harness.ReplicaConfig{Name: "r1", Extra: []string{"--read-index-via", proxyURL}})
	rep := client(t, r.ClientURL)
	count := func(name string, labels ...string) float64 { return metric(t, r.ClientURL, name, labels...) }
	read := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := rep.Get(ctx, "k")
		return err
	}
	// Through the proxy, the hub is a member at its advertised URL: used.
	harness.WaitFor(t, 30*time.Second, "rounds through the hub", func() (bool, error) {
		err := read()
		return count("understudy_replica_read_index_rounds_total", "source=via") > 0, err
	})

	for _, fault := range []struct{ mode, reason string }{{"huge", "catch_up"}, {"late", "slow"}} {
		harness.WaitFor(t, 10*time.Second, "the hub usable", func() (bool, error) {
			return count("understudy_replica_read_index_via_hubs_avoided") == 0, nil
		})
		own := count("understudy_replica_read_index_rounds_total", "source=own")
		mode.Store(fault.mode)
		stop := make(chan struct{})
		var reads, failed atomic.Int64
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				default:
				}
				reads.Add(1)
				if err := read(); err != nil {
					failed.Add(1)
					t.Errorf("%s hub: strong read failed: %v", fault.mode, err)
				}
			}
		}()
		start := time.Now()
		harness.WaitFor(t, 2*time.Second, fault.mode+" hub dropped", func() (bool, error) {
			return count("understudy_replica_read_index_via_hubs_avoided") == 1 &&
				count("understudy_replica_read_index_via_rejections_total", "reason="+fault.reason) >= 1, nil
		})
		dropped := time.Since(start)
		// Reads go on through own rounds.
		before := reads.Load()
		harness.WaitFor(t, 5*time.Second, "reads after the drop", func() (bool, error) { return reads.Load() > before+5, nil })
		close(stop)
		<-done
		if own2 := count("understudy_replica_read_index_rounds_total", "source=own"); own2 <= own {
			t.Errorf("%s hub: no own rounds after it (%v, then %v)", fault.mode, own, own2)
		}
		t.Logf("%s hub: dropped after %v; %d strong reads, %d failed", fault.mode, dropped.Round(time.Millisecond), reads.Load(), failed.Load())
		if !strings.Contains(r.Log(), `"reason":"`+fault.reason+`"`) {
			t.Errorf("%s hub: no log line with reason %s", fault.mode, fault.reason)
		}
		mode.Store("pass")
	}
}

// With auth on, the hub's endpoint refuses anonymous clients and admits a
// user's token; a replica with --user still obtains its read indexes from
// the hub.
func TestHubTrustAuth(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	harness.Must(t, bins.RequireReplica())
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	hub := harness.StartReplica(t, c, harness.ReplicaConfig{Name: "hub"})
	r := harness.StartReplica(t, c, harness.ReplicaConfig{Name: "r1", Extra: []string{"--read-index-via", hub.ClientURL, "--user", "alice:alicepw"}})
	for _, args := range authSetup {
		harness.MustEtcdctl(t, bins, c.Endpoints()[:1], args...)
	}
	harness.WaitFor(t, 30*time.Second, "anonymous read index refused", func() (bool, error) {
		code, body := httpDo("GET", hub.ClientURL+readIndexPath, "")
		return code == http.StatusUnauthorized, fmt.Errorf("%d %s", code, body)
	})

	alice, err := clientv3.New(clientv3.Config{Endpoints: []string{r.ClientURL}, DialTimeout: 5 * time.Second,
		Username: "alice", Password: "alicepw", Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { alice.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	login, err := alice.Auth.Authenticate(ctx, "alice", "alicepw")
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, hub.ClientURL+readIndexPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", login.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("read index with alice's token: %s %s", resp.Status, body)
	}
	for _, bad := range []string{"not-a-token", login.Token + "x"} {
		req.Header.Set("Authorization", bad)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("read index with token %q: %s, want 401", bad, resp.Status)
		}
	}

	via := metric(t, r.ClientURL, "understudy_replica_read_index_rounds_total", "source=via")
	harness.WaitFor(t, 30*time.Second, "alice's strong reads through the replica use the hub", func() (bool, error) {
		gctx, gcancel := context.WithTimeout(ctx, 5*time.Second)
		defer gcancel()
		if _, err := alice.Get(gctx, "pub/a"); err != nil {
			return false, err
		}
		return metric(t, r.ClientURL, "understudy_replica_read_index_rounds_total", "source=via") > via, nil
	})
}

// Over TLS with client certificates and auth on, the hub's endpoint admits
// a certificate whose common name is a user and refuses one whose is not;
// a replica whose certificate is root's uses its hub without --user (the
// hub's certificate verified against the cluster's CA).
func TestHubTrustTLSCertificateUser(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	harness.Must(t, bins.RequireReplica())
	certs := harness.NewCerts(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3, TLS: certs})
	enableAuth(t, bins, c)
	hub := harness.StartReplica(t, c, harness.ReplicaConfig{Name: "hub"})
	metricsURL := harness.URL(harness.FreePort(t))
	r := harness.StartReplica(t, c, harness.ReplicaConfig{Name: "r1", Extra: []string{"--read-index-via", hub.ClientURL, "--listen-metrics-urls", metricsURL}})

	as := func(cn string) int {
		cert, key := harness.ClientCert(t, certs, cn)
		cfg, err := transport.TLSInfo{CertFile: cert, KeyFile: key, TrustedCAFile: certs.CA}.ClientConfig()
		if err != nil {
			t.Fatal(err)
		}
		cli := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 20 * time.Second}
		resp, err := cli.Get(hub.ClientURL + readIndexPath)
		if err != nil {
			t.Fatalf("read index as %s: %v", cn, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := as("nobody"); code != http.StatusUnauthorized {
		t.Errorf("read index with the certificate of a user that does not exist: %d, want 401", code)
	}
	if code := as("standby"); code != http.StatusOK {
		t.Errorf("read index with the certificate of user standby: %d, want 200", code)
	}

	rep := tlsClient(t, c, r.ClientURL)
	harness.WaitFor(t, 30*time.Second, "strong reads through the replica use the hub", func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := rep.Get(ctx, "k"); err != nil {
			return false, err
		}
		return metric(t, metricsURL, "understudy_replica_read_index_rounds_total", "source=via") > 0, nil
	})
	if n := metric(t, metricsURL, "understudy_replica_read_index_via_rejections_total"); n != 0 {
		t.Errorf("%v answers of the hub refused", n)
	}
}
