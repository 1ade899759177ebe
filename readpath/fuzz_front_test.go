package readpath

import (
	"github.com/understudy-kv/understudy/readindex"

	"context"
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// inProcessEtcd starts a one-member etcd in the test process; it stops at
// cleanup.
func inProcessEtcd(t testing.TB) *embed.Etcd {
	t.Helper()
	port := func() int {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().(*net.TCPAddr).Port
	}
	peer, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", port()))
	ec := embed.NewConfig()
	ec.Dir = t.TempDir()
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{*peer}, []url.URL{*peer}
	ec.ListenClientUrls, ec.AdvertiseClientUrls = nil, nil
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
	return e
}

// serveFront starts a Front on e, served on loopback, and returns a
// connection to it and what Serve returned, once Stop has been called.
func serveFront(t testing.TB, e *embed.Etcd) (*Front, *grpc.ClientConn, <-chan error) {
	t.Helper()
	f, err := New(Config{Source: NewMember(e.Server, nil), Logger: zap.NewNop(), MaxStaleness: 0,
		ReadIndex: readindex.Settings{Interval: 50 * time.Millisecond, BatchInterval: time.Millisecond}, Ready: ReadyConfig{MaxLag: 1000, MaxStaleness: 5 * time.Second},
		KeepAlive: KeepAlive{MinTime: 5 * time.Second, Interval: time.Hour, Timeout: 20 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	ran := make(chan struct{})
	go func() { _ = f.Run(context.Background()); close(ran) }()
	go func() { served <- f.Serve(l) }()
	t.Cleanup(func() { f.Stop(); <-ran })
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return f, conn, served
}

// inProcessFront starts a one-member etcd in the test process and a Front
// on it, served on loopback; both stop at cleanup.
func inProcessFront(t testing.TB) pb.KVClient {
	t.Helper()
	f, conn, served := serveFront(t, inProcessEtcd(t))
	t.Cleanup(func() {
		f.Stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return pb.NewKVClient(conn)
}

// FuzzFrontRequests sends random KV requests, in every read mode and with
// random staleness metadata, to a Front. Nothing panics, and a strong read
// returns what the last acknowledged write of that key left (the only
// client is this one), whatever else the request asks.
func FuzzFrontRequests(f *testing.F) {
	f.Add(uint8(0), []byte("k"), []byte("v"), false, "", []byte(nil), int64(0))
	f.Add(uint8(1), []byte("k"), []byte(nil), true, "100ms", []byte("l"), int64(1))
	f.Add(uint8(2), []byte("k"), []byte("v"), false, "bogus", []byte{0}, int64(-1))
	f.Add(uint8(3), []byte(""), []byte(""), true, "-1s", []byte("\xff"), int64(1<<40))
	kv := inProcessFront(f)
	model := map[string]string{}
	f.Fuzz(func(t *testing.T, op uint8, key, value []byte, serializable bool, bound string, rangeEnd []byte, limit int64) {
		plain, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ctx := plain
		if bound != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, MaxStalenessKey, bound)
		}
		switch op % 4 {
		case 0:
			if _, err := kv.Put(ctx, &pb.PutRequest{Key: key, Value: value}); err == nil {
				model[string(key)] = string(value)
			}
		case 1:
			_, _ = kv.Range(ctx, &pb.RangeRequest{Key: key, RangeEnd: rangeEnd, Limit: limit, Serializable: serializable, Revision: limit % 8})
		case 2:
			resp, err := kv.Txn(ctx, &pb.TxnRequest{
				Compare: []*pb.Compare{{Key: key, Target: pb.Compare_VALUE, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_Value{Value: value}}},
				Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: key, Value: append(value, 'x')}}}},
				Failure: []*pb.RequestOp{{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: key, RangeEnd: rangeEnd, Serializable: serializable}}}},
			})
			if err == nil && resp.Succeeded {
				model[string(key)] = string(append(value, 'x'))
			}
		case 3:
			if _, err := kv.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: key}); err == nil {
				delete(model, string(key))
			}
		}
		if len(key) == 0 {
			return // etcd refuses an empty key
		}
		resp, err := kv.Range(plain, &pb.RangeRequest{Key: key})
		if err != nil {
			t.Fatalf("strong read of %q: %v", key, err)
		}
		want, ok := model[string(key)]
		switch {
		case !ok && len(resp.Kvs) != 0:
			t.Fatalf("strong read of %q: %q, want no key", key, resp.Kvs[0].Value)
		case ok && (len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != want):
			t.Fatalf("strong read of %q: %v, want %q", key, resp.Kvs, want)
		}
	})
}
