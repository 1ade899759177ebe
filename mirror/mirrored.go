package mirror

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/understudy-kv/understudy/mirror/core"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Keys other mirrors wrote. A mirror does not copy a source key whose
// version another mirror wrote into the source (a feeder: its checkpoint
// is in the source cluster and its image overlaps the prefix), unless
// Config.CopyMirrored says to: such keys are that mirror's copy of a third
// place, and copying them on is how cycles start. A copy this mirror made
// earlier of such a key is deleted (the key became another mirror's). The
// feeder's ownership record of the key says who wrote a version: a mirror
// puts the key and its record in one transaction, so the version it wrote
// has the record's ModRevision (core.WroteIt decides from it).

// feeders are the mirrors, among links, that write into this mirror's
// source under its prefix.
func (mr *mirror) feedersOf(links []link) []link {
	var out []link
	for _, l := range links {
		if l.dst == mr.sourceID && overlap(l.dstPrefix, mr.cfg.Prefix) && !(l.dst == mr.destID && l.name == mr.cfg.Name) {
			out = append(out, l)
		}
	}
	return out
}

// mirrored returns the versions among kvs (source keys, in any order)
// that a feeder wrote; none under CopyMirrored.
func (mr *mirror) mirrored(ctx context.Context, kvs []*mvccpb.KeyValue) (core.Versions, error) {
	out := core.Versions{}
	if mr.cfg.CopyMirrored || len(kvs) == 0 {
		return out, nil
	}
	var newest int64
	for _, kv := range kvs {
		newest = max(newest, kv.ModRevision)
	}
	if err := mr.refreshFeeders(ctx, newest); err != nil {
		return nil, err
	}
	for _, f := range mr.feeders.list {
		var mine []*mvccpb.KeyValue
		lo, hi := "", ""
		for _, kv := range kvs {
			k := string(kv.Key)
			if !strings.HasPrefix(k, f.dstPrefix) || reserved(kv.Key) {
				continue
			}
			mine = append(mine, kv)
			if lo == "" || k < lo {
				lo = k
			}
			hi = max(hi, k)
		}
		if len(mine) == 0 {
			continue
		}
		if err := mr.feederWrote(ctx, f.name, mine, lo, hi, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// feederWrote adds to out the versions of kvs (keys in [lo, hi]) that the
// feeder named name wrote.
func (mr *mirror) feederWrote(ctx context.Context, name string, kvs []*mvccpb.KeyValue, lo, hi string, out core.Versions) error {
	own := ownPrefix(name)
	recs := map[string]*mvccpb.KeyValue{}
	p := &pager{cli: mr.cfg.Source, next: own + lo, end: own + hi + "\x00", size: mr.cfg.PageSize, keysOnly: true, all: true}
	for {
		rctx, cancel := context.WithTimeout(ctx, mr.cfg.RequestTimeout)
		rec, err := p.get(rctx)
		cancel()
		if err != nil {
			return fmt.Errorf("mirror: ownership records of mirror %q in the source: %w", name, err)
		}
		if rec == nil {
			break
		}
		recs[strings.TrimPrefix(string(rec.Key), own)] = rec
	}
	for _, kv := range kvs {
		k := string(kv.Key)
		switch core.WroteIt(kv.ModRevision, recs[k]) {
		case core.ByFeeder:
			out[core.Version{Key: k, Rev: kv.ModRevision}] = true
		case core.AskAtRev:
			resp, err := mr.get(ctx, mr.cfg.Source, own+k, clientv3.WithRev(kv.ModRevision), clientv3.WithKeysOnly())
			switch {
			case errors.Is(err, rpctypes.ErrCompacted):
				// Which writer is lost; the key's newer version is the
				// feeder's: leave this one out too.
				out[core.Version{Key: k, Rev: kv.ModRevision}] = true
			case err != nil:
				return fmt.Errorf("mirror: ownership record of mirror %q in the source at revision %d: %w", name, kv.ModRevision, err)
			case len(resp.Kvs) > 0 && core.WroteIt(kv.ModRevision, resp.Kvs[0]) == core.ByFeeder:
				out[core.Version{Key: k, Rev: kv.ModRevision}] = true
			}
		}
	}
	return nil
}

// dropMirrored leaves out of kvs the versions a feeder wrote.
func (mr *mirror) dropMirrored(ctx context.Context, kvs []*mvccpb.KeyValue) ([]*mvccpb.KeyValue, error) {
	foreign, err := mr.mirrored(ctx, kvs)
	if err != nil {
		return nil, err
	}
	return foreign.NotIn(kvs), nil
}
