package readpath

import (
	"context"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// TestStopEndsServeCleanly: Stop, while clients are connected, makes Serve
// return nil, every time. An error here is what a replica reports as its
// exit status, and it skipped --remove-on-exit's removal (seen in CI: gRPC's
// Serve saw the mux close before grpc.Stop and returned "mux: server closed").
func TestStopEndsServeCleanly(t *testing.T) {
	e := inProcessEtcd(t)
	for i := range 100 {
		f, conn, served := serveFront(t, e)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if _, err := pb.NewKVClient(conn).Range(ctx, &pb.RangeRequest{Key: []byte("k"), Serializable: true}); err != nil {
			cancel()
			t.Fatalf("round %d: range: %v", i, err)
		}
		cancel()
		f.Stop()
		select {
		case err := <-served:
			if err != nil {
				t.Fatalf("round %d: Serve after Stop: %v, want nil", i, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: Serve still running 10s after Stop", i)
		}
	}
}
