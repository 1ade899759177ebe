package mirror

import (
	"context"
	"fmt"
	"strings"

	"github.com/understudy-kv/understudy/mirror/core"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Ownership. Beside every destination key it writes, a mirror keeps an
// ownership record (ownKey), put and deleted in the same transaction as the
// key and on the same lease, so that the two come and go together. A
// mirror overwrites or deletes a destination key only if the record is
// there, or if the key does not exist yet; the check is a compare inside
// the transaction, so a key another writer creates at the same moment is
// never overwritten either. Policy picks what happens to the keys of the
// image the mirror did not write; core.PutGuard and core.DeleteGuard
// decide the compare, this file builds it.
type Policy = core.Policy

const (
	// Keep (the default) never touches a key the mirror did not write.
	Keep = core.Keep
	// Overwrite copies over keys the mirror did not write.
	Overwrite = core.Overwrite
	// Prune makes the image an exact copy of the source.
	Prune = core.Prune
)

// nestedOps is how many operations the ownership checks add to a
// transaction's budget (core.NestedOps).
const nestedOps = core.NestedOps

// ownPrefix holds the ownership records of the mirror named name.
func ownPrefix(name string) string { return ReservedPrefix + name + "/own/" }

// owned is one mirrored change as a destination operation, with the key
// it changes (to report conflicts).
type owned struct {
	key string
	put bool
	op  clientv3.Op
}

// putOwned writes key (and its ownership record) under the guard of the
// mirror's policy.
func (mr *mirror) putOwned(key, val string, lease clientv3.LeaseID) owned {
	own := mr.ownPrefix + key
	var opts []clientv3.OpOption
	if lease != 0 {
		opts = append(opts, clientv3.WithLease(lease))
	}
	write := []clientv3.Op{clientv3.OpPut(key, val, opts...), clientv3.OpPut(own, "", opts...)}
	if core.PutGuard(mr.cfg.Policy()) == core.Always {
		return owned{key: key, put: true, op: clientv3.OpTxn(nil, write, nil)}
	}
	absent := clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)}, write, nil)
	return owned{key: key, put: true, op: clientv3.OpTxn(
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(own), ">", 0)}, write, []clientv3.Op{absent})}
}

// deleteOwned deletes key (and its ownership record) under the guard of
// the mirror's policy.
func (mr *mirror) deleteOwned(key string) owned {
	own := mr.ownPrefix + key
	del := []clientv3.Op{clientv3.OpDelete(key), clientv3.OpDelete(own)}
	if core.DeleteGuard(mr.cfg.Policy()) == core.Always {
		return owned{key: key, op: clientv3.OpTxn(nil, del, nil)}
	}
	return owned{key: key, op: clientv3.OpTxn(
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(own), ">", 0)}, del, nil)}
}

// skipped lists the puts of ops that a transaction's response says were
// not written (core.Answer): the key exists and the mirror does not own it.
func skipped(ops []owned, resp []*pb.ResponseOp) []string {
	var out []string
	for i, o := range ops {
		if !o.put || i >= len(resp) {
			continue
		}
		t := resp[i].GetResponseTxn()
		if t == nil {
			continue
		}
		a := core.Answer{Then: t.Succeeded}
		if len(t.Responses) == 1 {
			if inner := t.Responses[0].GetResponseTxn(); inner != nil {
				a.ElseTxn, a.ElseThen = true, inner.Succeeded
			}
		}
		if !a.Written() {
			out = append(out, o.key)
		}
	}
	return out
}

// unowned counts the keys of the destination image that the mirror named
// name did not write, and returns the first few.
func unowned(ctx context.Context, dst *clientv3.Client, destPrefix, name string, pageSize int, few int) (int, []string, error) {
	key, end := span(destPrefix)
	keys := &pager{cli: dst, next: key, end: end, size: pageSize, keysOnly: true}
	oKey, oEnd := span(ownPrefix(name))
	owns := &pager{cli: dst, next: oKey, end: oEnd, size: pageSize, keysOnly: true, all: true}
	n, sample := 0, []string(nil)
	o, err := owns.get(ctx)
	if err != nil {
		return 0, nil, fmt.Errorf("mirror: destination ownership records: %w", err)
	}
	for {
		kv, err := keys.get(ctx)
		if err != nil {
			return 0, nil, fmt.Errorf("mirror: destination: %w", err)
		}
		if kv == nil {
			return n, sample, nil
		}
		k := string(kv.Key)
		for o != nil && strings.TrimPrefix(string(o.Key), ownPrefix(name)) < k {
			if o, err = owns.get(ctx); err != nil {
				return 0, nil, fmt.Errorf("mirror: destination ownership records: %w", err)
			}
		}
		if o != nil && strings.TrimPrefix(string(o.Key), ownPrefix(name)) == k {
			continue
		}
		n++
		if len(sample) < few {
			sample = append(sample, k)
		}
	}
}
