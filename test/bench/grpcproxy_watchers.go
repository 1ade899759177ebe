package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// watchShape is how a scenario's watchers lie over its keys: each on one
// of the proxyKeys keys, or each on one of the proxyPrefixes prefixes
// (where grpc-proxy's coalescing has the most to share).
type watchShape struct {
	name     string
	prefixes bool
}

var proxyShapes = []watchShape{{"1,000 keys", false}, {"100 prefixes", true}}

// perPut is the events one put makes among n watchers of shape s (n a
// multiple of proxyKeys: every key has as many watchers).
func (s watchShape) perPut(n int) int {
	if s.prefixes {
		return n / proxyPrefixes
	}
	return n / proxyKeys
}

// request is watcher i's create request: from the current revision, as a
// client that lists and then watches asks after its list.
func (s watchShape) request(i int) *pb.WatchRequest {
	cr := &pb.WatchCreateRequest{Key: []byte(proxyKey(i))}
	if s.prefixes {
		p := proxyPrefix(i)
		cr.Key, cr.RangeEnd = []byte(p), []byte(clientv3.GetPrefixRangeEnd(p))
	}
	return &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: cr}}
}

// How the watchers reach a front: watchersPerStream watch requests on
// each gRPC watch stream, the streams spread over up to watchConns
// connections — as clientv3 multiplexes a client's watches over one
// stream. The streams are etcd's gRPC Watch API itself, not clientv3's
// Watch, whose goroutines per watcher would cost this process more than a
// front's own work.
const (
	watchersPerStream = 1000
	watchConns        = 8
)

// arrival is an event received: its revision and when (Unix nanoseconds).
type arrival struct{ rev, at int64 }

// watchSet is n watchers open on one front.
type watchSet struct {
	n       int
	cancel  context.CancelFunc
	clis    []*clientv3.Client
	wg      sync.WaitGroup
	streams [][]arrival // each stream's, written by its receiver alone

	created, canceled, events atomic.Int64
	firstErr                  atomic.Value // string
	// opened is how long the watchers took to be created, all of them.
	opened time.Duration
}

// openWatchers opens n watchers of shape on the front at url and waits
// until every one is created.
func openWatchers(r *runner, url string, shape watchShape, n int) *watchSet {
	ctx, cancel := context.WithCancel(context.Background())
	ws := &watchSet{n: n, cancel: cancel}
	nstreams := (n + watchersPerStream - 1) / watchersPerStream
	for range min(nstreams, watchConns) {
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			ws.close()
			r.Fatalf("watchers: client of %s: %v", url, err)
		}
		ws.clis = append(ws.clis, c)
	}
	ws.streams = make([][]arrival, nstreams)
	start := time.Now()
	for s := range nstreams {
		st, err := pb.NewWatchClient(ws.clis[s%len(ws.clis)].ActiveConnection()).Watch(ctx)
		if err != nil {
			ws.close()
			r.Fatalf("watchers: stream %d of %s: %v", s, url, err)
		}
		ws.wg.Add(2)
		go ws.receive(ctx, s, st)
		go func() {
			defer ws.wg.Done()
			for i := s; i < n; i += nstreams {
				if err := st.Send(shape.request(i)); err != nil {
					ws.fail(fmt.Errorf("create watcher %d: %w", i, err))
					return
				}
			}
		}()
	}
	deadline := time.Now().Add(5*time.Minute + time.Duration(n)*time.Millisecond)
	for ws.created.Load() < int64(n) {
		if e := ws.firstErr.Load(); e != nil || ws.canceled.Load() > 0 || time.Now().After(deadline) {
			ws.close()
			r.Fatalf("watchers on %s: %d of %d created, %d canceled, by %v (first error: %v)", url, ws.created.Load(), n, ws.canceled.Load(), time.Since(start).Round(time.Second), e)
		}
		<-time.After(20 * time.Millisecond)
	}
	ws.opened = time.Since(start)
	return ws
}

// receive takes stream s's responses until it ends, noting each event's
// arrival.
func (ws *watchSet) receive(ctx context.Context, s int, st pb.Watch_WatchClient) {
	defer ws.wg.Done()
	var got []arrival
	defer func() { ws.streams[s] = got }()
	for {
		resp, err := st.Recv()
		if err != nil {
			if ctx.Err() == nil {
				ws.fail(fmt.Errorf("stream %d: %w", s, err))
			}
			return
		}
		now := time.Now().UnixNano()
		if resp.Created {
			ws.created.Add(1)
		}
		if resp.Canceled {
			ws.canceled.Add(1)
			ws.fail(fmt.Errorf("stream %d: watch %d canceled: %q", s, resp.WatchId, resp.CancelReason))
		}
		for _, ev := range resp.Events {
			got = append(got, arrival{ev.Kv.ModRevision, now})
		}
		ws.events.Add(int64(len(resp.Events)))
	}
}

func (ws *watchSet) fail(err error) { ws.firstErr.CompareAndSwap(nil, err.Error()) }

// close ends every stream and connection and waits for the receivers.
func (ws *watchSet) close() {
	ws.cancel()
	for _, c := range ws.clis {
		c.Close()
	}
	ws.wg.Wait()
}

// waitEvents waits until want events have arrived, or for at most d.
func (ws *watchSet) waitEvents(want int, d time.Duration) {
	deadline := time.Now().Add(d)
	for ws.events.Load() < int64(want) && time.Now().Before(deadline) {
		<-time.After(10 * time.Millisecond)
	}
}

// delivery is the time from each event's put's acknowledgement to its
// arrival, sorted (0 where the event came first: the put's answer was
// still on its way), and the events whose put was never acknowledged;
// acked tells when a revision was acknowledged.
func delivery(streams [][]arrival, acked func(rev int64) (int64, bool)) (lats []time.Duration, unacked int) {
	for _, s := range streams {
		for _, a := range s {
			at, ok := acked(a.rev)
			if !ok {
				unacked++
				continue
			}
			lats = append(lats, time.Duration(max(0, a.at-at)))
		}
	}
	slices.Sort(lats)
	return lats, unacked
}

// ackLog is every put of a scenario acknowledged: each one's revision and
// when its answer came (Unix nanoseconds), and the latest revision
// acknowledged.
type ackLog struct {
	mu   sync.Mutex
	at   map[int64]int64
	last atomic.Int64
	next atomic.Int64 // the next of the proxyKeys keys to put
}

func newAckLog() *ackLog { return &ackLog{at: map[int64]int64{}} }

// put puts the next key through cli and logs its acknowledgement.
func (a *ackLog) put(ctx context.Context, cli *clientv3.Client) error {
	_, err := a.putKey(ctx, cli, proxyKey(int(a.next.Add(1)-1)))
	return err
}

// putKey puts key through cli, logs its acknowledgement and returns its
// revision.
func (a *ackLog) putKey(ctx context.Context, cli *clientv3.Client, key string) (int64, error) {
	resp, err := cli.Put(ctx, key, value256)
	if err != nil {
		return 0, err
	}
	a.ack(resp.Header.Revision, time.Now().UnixNano())
	return resp.Header.Revision, nil
}

func (a *ackLog) ack(rev, at int64) {
	a.mu.Lock()
	a.at[rev] = at
	a.mu.Unlock()
	for {
		last := a.last.Load()
		if rev <= last || a.last.CompareAndSwap(last, rev) {
			return
		}
	}
}

// acked is when revision rev was acknowledged, if it was.
func (a *ackLog) acked(rev int64) (int64, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	at, ok := a.at[rev]
	return at, ok
}
