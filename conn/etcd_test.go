package conn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// startEtcd starts a one-member etcd in the test process, on loopback
// ports, stopped at cleanup; it returns its client URL and cluster ID.
func startEtcd(t *testing.T) (string, uint64) {
	t.Helper()
	free := func() url.URL {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		u, _ := url.Parse("http://" + l.Addr().String())
		return *u
	}
	peer, client := free(), free()
	ec := embed.NewConfig()
	ec.Dir = t.TempDir()
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	ec.InitialCluster = ec.Name + "=" + peer.String()
	ec.InitialClusterToken = t.Name() + client.Host // a cluster ID of its own
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(ec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(time.Minute):
		t.Fatal("embedded etcd not ready within a minute")
	}
	return client.String(), uint64(e.Server.Cluster().ID())
}

func etcdClient(t *testing.T, endpoint, user, password string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Username: user, Password: password, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// TestProbeEtcd probes real etcd members: one answers with its cluster;
// endpoints of two clusters are refused naming the one that differs.
func TestProbeEtcd(t *testing.T) {
	a, aID := startEtcd(t)
	b, bID := startEtcd(t)
	r, err := Flags{Endpoints: []string{a}}.Probe(context.Background())
	if err != nil || r.ClusterID != aID || len(r.Answered) != 1 {
		t.Fatalf("probe of a live member: %+v, %v; want cluster %x", r, err, aID)
	}
	closed := "http://" + closedPort(t)
	r, err = Flags{Endpoints: []string{closed, a}}.Probe(context.Background())
	if err != nil || r.ClusterID != aID || len(r.Failed) != 1 || !errors.Is(r.Failed[0], ErrRefused) {
		t.Fatalf("one live endpoint of two: %+v, %v; want it answered and the closed one failed", r, err)
	}
	// A call's timeout alone does not tell the cause: Diagnose probes the
	// endpoint, and says it when it finds one.
	f := Flags{Endpoints: []string{closed, a}, Names: EtcdctlNames("upstream-")}
	if err := f.Diagnose(context.Background(), closed, fmt.Errorf("get: %w", context.DeadlineExceeded)); !errors.Is(err, ErrRefused) || !strings.HasPrefix(err.Error(), "--upstream-endpoints "+closed+": connection refused") {
		t.Fatalf("a timeout on a closed port, diagnosed: %v", err)
	}
	if err := f.Diagnose(context.Background(), a, context.DeadlineExceeded); !errors.Is(err, ErrTimeout) || !strings.HasPrefix(err.Error(), "--upstream-endpoints "+a+": no answer in time") {
		t.Fatalf("a timeout on a live member, diagnosed: %v", err)
	}
	if err := f.Diagnose(context.Background(), a, nil); err != nil {
		t.Fatalf("no error, diagnosed: %v", err)
	}

	_, err = Flags{Endpoints: []string{a, b}, Names: EtcdctlNames("")}.Probe(context.Background())
	if !errors.Is(err, ErrWrongCluster) {
		t.Fatalf("endpoints of two clusters: %v", err)
	}
	oneLine(t, err, "--endpoints "+b+": ")
	for _, w := range []string{fmt.Sprintf("a member of cluster %x, not of the cluster of --endpoints %s (%x)", bID, a, aID), "client URLs of one cluster"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%v\ndoes not say %q", err, w)
		}
	}
}

// TestExplainAuth takes etcd's own refusals, from a cluster with auth on:
// a wrong password (Probe), no user, and a user without the right.
func TestExplainAuth(t *testing.T) {
	ep, _ := startEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	root := etcdClient(t, ep, "", "")
	for _, step := range []func() error{
		func() error { _, err := root.UserAdd(ctx, "root", "rootpw"); return err },
		func() error { _, err := root.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := root.UserAdd(ctx, "alice", "alicepw"); return err },
		func() error { _, err := root.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}

	f := Flags{Endpoints: []string{ep}, Credentials: Credentials{User: "root:wrong"}, Names: EtcdctlNames("dest-")}
	_, err := f.Probe(ctx)
	if !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("a wrong password: %v", err)
	}
	oneLine(t, err, "--dest-endpoints "+ep+": ")
	for _, w := range []string{`authentication failed for user "root": wrong user name or password (etcdserver: authentication failed, invalid user ID or password)`, "check --dest-user and --dest-password"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%v\ndoes not say %q", err, w)
		}
	}
	if _, err := (Flags{Endpoints: []string{ep}, Credentials: Credentials{User: "root:rootpw"}}).Probe(ctx); err != nil {
		t.Fatalf("the right password: %v", err)
	}

	_, err = etcdClient(t, ep, "", "").Get(ctx, "k")
	err = Flags{Endpoints: []string{ep}}.Explain(ep, err)
	if !errors.Is(err, ErrAuthFailed) || !strings.Contains(err.Error(), "authentication on, and the client gave no user (etcdserver: user name is empty); give --user") {
		t.Fatalf("no user: %v", err)
	}
	oneLine(t, err, "--endpoints "+ep+": ")

	_, err = etcdClient(t, ep, "alice", "alicepw").Get(ctx, "k")
	f = Flags{Endpoints: []string{ep}, Credentials: Credentials{User: "alice", Password: "alicepw"}}
	err = f.Explain(ep, err)
	if !errors.Is(err, ErrPermissionDenied) || !strings.Contains(err.Error(), `permission denied: user "alice" may not make this request (etcdserver: permission denied); grant the right`) {
		t.Fatalf("a user without the right: %v", err)
	}
	oneLine(t, err, "--endpoints "+ep+": ")
	if again := f.Explain(ep, fmt.Errorf("context: %w", err)); again.Error() != "context: "+err.Error() {
		t.Fatalf("an explained error explained again: %v", again)
	}
}
