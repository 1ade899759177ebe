package mirror

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// stream watches the source from the revision after the checkpoint and
// applies each revision's events in one destination transaction with the
// checkpoint; when a response carries many revisions (the mirror is
// behind), as many whole revisions go in one transaction as MaxTxnOps
// allows. Progress notifications, asked for every ProgressInterval, move
// the checkpoint on while the prefix is idle, so that a restart does not
// replay revisions that were only other keys'.
func (mr *mirror) stream(ctx context.Context) error {
	key, end := span(mr.cfg.Prefix)
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := mr.cfg.Source.Watch(wctx, key, clientv3.WithRange(end), clientv3.WithRev(mr.cp.Revision+1), clientv3.WithProgressNotify())
	tick := time.NewTicker(mr.cfg.ProgressInterval)
	defer tick.Stop()
	var lastProgress time.Time
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			if err := mr.cfg.Source.RequestProgress(wctx); err != nil && ctx.Err() == nil {
				return fmt.Errorf("mirror: source progress: %w", err)
			}
		case resp, ok := <-wch:
			if !ok {
				return errors.New("mirror: source watch closed")
			}
			// Take every response already here: when the mirror is behind,
			// their revisions share transactions.
			batch := []clientv3.WatchResponse{resp}
		drain:
			for len(batch) < 64 {
				select {
				case more, ok := <-wch:
					if !ok {
						break drain
					}
					batch = append(batch, more)
				default:
					break drain
				}
			}
			var events []*clientv3.Event
			var progress int64
			for _, resp := range batch {
				if resp.CompactRevision != 0 || errors.Is(resp.Err(), rpctypes.ErrCompacted) {
					return errors.Join(mr.apply(ctx, events), errCompacted)
				}
				if err := resp.Err(); err != nil {
					return errors.Join(mr.apply(ctx, events), fmt.Errorf("mirror: source watch: %w", err))
				}
				if len(resp.Events) == 0 {
					progress = max(progress, resp.Header.Revision)
					continue
				}
				events = append(events, resp.Events...)
			}
			pos := progress // a progress notification's
			if n := len(events); n > 0 {
				pos = max(pos, events[n-1].Kv.ModRevision)
			}
			mr.m.sourceAt(pos)
			if len(events) > 0 {
				if err := mr.apply(ctx, events); err != nil {
					return err
				}
			} else if progress > mr.cp.Revision && time.Since(lastProgress) >= mr.cfg.ProgressInterval {
				// Every event up to this revision has been sent: nothing
				// of the prefix changed since the checkpoint.
				next := *mr.cp
				next.From, next.Revision = mr.cp.Revision+1, progress
				if err := mr.commit(ctx, nil, next); err != nil {
					return err
				}
				lastProgress = time.Now()
			}
			mr.m.appliedAt(mr.cp.Revision)
		}
	}
}

// apply writes events, grouped by revision, in as few transactions as the
// op limit allows, each with the checkpoint of the last revision in it.
func (mr *mirror) apply(ctx context.Context, events []*clientv3.Event) error {
	limit := mr.cfg.MaxTxnOps - 1
	var (
		ops   []clientv3.Op
		index = map[string]int{} // key → its op in ops: a later revision replaces it
		last  int64
		revs  int
	)
	flush := func() error {
		if revs == 0 {
			return nil
		}
		next := *mr.cp
		next.Phase, next.From, next.Revision = PhaseStream, mr.cp.Revision+1, last
		if err := mr.commit(ctx, ops, next); err != nil {
			return err
		}
		mr.m.applied.Add(float64(revs))
		ops, index, revs = nil, map[string]int{}, 0
		return nil
	}
	for len(events) > 0 {
		rev := events[0].Kv.ModRevision
		n := 1
		for n < len(events) && events[n].Kv.ModRevision == rev {
			n++
		}
		group := events[:n]
		events = events[n:]
		if len(ops)+len(group) > limit {
			if err := flush(); err != nil {
				return err
			}
		}
		if len(group) > limit {
			// One source transaction bigger than ours may be: all but its
			// last part go without moving the checkpoint. Its puts and
			// deletes are of distinct keys, so doing a part again after a
			// crash leaves the same state.
			for len(group) > limit {
				part, err := mr.ops(ctx, group[:limit])
				if err != nil {
					return err
				}
				if err := mr.commit(ctx, part, *mr.cp); err != nil {
					return err
				}
				group = group[limit:]
			}
		}
		for _, ev := range group {
			if reserved(ev.Kv.Key) {
				continue
			}
			op, err := mr.op(ctx, ev)
			if err != nil {
				return err
			}
			k := string(ev.Kv.Key)
			if i, ok := index[k]; ok {
				ops[i] = op // etcd refuses a key twice in one transaction
			} else {
				index[k] = len(ops)
				ops = append(ops, op)
			}
		}
		last = rev
		revs++
	}
	return flush()
}

func (mr *mirror) ops(ctx context.Context, evs []*clientv3.Event) ([]clientv3.Op, error) {
	out := make([]clientv3.Op, 0, len(evs))
	for _, ev := range evs {
		if reserved(ev.Kv.Key) {
			continue
		}
		op, err := mr.op(ctx, ev)
		if err != nil {
			return nil, err
		}
		out = append(out, op)
	}
	return out, nil
}

func (mr *mirror) op(ctx context.Context, ev *clientv3.Event) (clientv3.Op, error) {
	if ev.Type == mvccpb.DELETE {
		return clientv3.OpDelete(mr.mapKey(ev.Kv.Key)), nil
	}
	return mr.putOp(ctx, ev.Kv)
}
