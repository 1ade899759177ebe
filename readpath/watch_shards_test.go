package readpath

import (
	"context"
	"fmt"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A client's stream served over several of etcd's (watchShardSize
// watchers each) is etcd's stream to the client: Created answers in the
// order of the creates, with etcd's numbering from 0 and its refusal of an
// ID in use; every event to every watcher once, in order; a progress
// answer only after every event up to its revision; cancels that free
// their shards, and creates after them.
func TestShardedWatchKeepsEtcdsStream(t *testing.T) {
	e := inProcessEtcd(t)
	_, conn, _ := serveFront(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kv := pb.NewKVClient(conn)
	ws, err := pb.NewWatchClient(conn).Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	resps := make(chan *pb.WatchResponse, 4096)
	go func() {
		for {
			r, err := ws.Recv()
			if err != nil {
				close(resps)
				return
			}
			resps <- r
		}
	}()
	next := func(what string) *pb.WatchResponse {
		t.Helper()
		select {
		case r, ok := <-resps:
			if !ok {
				t.Fatalf("the stream ended, waiting for %s", what)
			}
			return r
		case <-ctx.Done():
			t.Fatalf("no %s", what)
		}
		return nil
	}
	// nextNot is the next answer that is not a progress answer (a
	// request asked again may be answered more than once).
	nextNot := func(what string) *pb.WatchResponse {
		t.Helper()
		for {
			if r := next(what); !isProgress(r) {
				return r
			}
		}
	}
	create := func(watchID int64) {
		t.Helper()
		if err := ws.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{
			Key: []byte("p/"), RangeEnd: []byte("p0"), WatchId: watchID}}}); err != nil {
			t.Fatal(err)
		}
	}
	const n = 2*watchShardSize + 50 // three shards
	for range n / 2 {
		create(clientv3.AutoWatchID)
	}
	create(5) // an ID in use: refused, in its place
	for range n - n/2 {
		create(clientv3.AutoWatchID)
	}

	// Events per watcher, and the stream's order of everything.
	got := map[int64][]int64{}
	var lastPut int64
	take := func(r *pb.WatchResponse) {
		t.Helper()
		for _, ev := range r.Events {
			revs := got[r.WatchId]
			if len(revs) > 0 && revs[len(revs)-1] >= ev.Kv.ModRevision {
				t.Fatalf("watcher %d: event at %d after one at %d", r.WatchId, ev.Kv.ModRevision, revs[len(revs)-1])
			}
			got[r.WatchId] = append(revs, ev.Kv.ModRevision)
		}
	}
	var want int64
	for i := range n + 1 {
		r := next("a created answer")
		if !r.Created {
			t.Fatalf("answer %d: %+v, want a created answer", i, r)
		}
		if i == n/2 {
			if !r.Canceled || r.WatchId != clientv3.InvalidWatchID {
				t.Fatalf("a create with ID 5, in use: %+v, want refused", r)
			}
			continue
		}
		if r.Canceled || r.WatchId != want {
			t.Fatalf("created answer %d: ID %d canceled %v, want ID %d (etcd's numbering, in the creates' order)", i, r.WatchId, r.Canceled, want)
		}
		want++
	}
	put := func(k string) int64 {
		t.Helper()
		resp, err := kv.Put(ctx, &pb.PutRequest{Key: []byte(k), Value: []byte("v")})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	// progress asks until answered, as clients do: etcd answers no
	// progress request while a watcher is not synced (mvcc's victims are
	// not), and neither does a shard.
	progress := func(watchers []int64) {
		t.Helper()
		for {
			if err := ws.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}}); err != nil {
				t.Fatal(err)
			}
			var r *pb.WatchResponse
			select {
			case r = <-resps:
			case <-time.After(time.Second):
				continue // unanswered: ask again
			}
			if r == nil {
				t.Fatal("the stream ended, waiting for a progress answer")
			}
			if r.WatchId != clientv3.InvalidWatchID || r.Created || r.Canceled {
				take(r)
				continue
			}
			if r.Header.Revision < lastPut {
				t.Fatalf("a progress answer at %d after the put at %d was acknowledged", r.Header.Revision, lastPut)
			}
			for _, id := range watchers {
				if revs := got[id]; len(revs) == 0 || revs[len(revs)-1] != lastPut {
					t.Fatalf("a progress answer at %d before watcher %d had the event at %d (it had %v)", r.Header.Revision, id, lastPut, revs)
				}
			}
			return
		}
	}
	all := make([]int64, n)
	for i := range all {
		all[i] = int64(i)
	}
	for i := range 20 {
		lastPut = put(fmt.Sprintf("p/%d", i%3))
	}
	progress(all)
	for _, id := range all {
		if len(got[id]) != 20 {
			t.Fatalf("watcher %d: %d events of 20", id, len(got[id]))
		}
	}

	// Cancel the first 150: the others go on, and the freed IDs are not
	// numbered again (etcd's counter moves on).
	for id := range int64(150) {
		if err := ws.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{CancelRequest: &pb.WatchCancelRequest{WatchId: id}}}); err != nil {
			t.Fatal(err)
		}
	}
	canceled := map[int64]bool{}
	for len(canceled) < 150 {
		r := nextNot("a canceled answer")
		if !r.Canceled {
			t.Fatalf("%+v, want canceled answers", r)
		}
		canceled[r.WatchId] = true
	}
	create(clientv3.AutoWatchID)
	if r := nextNot("a created answer"); !r.Created || r.Canceled || r.WatchId != n {
		t.Fatalf("a create after the cancels: %+v, want ID %d", r, n)
	}
	got = map[int64][]int64{}
	lastPut = put("p/after")
	left := append(all[150:], n)
	progress(left)
	for id := range int64(150) {
		if len(got[id]) != 0 {
			t.Fatalf("canceled watcher %d had an event", id)
		}
	}
}

