package mirror

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// sync copies the source prefix as of one revision, page by page, each
// page's transaction carrying the checkpoint of how far it got; then
// deletes destination keys the source does not have at that revision; then
// moves the checkpoint to streaming from that revision. Interrupted, it
// resumes after the last key copied, as long as the source still has the
// revision.
func (mr *mirror) sync(ctx context.Context) error {
	var rev int64
	after := ""
	if mr.cp != nil && mr.cp.Phase == PhaseSync && mr.cp.Revision > 0 {
		rev, after = mr.cp.Revision, mr.cp.SyncedThrough
	} else {
		_, head, err := clusterID(ctx, mr.cfg.Source)
		if err != nil {
			return fmt.Errorf("mirror: source revision: %w", err)
		}
		next := mr.fresh()
		if mr.cp != nil {
			next.Resyncs = mr.cp.Resyncs
		}
		next.Phase, next.Revision = PhaseSync, head
		if err := mr.commit(ctx, nil, next); err != nil {
			return err
		}
		rev = head
	}
	key, end := span(mr.cfg.Prefix)
	total, err := mr.cfg.Source.Get(ctx, key, clientv3.WithRange(end), clientv3.WithRev(rev), clientv3.WithCountOnly())
	if err != nil {
		return sourceErr(err)
	}
	start, copied := key, int64(0)
	if after != "" {
		start = after + "\x00"
		done, err := mr.cfg.Source.Get(ctx, key, clientv3.WithRange(start), clientv3.WithRev(rev), clientv3.WithCountOnly())
		if err != nil {
			return sourceErr(err)
		}
		copied = done.Count
	}
	mr.lg.Info("syncing in full", zap.Int64("revision", rev), zap.Int64("keys", total.Count), zap.Int64("already-copied", copied))
	for {
		page, err := mr.cfg.Source.Get(ctx, start, clientv3.WithRange(end), clientv3.WithRev(rev), clientv3.WithLimit(int64(mr.cfg.PageSize)))
		if err != nil {
			return sourceErr(err)
		}
		if len(page.Kvs) == 0 {
			break
		}
		for chunk := range chunks(page.Kvs, mr.cfg.MaxTxnOps-1) {
			ops := make([]clientv3.Op, 0, len(chunk))
			for _, kv := range chunk {
				if reserved(kv.Key) {
					continue
				}
				op, err := mr.putOp(ctx, kv)
				if err != nil {
					return err
				}
				ops = append(ops, op)
			}
			next := *mr.cp
			next.SyncedThrough = string(chunk[len(chunk)-1].Key)
			if err := mr.commit(ctx, ops, next); err != nil {
				return err
			}
			copied += int64(len(chunk))
			mr.m.syncedKeys.Add(float64(len(chunk)))
			if mr.cfg.Progress != nil {
				mr.cfg.Progress(copied, total.Count)
			}
		}
		if !page.More {
			break
		}
		start = string(page.Kvs[len(page.Kvs)-1].Key) + "\x00"
	}
	if err := mr.deleteExtras(ctx, rev); err != nil {
		return err
	}
	next := *mr.cp
	next.Phase, next.SyncedThrough, next.From = PhaseStream, "", 0
	if err := mr.commit(ctx, nil, next); err != nil {
		return err
	}
	mr.lg.Info("full sync done; streaming", zap.Int64("revision", rev), zap.Int64("keys", copied))
	return nil
}

// deleteExtras deletes destination keys under the mapped prefix that the
// source did not have at rev: keys deleted while the mirror was away. It
// walks the destination a page at a time and asks the source for the same
// span, so memory stays bounded by a page.
func (mr *mirror) deleteExtras(ctx context.Context, rev int64) error {
	key, end := span(mr.cfg.DestPrefix)
	first, err := mr.cfg.Dest.Get(ctx, key, clientv3.WithRange(end), clientv3.WithCountOnly())
	if err != nil {
		return fmt.Errorf("mirror: destination: %w", err)
	}
	drev, start, deleted := first.Header.Revision, key, 0
	for {
		page, err := mr.cfg.Dest.Get(ctx, start, clientv3.WithRange(end), clientv3.WithRev(drev), clientv3.WithKeysOnly(), clientv3.WithLimit(int64(mr.cfg.PageSize)))
		if err != nil {
			return fmt.Errorf("mirror: destination: %w", err)
		}
		if len(page.Kvs) == 0 {
			break
		}
		lo, hi := mr.unmapKey(page.Kvs[0].Key), mr.unmapKey(page.Kvs[len(page.Kvs)-1].Key)+"\x00"
		have, err := mr.cfg.Source.Get(ctx, lo, clientv3.WithRange(hi), clientv3.WithRev(rev), clientv3.WithKeysOnly())
		if err != nil {
			return sourceErr(err)
		}
		inSource := make(map[string]bool, len(have.Kvs))
		for _, kv := range have.Kvs {
			inSource[mr.mapKey(kv.Key)] = true
		}
		var dels []clientv3.Op
		for _, kv := range page.Kvs {
			if !reserved(kv.Key) && !inSource[string(kv.Key)] {
				dels = append(dels, clientv3.OpDelete(string(kv.Key)))
			}
		}
		for chunk := range chunks(dels, mr.cfg.MaxTxnOps-1) {
			if err := mr.commit(ctx, chunk, *mr.cp); err != nil {
				return err
			}
			deleted += len(chunk)
		}
		if !page.More {
			break
		}
		start = string(page.Kvs[len(page.Kvs)-1].Key) + "\x00"
	}
	if deleted > 0 {
		mr.lg.Info("deleted destination keys the source no longer has", zap.Int("keys", deleted), zap.Int64("revision", rev))
	}
	return nil
}

// putOp copies one source key, with a destination lease if it has one.
func (mr *mirror) putOp(ctx context.Context, kv *mvccpb.KeyValue) (clientv3.Op, error) {
	if kv.Lease == 0 || mr.leases == nil {
		return clientv3.OpPut(mr.mapKey(kv.Key), string(kv.Value)), nil
	}
	id, err := mr.leases.dest(ctx, kv.Lease)
	if err != nil {
		return clientv3.Op{}, err
	}
	if id == 0 {
		// The source lease has expired: the key's delete is on its way.
		return clientv3.OpPut(mr.mapKey(kv.Key), string(kv.Value)), nil
	}
	return clientv3.OpPut(mr.mapKey(kv.Key), string(kv.Value), clientv3.WithLease(clientv3.LeaseID(id))), nil
}

// sourceErr tells compaction, which needs a new full sync, from the rest.
func sourceErr(err error) error {
	if errors.Is(err, rpctypes.ErrCompacted) {
		return errCompacted
	}
	return fmt.Errorf("mirror: source: %w", err)
}

// chunks splits s into runs of at most n.
func chunks[T any](s []T, n int) func(func([]T) bool) {
	return func(yield func([]T) bool) {
		for len(s) > 0 {
			k := min(n, len(s))
			if !yield(s[:k]) {
				return
			}
			s = s[k:]
		}
	}
}
