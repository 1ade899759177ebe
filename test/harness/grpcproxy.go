package harness

import (
	"context"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// StartGRPCProxy starts `etcd grpc-proxy start` of the etcd binary built
// from this module (v3.7.3) in front of endpoints, as etcd's documentation
// shows, with extra arguments after its own, and waits until it answers a
// linearizable read; it returns the process and the proxy's client URL.
func StartGRPCProxy(t TB, endpoints []string, extra ...string) (*Proc, string) {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", FreePort(t))
	args := append([]string{"grpc-proxy", "start", "--endpoints", strings.Join(endpoints, ","),
		"--listen-addr", addr, "--advertise-client-url", addr}, extra...)
	proc := Start(t, ProcConfig{Name: "grpc-proxy", Bin: Binaries(t).Etcd, Args: args})
	url := "http://" + addr
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("a client of grpc-proxy at %s: %v", url, err)
	}
	defer cli.Close()
	WaitFor(t, time.Minute, "grpc-proxy answers a read", func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := cli.Get(ctx, "grpc-proxy-ready")
		return err == nil, err
	})
	return proc, url
}
