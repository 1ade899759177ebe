package mirror

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/understudy-kv/understudy/mirror/core"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

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
		if w, err = mr.openWatch(ctx, mr.st.Revision()+1); err != nil {
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
		if err := mr.pass(ctx, events, progress, &lastProgress); err != nil {
			return err
		}
	}
}

// pass applies one pass's events, or, with none, moves the idle mirror's
// checkpoint to the revision a progress notification reported (at most
// every ProgressInterval; lastProgress is when it last did).
func (mr *mirror) pass(ctx context.Context, events []*mvccpb.Event, progress int64, lastProgress *time.Time) error {
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
	} else if next, ok := mr.st.Idle(progress, mr.clock.Now(), *lastProgress, mr.cfg.ProgressInterval); ok {
		if _, err := mr.commit(ctx, nil, next); err != nil {
			return err
		}
		*lastProgress = mr.clock.Now()
	}
	mr.m.appliedAt(mr.st.Revision())
	return nil
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
	for _, t := range core.Plan(*mr.st.Checkpoint(), events, mr.budget(), mr.mapping(), foreign) {
		if _, err := mr.commit(ctx, mr.opsOf(t.Changes), t.Checkpoint); err != nil {
			return err
		}
		if t.Revisions > 0 {
			mr.m.applied.Add(float64(t.Revisions))
		}
	}
	return nil
}