// fakeEtcdWatch stands for etcd's watch server in the progress protocol's
// test: each stream (shard) answers creates at once, numbering as etcd
// does, and hands its progress requests to the test, which answers or
// skips them.
type fakeEtcdWatch struct {
	pb.UnimplementedWatchServer
	streams chan *fakeShard
}

type fakeShard struct {
	stream   pb.Watch_WatchServer
	ids      []int64        // the IDs of the creates it took, in order
	live     map[int64]bool // its watchers (its goroutine's)
	progress chan struct{}
}

func (f *fakeEtcdWatch) Watch(stream pb.Watch_WatchServer) error {
	sh := &fakeShard{stream: stream, live: map[int64]bool{}, progress: make(chan struct{}, 16)}
	f.streams <- sh
	var next int64
	for {
		req, err := stream.Recv()
		if err != nil {
			<-stream.Context().Done()
			return stream.Context().Err()
		}
		switch uv := req.RequestUnion.(type) {
		case *pb.WatchRequest_CreateRequest:
			id := uv.CreateRequest.WatchId
			if id == clientv3.AutoWatchID {
				id, next = next, next+1
			}
			sh.ids = append(sh.ids, id)
			sh.live[id] = true
			if err := stream.Send(&pb.WatchResponse{Header: &pb.ResponseHeader{}, WatchId: id, Created: true}); err != nil {
				return err
			}
		case *pb.WatchRequest_ProgressRequest:
			sh.progress <- struct{}{}
		case *pb.WatchRequest_CancelRequest:
			if !sh.live[uv.CancelRequest.WatchId] {
				continue // etcd answers nothing for an ID it does not hold
			}
			delete(sh.live, uv.CancelRequest.WatchId)
			if err := stream.Send(&pb.WatchResponse{Header: &pb.ResponseHeader{}, WatchId: uv.CancelRequest.WatchId, Canceled: true}); err != nil {
				return err
			}
		}
	}
}

// answer sends a progress answer at rev, as mvcc's progressAll.
func (sh *fakeShard) answer(t *testing.T, rev int64) {
	t.Helper()
	if err := sh.stream.Send(&pb.WatchResponse{Header: &pb.ResponseHeader{Revision: rev}, WatchId: clientv3.InvalidWatchID}); err != nil {
		t.Fatal(err)
	}
}

