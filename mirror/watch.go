package mirror

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// sourceWatch is an open watch of the source prefix. Its pump takes every
// response off the watch channel as it arrives and queues it here, so
// that when the mirror falls behind (a slow destination commit, a pause)
// the next transaction carries the whole backlog: clientv3 hands a
// consumer one response at a time, and a loop that took only what its
// channel held at once would go on committing a revision or two per
// transaction, never catching up while the source writes at the pace of
// its commits.
//
// The queue is bounded (limit, maxPending): once it is full the pump stops
// taking responses off the watch channel until the loop takes some, so
// the queue never grows past the bound, and a full sync, which takes
// nothing until it is done, holds at most that many. The responses the
// pump has not taken wait in clientv3's buffer of the watch, which does
// not stop reading the gRPC stream (clientv3 v3.7 buffers a watcher's
// responses without bound): nothing is lost or reordered, but the bound
// limits this queue, not the process's memory. While the queue is full
// the watch's end (a compaction) is seen only once the loop takes again.
type sourceWatch struct {
	ctx    context.Context // the watch's: RequestProgress finds the stream by it
	cancel context.CancelFunc
	// ready holds a token once responses or the watch's end are queued;
	// room once take has taken some.
	ready, room chan struct{}
	done        chan struct{} // closed when the pump has stopped
	limit       int           // the most responses queued

	// links is the link follower on the watch's stream, or nil.
	links *linkFollower

	mu      sync.Mutex
	pending []clientv3.WatchResponse
	err     error // why the watch ended; nothing is queued after it
}

// maxPending bounds a source watch's queue: four passes of the stream
// loop (passResponses each), enough for every transaction of a backlog to
// be full while the pump refills the queue between passes. A response
// holds the events of one or more whole revisions (etcd batches up to a
// thousand revisions in one while a watch catches up).
const maxPending = 4 * passResponses

// newSourceWatch is a watch on ctx (cancel ends it) whose pump queues at
// most limit responses.
func newSourceWatch(ctx context.Context, cancel context.CancelFunc, limit int) *sourceWatch {
	return &sourceWatch{ctx: ctx, cancel: cancel, ready: make(chan struct{}, 1), room: make(chan struct{}, 1),
		done: make(chan struct{}), limit: max(limit, 1)}
}

// openWatch watches the source prefix from revision from on, waits for
// the source to accept it, and starts its pump.
func (mr *mirror) openWatch(ctx context.Context, from int64) (*sourceWatch, error) {
	key, end := span(mr.cfg.Prefix)
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	w := newSourceWatch(wctx, cancel, maxPending)
	ch := mr.cfg.Source.Watch(wctx, key, clientv3.WithRange(end), clientv3.WithRev(from), clientv3.WithProgressNotify(), clientv3.WithCreatedNotify())
	t := mr.clock.NewTimer(mr.cfg.RequestTimeout)
	defer t.Stop()
	select {
	case <-ctx.Done():
		cancel()
		return nil, ctx.Err()
	case <-t.Chan():
		cancel()
		return nil, fmt.Errorf("mirror: source watch from revision %d: not created within %v", from, mr.cfg.RequestTimeout)
	case resp, ok := <-ch:
		if err := watchErr(resp, ok); err != nil {
			cancel()
			return nil, err
		}
		if !resp.Created {
			w.pending = append(w.pending, resp)
		}
	}
	if err := mr.followLinksOn(wctx, w); err != nil {
		cancel()
		return nil, err
	}
	go w.pump(ch)
	return w, nil
}

// followLinksOn reads the source's links and starts the link follower on
// w's stream, from the revision after the read; w.stop stops it. A source
// whose checkpoints cannot be read has none to follow.
func (mr *mirror) followLinksOn(wctx context.Context, w *sourceWatch) error {
	if mr.cfg.CopyMirrored {
		return nil // feeders are never asked for
	}
	rctx, cancel := context.WithTimeout(wctx, 3*mr.cfg.RequestTimeout)
	all, rev, err := mr.sourceLinks(rctx)
	cancel()
	if err != nil {
		return err
	}
	if mr.feeders.hidden {
		return nil
	}
	mr.setFeeders(mr.feedersOf(mr.withoutFailedBack(all, mr.sourceID)), rev)
	mr.feeders.follower = mr.followLinks(wctx, all, rev+1)
	w.links = mr.feeders.follower
	return nil
}

// pump queues the watch's responses until the watch ends or is stopped,
// reading the channel only while the queue has room.
func (w *sourceWatch) pump(ch clientv3.WatchChan) {
	defer close(w.done)
	for w.waitRoom() {
		resp, ok := <-ch
		err := watchErr(resp, ok)
		w.mu.Lock()
		if err != nil {
			w.err = err
		} else {
			w.pending = append(w.pending, resp)
		}
		w.mu.Unlock()
		if err == nil && len(resp.Events) > 0 && w.links != nil {
			w.links.kick()
		}
		select {
		case w.ready <- struct{}{}:
		default: // a token is already waiting
		}
		if err != nil {
			return
		}
	}
}

// waitRoom waits until the queue holds fewer than limit responses; false
// once the watch is stopped.
func (w *sourceWatch) waitRoom() bool {
	for {
		w.mu.Lock()
		full := len(w.pending) >= w.limit
		w.mu.Unlock()
		if !full {
			return true
		}
		select {
		case <-w.room:
		case <-w.ctx.Done():
			return false
		}
	}
}

// take returns up to n queued responses, the oldest first, and why the
// watch ended once nothing is left before its end.
func (w *sourceWatch) take(n int) ([]clientv3.WatchResponse, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []clientv3.WatchResponse
	if len(w.pending) > n {
		out, w.pending = w.pending[:n:n], w.pending[n:]
	} else {
		out, w.pending = w.pending, nil
	}
	if len(out) > 0 {
		select {
		case w.room <- struct{}{}:
		default: // a token is already waiting
		}
	}
	if len(w.pending) > 0 {
		return out, nil
	}
	return out, w.err
}

// poll reports whether the watch has ended, without waiting: how a sync
// learns early that it must start again.
func (w *sourceWatch) poll() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// stop ends the watch and waits for its pump, and its link follower's.
func (w *sourceWatch) stop() {
	w.cancel()
	<-w.done
	if w.links != nil {
		w.links.stop()
	}
}

// watchErr is what a watch response says went wrong: compaction means a
// new full sync.
func watchErr(resp clientv3.WatchResponse, ok bool) error {
	switch {
	case !ok:
		return errors.New("mirror: source watch closed")
	case resp.CompactRevision != 0 || errors.Is(resp.Err(), rpctypes.ErrCompacted):
		return errCompacted
	case resp.Err() != nil:
		return fmt.Errorf("mirror: source watch: %w", resp.Err())
	case resp.Canceled:
		return fmt.Errorf("mirror: source watch canceled: %s", resp.CancelReason)
	}
	return nil
}
