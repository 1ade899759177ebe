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
		if rev%100 == 0 { // now and then a consumer takes some of what is there
			out, err := w.take(40)
			if err != nil || len(out) != 40 {
				t.Fatalf("take(40) after revision %d: %d responses, %v; want 40 and no error", rev, len(out), err)
			}
			for _, r := range out {
				got = append(got, r.Header.Revision)
			}
		}
	}
	close(ch)
	<-w.done
	if w.poll() == nil {
		t.Fatal("poll after the watch closed: nil, want the watch's end")
	}
	// What is left comes at most 7 at a time; the end only with the last.
	for {
		out, err := w.take(7)
		if len(out) > 7 {
			t.Fatalf("take(7) returned %d responses", len(out))
		}
		for _, r := range out {
			got = append(got, r.Header.Revision)
		}
		w.mu.Lock()
		left := len(w.pending)
		w.mu.Unlock()
		if err != nil {
			if left != 0 {
				t.Fatalf("the watch's end reported with %d responses still queued", left)
			}
			break
		}
		if len(out) == 0 {
			t.Fatal("nothing left and no error after the watch closed, want the watch's end")
		}
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