// startShardedWatch serves a fake client's stream with shardedWatch over
// a fake etcd, until the test ends.
func startShardedWatch(t *testing.T) (*fakeEtcdWatch, *fakeClient) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	etcd := &fakeEtcdWatch{streams: make(chan *fakeShard, 16)}
	c := &fakeClient{ctx: ctx, reqs: make(chan *pb.WatchRequest, 1024), sent: make(chan *pb.WatchResponse, 1024)}
	done := make(chan error, 1)
	go func() { done <- shardedWatch(etcd, c) }()
	t.Cleanup(func() { cancel(); <-done })
	return etcd, c
}

// fakeClient is the client's side of a stream served by shardedWatch.
type fakeClient struct {
	pb.Watch_WatchServer
	ctx  context.Context
	reqs chan *pb.WatchRequest
	sent chan *pb.WatchResponse
}

func (c *fakeClient) Context() context.Context { return c.ctx }
func (c *fakeClient) Recv() (*pb.WatchRequest, error) {
	select {
	case r := <-c.reqs:
		return r, nil
	case <-c.ctx.Done():
		return nil, c.ctx.Err()
	}
}
func (c *fakeClient) Send(r *pb.WatchResponse) error { c.sent <- r; return nil }

// A shard asked for progress takes no create until it answers, and one
// asked again meanwhile (it may have skipped the first: which answer is
// which is no longer known) takes none ever again; the stream answers a
// request once every shard it asked has answered since, with the lowest
// revision — a late answer of a shard that took no create since is one.
func TestShardedWatchProgressAfterEveryShard(t *testing.T) {
	etcd, c := startShardedWatch(t)
	recvShard := func() *fakeShard {
		t.Helper()
		select {
		case sh := <-etcd.streams:
			return sh
		case <-time.After(10 * time.Second):
			t.Fatal("no shard")
		}
		return nil
	}
	sent := func(what string) *pb.WatchResponse {
		t.Helper()
		select {
		case r := <-c.sent:
			return r
		case <-time.After(10 * time.Second):
			t.Fatalf("no %s", what)
		}
		return nil
	}
	nothingSent := func(why string) {
		t.Helper()
		select {
		case r := <-c.sent:
			t.Fatalf("%s: sent %+v", why, r)
		case <-time.After(50 * time.Millisecond):
		}
	}
	create := func() *pb.WatchResponse {
		t.Helper()
		c.reqs <- &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{Key: []byte("k")}}}
		return sent("a created answer")
	}
	askProgress := func() {
		c.reqs <- &pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}}
	}
	asked := func(sh *fakeShard, name string) {
		t.Helper()
		select {
		case <-sh.progress:
		case <-time.After(10 * time.Second):
			t.Fatalf("shard %s not asked for progress", name)
		}
	}

	a := recvShard()
	for range watchShardSize + 10 {
		create()
	}
	b := recvShard() // the 10 past A's size
	askProgress()
	asked(a, "A")
	asked(b, "B")
	a.answer(t, 10)
	nothingSent("B has not answered")
	// B has not answered (it may have skipped): a create goes elsewhere.
	w := create()
	cs := recvShard()
	if len(cs.ids) != 1 || cs.ids[0] != w.WatchId {
		t.Fatalf("the create while B's progress answer was due went to %v, want a new shard C", cs.ids)
	}
	askProgress()
	asked(a, "A")
	asked(b, "B")
	asked(cs, "C")
	// B's answer to the first request, late: it completes the first
	// request, and counts for the second (B took no create since).
	b.answer(t, 9)
	if r := sent("the first request's answer"); r.WatchId != clientv3.InvalidWatchID || r.Header.Revision != 9 {
		t.Fatalf("progress answer %+v, want the lowest of A's and B's, 9", r)
	}
	cs.answer(t, 12)
	nothingSent("A has not answered the second request")
	a.answer(t, 11)
	if r := sent("the second request's answer"); r.WatchId != clientv3.InvalidWatchID || r.Header.Revision != 9 {
		t.Fatalf("progress answer %+v, want the lowest, 9", r)
	}
	nothingSent("one answer a request")
	// B, asked twice with an answer due, takes no create ever again.
	b.answer(t, 13) // its answer to the second request, or none: alike
	for range watchShardSize - 1 {
		create()
	}
	if len(b.ids) != 10 {
		t.Fatalf("shard B took creates after it was asked twice with an answer due: %d watchers", len(b.ids))
	}
}

