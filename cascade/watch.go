package cascade

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jonboulle/clockwork"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// upstreamWatch is one watch stream on an upstream, of every key from a
// revision on: its end is the session's end. clientv3's Watch resumes a
// broken stream by itself, on the same channel, from the next revision —
// past the check of the upstream's history that every session begins with
// (verify): an upstream restarted on another history, or a cascaded
// upstream bootstrapped again, would be followed unchecked. So the store
// watches on a raw stream, through the client's connection (its TLS and
// token), and asks for progress on it.
type upstreamWatch struct {
	stream pb.Watch_WatchClient
	cancel context.CancelFunc
	// resps delivers the stream's responses after the created one; it is
	// closed when the stream ends, err then saying why.
	resps chan *pb.WatchResponse
	err   error
	done  chan struct{}
}

// openWatch opens u's watch of every key from revision from and waits for
// its created response, within timeout: a dead upstream costs that much.
func openWatch(ctx context.Context, clock clockwork.Clock, cli *clientv3.Client, from int64, timeout time.Duration) (*upstreamWatch, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &upstreamWatch{cancel: cancel, resps: make(chan *pb.WatchResponse, 16), done: make(chan struct{})}
	opened := make(chan error, 1)
	go func() {
		opened <- w.open(ctx, cli, from)
	}()
	t := clock.NewTimer(timeout)
	defer t.Stop()
	var err error
	select {
	case err = <-opened:
	case <-t.Chan():
		cancel()
		<-opened // the stream's calls return once its context ends
		err = fmt.Errorf("its watch did not open within %v", timeout)
	}
	if err != nil {
		cancel()
		return nil, err
	}
	go w.recv(ctx)
	return w, nil
}

// open opens the stream, asks for the watch and reads its created
// response.
func (w *upstreamWatch) open(ctx context.Context, cli *clientv3.Client, from int64) error {
	// clientv3's own calls carry these (its watch's receive limit, not
	// gRPC's 4 MiB: a revision can be as large as a request may be).
	stream, err := pb.NewWatchClient(cli.ActiveConnection()).Watch(ctx, grpc.MaxCallRecvMsgSize(math.MaxInt32))
	if err != nil {
		return err
	}
	w.stream = stream
	create := &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{
		Key: []byte{0}, RangeEnd: []byte{0}, StartRevision: from, ProgressNotify: true}}}
	if err := stream.Send(create); err != nil {
		return err
	}
	resp, err := stream.Recv()
	switch {
	case err != nil:
		return err
	case !resp.Created:
		return fmt.Errorf("its first watch response was not the watch's creation: %v", resp)
	case resp.Canceled:
		return fmt.Errorf("its watch was refused: %s", resp.CancelReason)
	}
	w.resps <- resp // the created one, first
	return nil
}

// recv delivers the stream's responses until it ends.
func (w *upstreamWatch) recv(ctx context.Context) {
	defer close(w.done)
	defer close(w.resps)
	for {
		resp, err := w.stream.Recv()
		if err != nil {
			w.err = err
			return
		}
		select {
		case w.resps <- resp:
		case <-ctx.Done():
			w.err = ctx.Err()
			return
		}
	}
}

// requestProgress asks the upstream where it is; its answer, a progress
// notification, comes on the stream. Only the follow loop sends.
func (w *upstreamWatch) requestProgress() error {
	return w.stream.Send(&pb.WatchRequest{RequestUnion: &pb.WatchRequest_ProgressRequest{ProgressRequest: &pb.WatchProgressRequest{}}})
}

// close ends the stream and waits for its receiver.
func (w *upstreamWatch) close() {
	w.cancel()
	<-w.done
}

// ended says why the stream ended, once resps is closed.
func (w *upstreamWatch) ended() error {
	if w.err == nil {
		return errors.New("the watch stream ended")
	}
	return w.err
}
