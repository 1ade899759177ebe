package mirror

import (
	"context"
	"fmt"
	"strings"

	"github.com/understudy-kv/understudy/mirror/core"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Adoption (--failback, see failback.go). The mirror failed back from
// (A → B) keeps, in this mirror's source B, an ownership record of every
// key it copied, named by its B key, which is this mirror's source key:
// the A key it was copied from is that key mapped into this mirror's
// destination. Such an A key is adopted, an ownership record of this
// mirror put beside it (on its lease, compared on its ModRevision so that
// a concurrent write wins), unless A's version is newer than the cutover
// record's revision: B never held that version, and a write acknowledged
// in A after the switchover is not this mirror's to overwrite. The sync
// that follows overwrites the adopted keys with B's, and its sweep deletes
// those B no longer has.

// adoptOp puts this mirror's ownership record beside a destination key,
// if the key is still the version read.
func (mr *mirror) adoptOp(kv *mvccpb.KeyValue) owned {
	var opts []clientv3.OpOption
	if kv.Lease != 0 {
		opts = append(opts, clientv3.WithLease(clientv3.LeaseID(kv.Lease)))
	}
	k := string(kv.Key)
	return owned{key: k, op: clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(k), "=", kv.ModRevision)},
		[]clientv3.Op{clientv3.OpPut(mr.ownPrefix+k, "", opts...)}, nil)}
}

// adoption counts what adopt did, for its log line.
type adoption struct {
	adopted, newer int
	sample         []string
}

// adopt takes over the destination keys the mirror failed back from had
// copied (core.Adoptable picks them), a page of its records at a time, recording the last record done
// in the checkpoint (AdoptedThrough), and Adopted once done.
func (mr *mirror) adopt(ctx context.Context) error {
	own := ownPrefix(mr.failback.From)
	key, end := span(mr.cfg.Prefix)
	start, oend := own+key, own+end
	if mr.cfg.Prefix == "" {
		start, oend = own, clientv3.GetPrefixRangeEnd(own)
	}
	if after := mr.st.Checkpoint().AdoptedThrough; after != "" {
		start = own + after + "\x00"
	}
	var a adoption
	for {
		page, err := mr.get(ctx, mr.cfg.Source, start, clientv3.WithRange(oend), clientv3.WithKeysOnly(), clientv3.WithLimit(int64(mr.cfg.PageSize)))
		if err != nil {
			return fmt.Errorf("mirror: --failback: ownership records of mirror %q in the source: %w", mr.failback.From, err)
		}
		if len(page.Kvs) == 0 {
			break
		}
		if err := mr.adoptPage(ctx, page.Kvs, own, &a); err != nil {
			return err
		}
		if !page.More {
			break
		}
		start = string(page.Kvs[len(page.Kvs)-1].Key) + "\x00"
	}
	if _, err := mr.commit(ctx, nil, mr.st.AdoptionDone()); err != nil {
		return err
	}
	mr.lg.Info("--failback: took over the destination's keys that the mirror failed back from had copied; the others are left alone",
		zap.String("from", mr.failback.From), zap.Int("adopted", a.adopted), zap.Int("left-newer-than-cutover", a.newer),
		zap.Strings("left-sample", a.sample), zap.Int64("cutover-revision", mr.failback.CutRev))
	return nil
}

// adoptPage adopts the destination copies of one page of the reverse
// mirror's ownership records (recs, keys-only).
func (mr *mirror) adoptPage(ctx context.Context, recs []*mvccpb.KeyValue, own string, a *adoption) error {
	srcKeys := make([]string, len(recs))
	keys := make([]string, len(recs))
	for i, r := range recs {
		srcKeys[i] = strings.TrimPrefix(string(r.Key), own)
		keys[i] = mr.mapKey([]byte(srcKeys[i]))
	}
	dest := map[string]*mvccpb.KeyValue{}
	p := &pager{cli: mr.cfg.Dest, next: keys[0], end: keys[len(keys)-1] + "\x00", size: mr.cfg.PageSize, keysOnly: true}
	for {
		rctx, cancel := context.WithTimeout(ctx, mr.cfg.RequestTimeout)
		kv, err := p.get(rctx)
		cancel()
		if err != nil {
			return fmt.Errorf("mirror: --failback: destination: %w", err)
		}
		if kv == nil {
			break
		}
		dest[string(kv.Key)] = kv
	}
	adopt, newer := core.Adoptable(keys, dest, mr.failback.CutRev)
	a.newer += len(newer)
	for _, k := range newer {
		if len(a.sample) < 5 {
			a.sample = append(a.sample, k)
		}
	}
	ops := make([]owned, len(adopt))
	for i, kv := range adopt {
		ops[i] = mr.adoptOp(kv)
	}
	for chunk := range core.Chunks(ops, mr.batch()) {
		next := mr.st.AdoptedThrough(mr.unmapKey([]byte(chunk[len(chunk)-1].key)))
		if _, err := mr.commit(ctx, chunk, next); err != nil {
			return err
		}
		a.adopted += len(chunk)
		mr.m.adopted.Add(float64(len(chunk)))
	}
	return nil
}
