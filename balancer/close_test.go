package balancer

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

// TestCloseStopsEverything: a Balancer on a one-member cluster serves a
// write, and Close leaves none of the goroutines it started (its loop, the
// discovery and balanced clients, the per-member connections) behind, while
// the cluster lives on.
func TestCloseStopsEverything(t *testing.T) {
	e := startEtcd(t)
	before := goleak.IgnoreCurrent()
	b, err := New(Config{Endpoints: []string{"http://" + e.Clients[0].Addr().String()}, Logger: zap.NewNop(),
		Client:          clientv3.Config{DialTimeout: 5 * time.Second},
		RefreshInterval: 20 * time.Millisecond, ProbeInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := b.Client().Put(ctx, "k", "v"); err != nil {
		t.Fatalf("put through the balancer: %v", err)
	}
	if got := b.Leader(); got == "" {
		t.Error("no leader known after a write")
	}
	if err := b.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	goleak.VerifyNone(t, before)
}

// startEtcd starts a one-member embedded etcd on loopback ports, closed
// when the test ends.
func startEtcd(t *testing.T) *embed.Etcd {
	t.Helper()
	loopback := func() url.URL {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		u, _ := url.Parse(fmt.Sprintf("http://%s", l.Addr()))
		return *u
	}
	peer, client := loopback(), loopback()
	ec := embed.NewConfig()
	ec.Dir = t.TempDir()
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	ec.InitialCluster = ec.Name + "=" + peer.String()
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
	// etcd starts serving its client URL (and its gateway's own connection
	// to it) after it is ready: one call through a client of our own makes
	// sure those goroutines are up before a test counts its own.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client.String()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Get(ctx, "warm-up"); err != nil {
		t.Fatalf("embedded etcd: %v", err)
	}
	return e
}
