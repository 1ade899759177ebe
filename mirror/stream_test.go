package mirror

import (
	"context"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The pump queues every response in the watch's order, whether or not
// anyone takes them meanwhile, and the watch's end only after them.
func TestSourceWatchQueuesInOrderThenEnds(t *testing.T) {
	ch := make(chan clientv3.WatchResponse)
	_, cancel := context.WithCancel(context.Background())
	w := &sourceWatch{cancel: cancel, ready: make(chan struct{}, 1), done: make(chan struct{})}
	go w.pump(ch)
	var got []int64
	for rev := int64(1); rev <= 300; rev++ {
		ch <- clientv3.WatchResponse{Header: &pb.ResponseHeader{Revision: rev}}
		if rev%100 == 0 { // now and then a consumer takes what is there
			out, err := w.take()
			if err != nil {
				t.Fatalf("take after revision %d: %v", rev, err)
			}
			for _, r := range out {
				got = append(got, r.Header.Revision)
			}
		}
	}
	close(ch)
	<-w.done
	out, err := w.take()
	for _, r := range out {
		got = append(got, r.Header.Revision)
	}
	if err == nil || w.poll() == nil {
		t.Fatalf("take after the watch closed: err %v, poll %v; want the watch's end", err, w.poll())
	}
	if len(got) != 300 {
		t.Fatalf("took %d responses, want 300", len(got))
	}
	for i, rev := range got {
		if rev != int64(i+1) {
			t.Fatalf("response %d has revision %d, want %d", i, rev, i+1)
		}
	}
}
