package mirror

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/understudy-kv/understudy/mirror/core"
	"go.etcd.io/etcd/api/v3/mvccpb"
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
type sourceWatch struct {
	ctx    context.Context // the watch's: RequestProgress finds the stream by it
	cancel context.CancelFunc
	// ready holds a token once responses or the watch's end are queued.
	ready chan struct{}
	done  chan struct{} // closed when the pump has stopped

	// links is the link follower on the watch's stream, or nil.
	links *linkFollower

	mu      sync.Mutex
	pending []clientv3.WatchResponse
	err     error // why the watch ended; nothing is queued after it
}

// openWatch watches the source prefix from revision from on, waits for
// the source to accept it, and starts its pump.
func (mr *mirror) openWatch(ctx context.Context, from int64) (*sourceWatch, error) {
	key, end := span(mr.cfg.Prefix)
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	w := &sourceWatch{ctx: wctx, cancel: cancel, ready: make(chan struct{}, 1), done: make(chan struct{})}
	ch := mr.cfg.Source.Watch(wctx, key, clientv3.WithRange(end), clientv3.WithRev(from), clientv3.WithProgressNotify(), clientv3.WithCreatedNotify())
	t := time.NewTimer(mr.cfg.RequestTimeout)
	defer t.Stop()
	select {
	case <-ctx.Done():
		cancel()
		return nil, ctx.Err()
	case <-t.C:
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
	if mr.sourceHidden {
		return nil
	}
	mr.setFeeders(mr.feedersOf(mr.withoutFailedBack(all, mr.sourceID)), rev)
	mr.links = mr.followLinks(wctx, all, rev+1)
	w.links = mr.links
	return nil
}

// pump queues the watch's responses until the watch ends.
func (w *sourceWatch) pump(ch clientv3.WatchChan) {
	defer close(w.done)
	for {
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

// take returns up to n queued responses, the oldest first, and why the
// watch ended once nothing is left before its end.
func (w *sourceWatch) take(n int) ([]clientv3.WatchResponse, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.pending) > n {
		out := w.pending[:n:n]
		w.pending = w.pending[n:]
		return out, nil
	}
	out := w.pending
	w.pending = nil
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

// passResponses bounds the watch responses one pass of the stream loop
// applies (in as few transactions as MaxTxnOps allows), so that a long
// backlog leaves room between passes for restoring leases and for ctx.
const passResponses = 512

// stream applies the watch (opened from the revision after the checkpoint
// if w is nil) to the destination: each revision's events in one
// transaction with the checkpoint; when the mirror is behind, as many
// whole revisions in one transaction as MaxTxnOps allows. Progress
// notifications, asked for every ProgressInterval, move the checkpoint on
// while the prefix is idle, so that a restart does not replay revisions
// that were only other keys'. Destination leases that end while their
// source lease lives have their keys written again here, in the loop that
// applies the watch, so that a restored value can never overtake a later
// change of the same key.
func (mr *mirror) stream(ctx context.Context, w *sourceWatch) error {
	if w == nil {
		var err error
		if w, err = mr.openWatch(ctx, mr.cp.Revision+1); err != nil {
			return err
		}
	}
	defer w.stop()
	if err := mr.checkLeases(ctx); err != nil {
		return err
	}
	tick := mr.clock.NewTicker(mr.cfg.ProgressInterval)
	defer tick.Stop()
	var lost <-chan struct{}
	if mr.leases != nil {
		lost = mr.leases.lostc
	}
	var lastProgress time.Time
	// unanswered counts the progress requests since the last response: etcd
	// answers none while the watch waits for a revision the source has not
	// reached (its RequestProgress skips such watchers), which is where a
	// watch the client resumed on a restored source waits.
	unanswered := 0
	for {
		// Leases that ended while the mirror is busy are restored between
		// passes, not only once the source goes quiet.
		select {
		case <-lost:
			if err := mr.restore(ctx, mr.leases.takeLost()); err != nil {
				return err
			}
		default:
		}
		batch, failed := w.take(passResponses)
		if len(batch) == 0 && failed == nil {
			asked, err := mr.idle(ctx, w, tick.Chan(), lost)
			if err != nil {
				return err
			}
			if asked {
				unanswered++
			}
			if unanswered >= unansweredProgress {
				if err := mr.checkSource(ctx); err != nil {
					return err
				}
				unanswered = 0
			}
			continue
		}
		unanswered = 0
		events, progress := eventsOf(batch)
		if failed != nil {
			return errors.Join(mr.apply(ctx, events), failed)
		}
		if progress > 0 {
			if err := mr.suspectSource(ctx, progress); err != nil {
				return err
			}
		}
		pos := progress // a progress notification's
		if n := len(events); n > 0 {
			pos = max(pos, events[n-1].Kv.ModRevision)
		}
		mr.m.sourceAt(pos, mr.clock.Now())
		if len(events) > 0 {
			if err := mr.apply(ctx, events); err != nil {
				return err
			}
		} else if next, ok := core.ProgressCheckpoint(*mr.cp, progress, mr.clock.Now(), lastProgress, mr.cfg.ProgressInterval); ok {
			if _, err := mr.commit(ctx, nil, next); err != nil {
				return err
			}
			lastProgress = mr.clock.Now()
		}
		mr.m.appliedAt(mr.cp.Revision)
	}
}

// unansweredProgress is how many progress requests in a row may go
// unanswered before the mirror reads the source's revision itself.
const unansweredProgress = 2

// idle waits, with nothing queued, for the watch, a progress tick (the
// source is asked where it is: asked) or a lost lease (restored).
func (mr *mirror) idle(ctx context.Context, w *sourceWatch, tick <-chan time.Time, lost <-chan struct{}) (asked bool, err error) {
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case <-tick:
		pctx, cancel := context.WithTimeout(w.ctx, mr.cfg.RequestTimeout)
		err := mr.cfg.Source.RequestProgress(pctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			return false, fmt.Errorf("mirror: source progress: %w", err)
		}
		return true, nil
	case <-lost:
		return false, mr.restore(ctx, mr.leases.takeLost())
	case <-w.ready:
	}
	return false, nil
}

// eventsOf are the events of a pass's watch responses, in order, and the
// newest revision a progress notification among them reported.
func eventsOf(batch []clientv3.WatchResponse) ([]*mvccpb.Event, int64) {
	var events []*mvccpb.Event
	var progress int64
	for _, resp := range batch {
		switch {
		case resp.Created:
		case resp.IsProgressNotify():
			progress = max(progress, resp.Header.Revision)
		default:
			for _, ev := range resp.Events {
				events = append(events, (*mvccpb.Event)(ev))
			}
		}
	}
	return events, progress
}

// apply writes events, grouped by revision into as few transactions as
// the op limit allows (core.Plan), each with the checkpoint of the last
// revision in it.
func (mr *mirror) apply(ctx context.Context, events []*mvccpb.Event) error {
	if len(events) == 0 {
		return nil
	}
	var kvs []*mvccpb.KeyValue
	for _, ev := range events {
		if ev.Type == mvccpb.PUT {
			kvs = append(kvs, ev.Kv)
		}
	}
	foreign, err := mr.mirrored(ctx, kvs)
	if err != nil {
		return err
	}
	if err := mr.ensureLeases(ctx, foreign.NotIn(kvs)); err != nil {
		return err
	}
	for _, t := range core.Plan(*mr.cp, events, mr.budget(), mr.mapping(), foreign) {
		if _, err := mr.commit(ctx, mr.opsOf(t.Changes), t.Checkpoint); err != nil {
			return err
		}
		if t.Revisions > 0 {
			mr.m.applied.Add(float64(t.Revisions))
		}
	}
	return nil
}