// A response a shard sends in fragments reaches the client whole: another
// shard's answer waits for its last fragment (the client drops what comes
// between fragments).
func TestShardedWatchKeepsFragmentsTogether(t *testing.T) {
	etcd, c := startShardedWatch(t)
	a := <-etcd.streams
	for range watchShardSize + 1 {
		c.reqs <- &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{Key: []byte("k")}}}
	}
	b := <-etcd.streams
	for range watchShardSize + 1 {
		<-c.sent
	}
	if err := a.stream.Send(&pb.WatchResponse{WatchId: 0, Fragment: true, Events: []*mvccpb.Event{{}}}); err != nil {
		t.Fatal(err)
	}
	bSent := make(chan error, 1)
	go func() {
		bSent <- b.stream.Send(&pb.WatchResponse{WatchId: watchShardSize, Events: []*mvccpb.Event{{}}})
	}()
	select {
	case r := <-c.sent:
		if r.WatchId != 0 || !r.Fragment {
			t.Fatalf("first: %+v, want A's first fragment", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("A's first fragment not sent")
	}
	select {
	case r := <-c.sent:
		t.Fatalf("sent between A's fragments: %+v", r)
	case <-time.After(50 * time.Millisecond):
	}
	if err := a.stream.Send(&pb.WatchResponse{WatchId: 0, Events: []*mvccpb.Event{{}}}); err != nil {
		t.Fatal(err)
	}
	if r := <-c.sent; r.WatchId != 0 || r.Fragment {
		t.Fatalf("second: %+v, want A's last fragment", r)
	}
	if r := <-c.sent; r.WatchId != watchShardSize {
		t.Fatalf("third: %+v, want B's answer", r)
	}
	if err := <-bSent; err != nil {
		t.Fatal(err)
	}
}

// A client's own watch ID: one in use is refused where it is held, and
// once canceled, taken again there (etcd's "cancel X; create X"), and
// canceled again by its ID.
func TestShardedWatchClientChosenIDs(t *testing.T) {
	etcd, c := startShardedWatch(t)
	a := <-etcd.streams
	create := func(id int64) {
		c.reqs <- &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{Key: []byte("k"), WatchId: id}}}
	}
	cancelID := func(id int64) {
		c.reqs <- &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CancelRequest{CancelRequest: &pb.WatchCancelRequest{WatchId: id}}}
	}
	create(1000)
	if r := <-c.sent; !r.Created || r.WatchId != 1000 {
		t.Fatalf("%+v, want 1000 created", r)
	}
	// Cancel 1000 and create 1000 again before the cancel is answered: the
	// create goes where 1000 is held.
	cancelID(1000)
	create(1000)
	if r := <-c.sent; !r.Canceled || r.WatchId != 1000 {
		t.Fatalf("%+v, want 1000 canceled", r)
	}
	if r := <-c.sent; !r.Created || r.WatchId != 1000 {
		t.Fatalf("%+v, want 1000 created again", r)
	}
	if got := a.ids; len(got) != 2 || got[0] != 1000 || got[1] != 1000 {
		t.Fatalf("shard A was asked for %v, want 1000 twice", got)
	}
	// More watchers than A holds: the creates move to another shard; 1000
	// is still A's.
	for range watchShardSize {
		create(clientv3.AutoWatchID)
		<-c.sent
	}
	<-etcd.streams
	cancelID(1000)
	select {
	case r := <-c.sent:
		if !r.Canceled || r.WatchId != 1000 {
			t.Fatalf("%+v, want the second 1000 canceled by its ID", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancel of the second 1000 was not answered (sent to a shard that does not hold it)")
	}
}
