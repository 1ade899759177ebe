package mirror

import (
	"context"
	"runtime"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The pump queues every response in the watch's order, whether or not
// anyone takes them meanwhile, and the watch's end only after them.
func TestSourceWatchQueuesInOrderThenEnds(t *testing.T) {
	ch := make(chan clientv3.WatchResponse)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := newSourceWatch(ctx, cancel, maxPending)
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
	wantRevisions(t, got, 1, 300)
}

// A full queue stops the pump reading the watch channel until responses
// are taken; then it reads on, in order; stopping the watch ends a pump
// that waits for room.
func TestSourceWatchQueueIsBounded(t *testing.T) {
	const limit = 3
	ch := make(chan clientv3.WatchResponse)
	ctx, cancel := context.WithCancel(context.Background())
	w := newSourceWatch(ctx, cancel, limit)
	go w.pump(ch)
	resp := func(rev int64) clientv3.WatchResponse {
		return clientv3.WatchResponse{Header: &pb.ResponseHeader{Revision: rev}}
	}
	// notReading fails if the pump takes a response off the channel: a
	// send on it goes through only while the pump waits in a receive.
	notReading := func(rev int64) {
		t.Helper()
		for range 1000 {
			select {
			case ch <- resp(rev):
				t.Fatalf("the pump read revision %d with %d responses queued, its bound", rev, limit)
			default:
			}
			runtime.Gosched()
		}
	}
	for rev := int64(1); rev <= limit; rev++ {
		ch <- resp(rev)
	}
	notReading(limit + 1)
	var got []int64
	take := func(n int) {
		t.Helper()
		out, err := w.take(n)
		if err != nil || len(out) != n {
			t.Fatalf("take(%d): %d responses, %v; want %d and no error", n, len(out), err, n)
		}
		for _, r := range out {
			got = append(got, r.Header.Revision)
		}
	}
	take(2)
	ch <- resp(4) // room for two: read on
	ch <- resp(5)
	notReading(6)
	take(3)
	wantRevisions(t, got, 1, 5)
	for rev := int64(6); rev < 6+limit; rev++ {
		ch <- resp(rev)
	}
	notReading(6 + limit)
	w.stop() // the pump waits for room: the watch's end stops it
	if w.poll() != nil {
		t.Fatalf("a stopped pump reported %v, want nothing (the loop that stopped it reads no more)", w.poll())
	}
}

// wantRevisions fails unless got is from..to in order.
func wantRevisions(t *testing.T, got []int64, from, to int64) {
	t.Helper()
	if len(got) != int(to-from+1) {
		t.Fatalf("took %d responses, want %d", len(got), to-from+1)
	}
	for i, rev := range got {
		if rev != from+int64(i) {
			t.Fatalf("response %d has revision %d, want %d", i, rev, from+int64(i))
		}
	}
}
