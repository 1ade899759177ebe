package cascade

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/server/v3/etcdserver"
	"go.etcd.io/etcd/server/v3/lease"
	"go.etcd.io/etcd/server/v3/storage/mvcc"
)

// applier applies source revisions to the local store, one local
// transaction each, so that the local revision is the source's; it checks
// each revision after applying it (check). It is the local store's only
// writer, and not safe for concurrent use: the follow loop owns it.
type applier struct {
	srv *etcdserver.EtcdServer
	// leases are the lease IDs the local lessor has.
	leases map[int64]bool
	// value, nil but in tests, alters what is written (Config.ApplyValue).
	value func(key, value []byte) []byte
	// applied is told every revision applied (Store.applied).
	applied func(rev int64)
	// last is what the store holds at its revision: the keys it put last
	// (verify checks an upstream holds them so too).
	last fingerprint
}

func newApplier(ctx context.Context, srv *etcdserver.EtcdServer, value func(key, value []byte) []byte, applied func(int64)) (*applier, error) {
	a := &applier{srv: srv, leases: map[int64]bool{}, value: value, applied: applied}
	ls, err := srv.LeaseLeases(ctx, &pb.LeaseLeasesRequest{})
	if err != nil {
		return nil, fmt.Errorf("cascade: the local store's leases: %w", err)
	}
	for _, l := range ls.Leases {
		a.leases[l.ID] = true
	}
	return a, nil
}

// rev is the local store's revision.
func (a *applier) rev() int64 { return a.srv.KV().Rev() }

// fingerprint is what the store holds at its revision: the keys it put
// last. When the revisions applied since deleted every one of them, it is
// read again from the store.
func (a *applier) fingerprint() (fingerprint, error) {
	if a.last.rev == a.rev() && len(a.last.kvs) > 0 {
		return a.last, nil
	}
	fp, err := localFingerprint(a.srv.KV())
	if err == nil {
		a.last = fp
	}
	return fp, err
}

// applyResponse applies the events of one watch response, revision by
// revision, in order. A response holds whole revisions (etcd's watch sends
// a revision's events together); one that starts at or below the local
// revision, or skips one, is a divergence.
func (a *applier) applyResponse(ctx context.Context, evs []*mvccpb.Event) error {
	for len(evs) > 0 {
		rev := evs[0].Kv.ModRevision
		n := 1
		for n < len(evs) && evs[n].Kv.ModRevision == rev {
			n++
		}
		if err := a.applyRevision(ctx, rev, evs[:n]); err != nil {
			return err
		}
		evs = evs[n:]
	}
	return nil
}

// applyRevision applies the events of source revision rev as one local
// transaction and checks the result.
func (a *applier) applyRevision(ctx context.Context, rev int64, evs []*mvccpb.Event) error {
	if cur := a.rev(); rev != cur+1 {
		return fmt.Errorf("%w: source revision %d follows local revision %d", ErrDiverged, rev, cur)
	}
	if err := a.precheck(rev, evs); err != nil {
		return err
	}
	if err := a.ensureLeases(ctx, evs); err != nil {
		return err
	}
	ops := make([]*pb.RequestOp, len(evs))
	for i, ev := range evs {
		if ev.Type == mvccpb.DELETE {
			ops[i] = &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: ev.Kv.Key}}}
			continue
		}
		value := ev.Kv.Value
		if a.value != nil {
			value = a.value(ev.Kv.Key, bytes.Clone(value))
		}
		ops[i] = &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: ev.Kv.Key, Value: value, Lease: ev.Kv.Lease}}}
	}
	resp, err := a.srv.Txn(ctx, &pb.TxnRequest{Success: ops})
	if err != nil {
		return fmt.Errorf("cascade: applying source revision %d: %w", rev, err)
	}
	if err := a.check(rev, evs, resp); err != nil {
		return err
	}
	a.last = a.last.next(rev, evs)
	a.applied(rev)
	return nil
}

