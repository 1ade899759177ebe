package mirror

import (
	"context"
	"fmt"
	"strings"

	"github.com/understudy-kv/understudy/mirror/core"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Cheap resyncs. A full sync into an image the mirror has written before
// (a resync after compaction, a restart in the middle of a sync) reads
// each page's destination copies and their ownership records first, and
// writes only the keys whose value, lease or ownership differs: a resync
// of an unchanged prefix writes nothing but its checkpoints. Keys the
// source no longer has are deleted by the sweep, as before; the watch
// from the sync's start revision brings what changes meanwhile.

// pageOps is the changes a page of a full sync needs (core.PageChanges),
// and how many of its keys the destination already holds as they would be
// written. With compare false (a first sync into an image the mirror never
// wrote) every key is written.
func (mr *mirror) pageOps(ctx context.Context, kvs []*mvccpb.KeyValue, foreign core.Versions, compare bool) ([]core.SyncChange, int, error) {
	var have map[string]core.Copy
	if compare && len(kvs) > 0 {
		var err error
		have, err = mr.destCopies(ctx, mr.mapKey(kvs[0].Key), mr.mapKey(kvs[len(kvs)-1].Key)+"\x00")
		if err != nil {
			return nil, 0, err
		}
	}
	changes, same := core.PageChanges(kvs, have, foreign, compare, mr.mapping(), mr.wantLease)
	return changes, same, nil
}

// wantLease is the destination lease putOp gives a source key's copy.
func (mr *mirror) wantLease(kv *mvccpb.KeyValue) int64 {
	if kv.Lease == 0 || mr.leases == nil {
		return 0
	}
	return int64(mr.leases.dest(kv.Lease))
}

// destCopies reads the destination keys in [lo, hi) and the mirror's
// ownership records of them, by destination key.
func (mr *mirror) destCopies(ctx context.Context, lo, hi string) (map[string]core.Copy, error) {
	out := map[string]core.Copy{}
	for _, r := range outsideReserved(lo, hi) {
		if err := mr.scan(ctx, r[0], r[1], func(kv *mvccpb.KeyValue) {
			c := out[string(kv.Key)]
			c.KV = kv
			out[string(kv.Key)] = c
		}); err != nil {
			return nil, fmt.Errorf("mirror: destination: %w", err)
		}
	}
	if err := mr.scan(ctx, mr.ownPrefix+lo, mr.ownPrefix+hi, func(kv *mvccpb.KeyValue) {
		k := strings.TrimPrefix(string(kv.Key), mr.ownPrefix)
		c := out[k]
		c.Own = kv
		out[k] = c
	}); err != nil {
		return nil, fmt.Errorf("mirror: destination ownership records: %w", err)
	}
	return out, nil
}

// scan reads the destination's keys in [lo, hi) a page at a time.
func (mr *mirror) scan(ctx context.Context, lo, hi string, f func(*mvccpb.KeyValue)) error {
	for lo < hi {
		resp, err := mr.get(ctx, mr.cfg.Dest, lo, clientv3.WithRange(hi), clientv3.WithLimit(int64(mr.cfg.PageSize)))
		if err != nil {
			return err
		}
		for _, kv := range resp.Kvs {
			f(kv)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return nil
		}
		lo = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	return nil
}

// outsideReserved splits [lo, hi) into the ranges outside the mirrors'
// own keys.
func outsideReserved(lo, hi string) [][2]string {
	rlo, rhi := ReservedPrefix, clientv3.GetPrefixRangeEnd(ReservedPrefix)
	var out [][2]string
	if lo < rlo {
		out = append(out, [2]string{lo, min(hi, rlo)})
	}
	if hi > rhi {
		out = append(out, [2]string{max(lo, rhi), hi})
	}
	return out
}
