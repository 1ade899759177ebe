package mirror

import (
	"context"
	"errors"
	"fmt"

	"github.com/understudy-kv/understudy/mirror/core"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// sync brings the destination image level with the source without
// pinning a source revision, so that it finishes however often the source
// compacts (the etcd-operator EtcdMirror design):
//
//  1. note the source revision H (in the checkpoint) and open a watch from
//     H+1, before reading anything: every change from then on is in it;
//  2. copy the prefix a page at a time, each page at the source's newest
//     revision (no revision to compact away), each transaction recording
//     the last key copied, so that an interrupted sync resumes after it;
//  3. sweep: delete the destination keys the mirror owns (all of them
//     under Prune) that the source no longer has;
//  4. stream the watch from H+1.
//
// Each key then holds a value the source had at some revision ≥ H, and
// the watch replays every change after H in order, so once the checkpoint
// reaches the newest revision the copy read, the image is exact. The watch
// is read as the copy goes, so a compaction cannot strand it; if the
// source has compacted H away before the watch opens (the mirror was
// interrupted), the sync starts again from the first key.
func (mr *mirror) sync(ctx context.Context) (*sourceWatch, error) {
	if mr.st.SyncFromScratch() {
		head, err := mr.sourceHead(ctx)
		if err != nil {
			return nil, err
		}
		if _, err := mr.commit(ctx, nil, mr.st.StartSync(head)); err != nil {
			return nil, err
		}
	}
	w, err := mr.openWatch(ctx, mr.st.Revision()+1)
	if err != nil {
		return nil, err
	}
	compare, sweep := mr.st.SyncPlan(mr.cfg.Policy())
	if err := mr.copyAll(ctx, w, compare); err != nil {
		w.stop()
		return nil, err
	}
	if sweep {
		if err := mr.sweep(ctx, w); err != nil {
			w.stop()
			return nil, err
		}
	}
	next := mr.st.SyncDone()
	if _, err := mr.commit(ctx, nil, next); err != nil {
		w.stop()
		return nil, err
	}
	mr.lg.Info("full sync done; streaming", zap.Int64("from-revision", next.Revision+1))
	return w, nil
}

// sourceHead is the source's revision now.
func (mr *mirror) sourceHead(ctx context.Context) (int64, error) {
	rctx, cancel := context.WithTimeout(ctx, mr.cfg.RequestTimeout)
	defer cancel()
	_, head, err := clusterID(rctx, mr.cfg.Source)
	if err != nil {
		return 0, fmt.Errorf("mirror: source revision: %w", err)
	}
	return head, nil
}

// copyAll copies the source prefix after the checkpoint's SyncedThrough,
// comparing each page with the destination's copies first if compare (not
// into an image the mirror never wrote: core.State.SyncPlan).
func (mr *mirror) copyAll(ctx context.Context, w *sourceWatch, compare bool) error {
	key, end := span(mr.cfg.Prefix)
	start := key
	cp := mr.st.Checkpoint()
	if after := cp.SyncedThrough; after != "" {
		start = after + "\x00"
	}
	var total, copied int64
	if resp, err := mr.get(ctx, mr.cfg.Source, key, clientv3.WithRange(end), clientv3.WithCountOnly()); err == nil {
		total = resp.Count
	}
	if start != key {
		if resp, err := mr.get(ctx, mr.cfg.Source, key, clientv3.WithRange(start), clientv3.WithCountOnly()); err == nil {
			copied = resp.Count
		}
	}
	mr.lg.Info("syncing in full", zap.Int64("watch-from", cp.Revision+1), zap.Int64("keys", total),
		zap.Int64("already-copied", copied), zap.Stringer("policy", mr.cfg.Policy()), zap.Bool("compare-first", compare))
	var written, unchanged int
	for {
		if err := w.poll(); err != nil {
			return err
		}
		page, err := mr.get(ctx, mr.cfg.Source, start, clientv3.WithRange(end), clientv3.WithLimit(int64(mr.cfg.PageSize)))
		if err != nil {
			return sourceErr(err)
		}
		if len(page.Kvs) == 0 {
			break
		}
		foreign, err := mr.mirrored(ctx, page.Kvs)
		if err != nil {
			return err
		}
		if err := mr.ensureLeases(ctx, foreign.NotIn(page.Kvs)); err != nil {
			return err
		}
		n, same, err := mr.copyPage(ctx, page.Kvs, foreign, compare)
		if err != nil {
			return err
		}
		written, unchanged = written+n, unchanged+same
		copied += int64(len(page.Kvs))
		if mr.cfg.Progress != nil {
			mr.cfg.Progress(copied, max(total, copied))
		}
		if !page.More {
			break
		}
		start = string(page.Kvs[len(page.Kvs)-1].Key) + "\x00"
	}
	if compare {
		mr.lg.Info("full sync compared the destination first: wrote only the keys that differ", zap.Int("written", written),
			zap.Int("unchanged", unchanged), zap.Int("resyncs", cp.Resyncs))
	}
	return nil
}

// copyPage writes a page of a full sync (only the keys that differ, if
// compare), then moves the checkpoint's SyncedThrough to its last key
// (core.PlanPage); it returns how many keys it wrote and how many it found
// unchanged.
func (mr *mirror) copyPage(ctx context.Context, kvs []*mvccpb.KeyValue, foreign core.Versions, compare bool) (int, int, error) {
	changes, same, err := mr.pageOps(ctx, kvs, foreign, compare)
	if err != nil {
		return 0, 0, err
	}
	for _, t := range core.PlanPage(*mr.st.Checkpoint(), changes, string(kvs[len(kvs)-1].Key), mr.budget()) {
		if _, err := mr.commit(ctx, mr.opsOf(t.Changes), t.Checkpoint); err != nil {
			return 0, 0, err
		}
		if len(t.Changes) > 0 {
			mr.m.syncedKeys.Add(float64(len(t.Changes)))
		}
	}
	if compare {
		mr.m.resyncWritten.Add(float64(len(changes)))
		mr.m.resyncUnchanged.Add(float64(same))
	}
	return len(changes), same, nil
}

// sweep deletes the destination keys of the image that the source does
// not have now: those it owns, or every one under Prune. It walks the
// destination a page at a time and reads the source's matching span, so
// memory stays bounded by a page. A key the source creates after its span
// was read comes by the watch.
func (mr *mirror) sweep(ctx context.Context, w *sourceWatch) error {
	key, end := span(mr.cfg.DestPrefix)
	start, deleted, kept := key, 0, 0
	for {
		if err := w.poll(); err != nil {
			return err
		}
		page, err := mr.get(ctx, mr.cfg.Dest, start, clientv3.WithRange(end), clientv3.WithKeysOnly(), clientv3.WithLimit(int64(mr.cfg.PageSize)))
		if err != nil {
			return fmt.Errorf("mirror: destination: %w", err)
		}
		var keys []string
		for _, kv := range page.Kvs {
			if !reserved(kv.Key) {
				keys = append(keys, string(kv.Key))
			}
		}
		if len(keys) > 0 {
			inSource, err := mr.sourceHas(ctx, mr.unmapKey([]byte(keys[0])), mr.unmapKey([]byte(keys[len(keys)-1]))+"\x00")
			if err != nil {
				return err
			}
			dels := mr.opsOf(core.Gone(keys, inSource))
			for chunk := range core.Chunks(dels, mr.batch()) {
				resp, err := mr.commitResp(ctx, chunk)
				if err != nil {
					return err
				}
				for _, r := range resp {
					if t := r.GetResponseTxn(); t != nil && t.Succeeded {
						deleted++
					} else {
						kept++
					}
				}
			}
		}
		if !page.More || len(page.Kvs) == 0 {
			break
		}
		start = skipReserved(string(page.Kvs[len(page.Kvs)-1].Key)+"\x00", end)
	}
	if deleted > 0 || kept > 0 {
		mr.lg.Info("swept the destination: deleted the keys the source no longer has", zap.Int("deleted", deleted),
			zap.Int("kept-not-written-by-this-mirror", kept), zap.Stringer("policy", mr.cfg.Policy()))
	}
	return nil
}

// sourceHas reads which keys the source has in [lo, hi) now, by their
// destination names.
func (mr *mirror) sourceHas(ctx context.Context, lo, hi string) (map[string]bool, error) {
	out := map[string]bool{}
	for {
		resp, err := mr.get(ctx, mr.cfg.Source, lo, clientv3.WithRange(hi), clientv3.WithKeysOnly(), clientv3.WithLimit(int64(mr.cfg.PageSize)))
		if err != nil {
			return nil, sourceErr(err)
		}
		for _, kv := range resp.Kvs {
			out[mr.mapKey(kv.Key)] = true
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return out, nil
		}
		lo = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// get reads with the request timeout.
func (mr *mirror) get(ctx context.Context, cli *clientv3.Client, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	rctx, cancel := context.WithTimeout(ctx, mr.cfg.RequestTimeout)
	defer cancel()
	return cli.Get(rctx, key, opts...)
}

// batch is how many changes go in one transaction.
func (mr *mirror) batch() int { return mr.cfg.MaxTxnOps - nestedOps - 1 }

// budget is what one transaction may hold: batch changes, in at most three
// quarters of the destination's --max-request-bytes (the rest is the
// checkpoint, the transaction's framing, and ChangeBytes's error).
func (mr *mirror) budget() core.Budget {
	return core.Budget{Ops: mr.batch(), Bytes: mr.cfg.MaxRequestBytes * 3 / 4}
}

// putOp copies one source key, with the destination lease of its source
// lease if it has one (ensureLeases has been called for it).
func (mr *mirror) putOp(kv *mvccpb.KeyValue) owned { return mr.putAs(mr.mapKey(kv.Key), kv) }

// putAs copies one source key to the destination key key.
func (mr *mirror) putAs(key string, kv *mvccpb.KeyValue) owned {
	var id clientv3.LeaseID
	if kv.Lease != 0 && mr.leases != nil {
		// 0 if the source lease has expired: the key's delete is on its way.
		id = mr.leases.dest(kv.Lease)
	}
	return mr.putOwned(key, string(kv.Value), id)
}

// opsOf are changes as destination operations; a put of a version
// another mirror wrote is counted as it becomes a delete.
func (mr *mirror) opsOf(changes []core.Change) []owned {
	out := make([]owned, len(changes))
	for i, c := range changes {
		switch {
		case c.Put != nil:
			out[i] = mr.putAs(c.Key, c.Put)
		case c.Foreign:
			mr.m.mirroredSkipped.Inc()
			out[i] = mr.deleteOwned(c.Key)
		default:
			out[i] = mr.deleteOwned(c.Key)
		}
	}
	return out
}

// ensureLeases gives every source lease of kvs a destination lease.
func (mr *mirror) ensureLeases(ctx context.Context, kvs []*mvccpb.KeyValue) error {
	if mr.leases == nil {
		return nil
	}
	var ids []int64
	for _, kv := range kvs {
		if kv.Lease != 0 {
			ids = append(ids, kv.Lease)
		}
	}
	return mr.leases.ensure(ctx, ids)
}

// sourceErr tells compaction, which needs a new full sync, from the rest.
func sourceErr(err error) error {
	if errors.Is(err, rpctypes.ErrCompacted) {
		return errCompacted
	}
	return fmt.Errorf("mirror: source: %w", err)
}

// skipReserved moves a scan's next key past the mirrors' own keys.
func skipReserved(next, end string) string {
	rend := clientv3.GetPrefixRangeEnd(ReservedPrefix)
	if next >= ReservedPrefix && next < rend && (end == "\x00" || end > rend) {
		return rend
	}
	return next
}