// ensureLeases grants here, with the longest TTL (prepareBackend says
// why), every lease a put of evs attaches that the local lessor lacks. A
// lease grant makes no revision.
func (a *applier) ensureLeases(ctx context.Context, evs []*mvccpb.Event) error {
	for _, ev := range evs {
		id := ev.Kv.Lease
		if ev.Type != mvccpb.PUT || id == 0 || a.leases[id] {
			continue
		}
		if _, err := a.srv.LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: id, TTL: lease.MaxLeaseTTL}); err != nil && !errors.Is(err, lease.ErrLeaseExists) {
			return fmt.Errorf("cascade: granting lease %x here (source revision %d): %w", id, ev.Kv.ModRevision, err)
		}
		a.leases[id] = true
	}
	return nil
}

// precheck compares the local store before revision rev with what the
// source's events say it held then: a deleted key existed, and a key put
// was absent (a first version, created at rev) or has the version before
// and the creation revision the event names. Applying the events to such a
// store makes exactly the source's versions: a store that fails it has
// diverged already, and nothing is written.
func (a *applier) precheck(rev int64, evs []*mvccpb.Event) error {
	for _, ev := range evs {
		r, err := a.srv.KV().Range(context.Background(), ev.Kv.Key, nil, mvcc.RangeOptions{Limit: 1})
		if err != nil {
			return fmt.Errorf("cascade: reading %q before source revision %d: %w", ev.Kv.Key, rev, err)
		}
		var ok bool
		switch {
		case ev.Type == mvccpb.DELETE:
			ok = len(r.KVs) == 1
		case ev.Kv.Version == 1:
			ok = len(r.KVs) == 0 && ev.Kv.CreateRevision == rev
		default:
			ok = len(r.KVs) == 1 && r.KVs[0].Version == ev.Kv.Version-1 && r.KVs[0].CreateRevision == ev.Kv.CreateRevision
		}
		if !ok {
			return fmt.Errorf("%w: before source revision %d, %q is %s here; the source's %s event says otherwise", ErrDiverged, rev, ev.Kv.Key, describe(r.KVs), ev.Type)
		}
	}
	return nil
}

// check compares the local store after revision rev with the source's
// events: the transaction made exactly revision rev, every delete deleted
// one key, and every key put has the source's value, create and mod
// revision, version and lease.
func (a *applier) check(rev int64, evs []*mvccpb.Event, resp *pb.TxnResponse) error {
	if got := resp.Header.Revision; got != rev {
		return fmt.Errorf("%w: applying source revision %d made local revision %d", ErrDiverged, rev, got)
	}
	for i, ev := range evs {
		if ev.Type == mvccpb.DELETE {
			if d := resp.Responses[i].GetResponseDeleteRange().GetDeleted(); d != 1 {
				return fmt.Errorf("%w: source revision %d deleted %q, which the local store did not hold (%d deleted)", ErrDiverged, rev, ev.Kv.Key, d)
			}
			continue
		}
		r, err := a.srv.KV().Range(context.Background(), ev.Kv.Key, nil, mvcc.RangeOptions{Limit: 1})
		if err != nil {
			return fmt.Errorf("cascade: reading %q back after source revision %d: %w", ev.Kv.Key, rev, err)
		}
		if len(r.KVs) != 1 || !sameKV(r.KVs[0], ev.Kv) {
			return fmt.Errorf("%w: after source revision %d, %q is %s here, %s at the source", ErrDiverged, rev, ev.Kv.Key, describe(r.KVs), describe([]*mvccpb.KeyValue{ev.Kv}))
		}
	}
	return nil
}

// sameKV reports whether two versions of a key are the same.
func sameKV(a, b *mvccpb.KeyValue) bool {
	return a.CreateRevision == b.CreateRevision && a.ModRevision == b.ModRevision && a.Version == b.Version &&
		a.Lease == b.Lease && bytes.Equal(a.Value, b.Value)
}

func describe(kvs []*mvccpb.KeyValue) string {
	if len(kvs) == 0 {
		return "absent"
	}
	kv := kvs[0]
	return fmt.Sprintf("create %d, mod %d, version %d, lease %x, %d-byte value", kv.CreateRevision, kv.ModRevision, kv.Version, kv.Lease, len(kv.Value))
}
