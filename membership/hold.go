package membership

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/promotion"
)

// HoldPrefix is where maintenance holds are stored: HoldPrefix+"all" holds
// every voter, HoldPrefix+<hex member ID> one. Each is attached to a lease
// whose TTL is the hold's duration, so that a hold nobody releases still
// ends.
const HoldPrefix = "\x00understudy/hold/"

// HoldKey is where the hold of voter id (0: every voter) is stored.
func HoldKey(id uint64) string {
	if id == 0 {
		return HoldPrefix + "all"
	}
	return HoldPrefix + strconv.FormatUint(id, 16)
}

// HoldsUnchanged is the comparison a standby's fenced transactions carry:
// no key under HoldPrefix was written after revision rev, the one the
// standby read the holds at. Any hold written or renewed after the standby
// decided, under any key (a hold of its voter, of every voter, or one
// written by hand that covers every voter because it cannot be read),
// makes its next step fail rather than happen; one it read and found ended
// (promotion's Stands) does not, and neither does a release: a hold
// deleted only loosens what the standby decided under.
func HoldsUnchanged(rev int64) clientv3.Cmp {
	return clientv3.Compare(clientv3.ModRevision(HoldPrefix), "<", rev+1).WithPrefix()
}

// ErrHoldRefused wraps the cluster's refusal of a hold (its auth).
var ErrHoldRefused = errors.New("membership: the cluster refuses the hold")

// Hold writes h for ttl, replacing the voter's earlier hold if any (its
// lease is revoked once the new one is stored). target is a member name or
// hex ID of sts, or "" for every voter; learners cannot be held.
func Hold(ctx context.Context, cli *clientv3.Client, sts []*Member, target string, ttl time.Duration, h promotion.MaintenanceHold, now time.Time) (promotion.MaintenanceHold, error) {
	if ttl < time.Second {
		return h, fmt.Errorf("membership: a hold of %v: must be at least 1s", ttl)
	}
	if target != "" {
		s, err := Find(sts, target)
		if err != nil {
			return h, err
		}
		if s.IsLearner {
			return h, fmt.Errorf("%w %s (%s): a learner; only voters are replaced, and held", ErrRefused, s.Name, s.ID)
		}
		h.Voter, h.Name = s.id, s.Name
	}
	h.Until, h.For = now.Add(ttl).UTC().Truncate(time.Second), ttl
	key := HoldKey(h.Voter)
	old, err := cli.Get(ctx, key)
	if err != nil {
		return h, holdErr("read", key, err)
	}
	var was int64 // the key's ModRevision as read; 0: absent
	if len(old.Kvs) > 0 {
		was = old.Kvs[0].ModRevision
	}
	lease, err := cli.Grant(ctx, int64((ttl+time.Second-1)/time.Second))
	if err != nil {
		return h, holdErr("LeaseGrant for", key, err)
	}
	// Replace only the hold read: two operators holding the same voter at
	// once must not leave a lease behind unknowingly.
	resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", was)).
		Then(clientv3.OpPut(key, h.Marshal(), clientv3.WithLease(lease.ID))).Commit()
	switch {
	case err != nil:
		revokeQuietly(ctx, cli, lease.ID)
		return h, holdErr("write", key, err)
	case !resp.Succeeded:
		revokeQuietly(ctx, cli, lease.ID)
		return h, fmt.Errorf("membership: the hold at %q changed while this one was written (another replica hold at once?): run it again", key)
	}
	if len(old.Kvs) > 0 && old.Kvs[0].Lease != 0 {
		revokeQuietly(ctx, cli, clientv3.LeaseID(old.Kvs[0].Lease))
	}
	return h, nil
}

// Release ends the hold of target (a member name or hex ID of sts, or ""
// for the hold of every voter): its lease is revoked, which deletes it.
// It reports whether there was one.
func Release(ctx context.Context, cli *clientv3.Client, sts []*Member, target string) (bool, error) {
	var id uint64
	if target != "" {
		s, err := Find(sts, target)
		if err != nil {
			return false, err
		}
		id = s.id
	}
	key := HoldKey(id)
	resp, err := cli.Delete(ctx, key, clientv3.WithPrevKV())
	if err != nil {
		return false, holdErr("delete", key, err)
	}
	for _, kv := range resp.PrevKvs {
		if kv.Lease != 0 {
			revokeQuietly(ctx, cli, clientv3.LeaseID(kv.Lease))
		}
	}
	return resp.Deleted > 0, nil
}

// Holds reads the maintenance holds stored in the cluster, and the
// revision it read them at (HoldsUnchanged's).
func Holds(ctx context.Context, cli *clientv3.Client) ([]promotion.MaintenanceHold, int64, error) {
	resp, err := cli.Get(ctx, HoldPrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, 0, holdErr("read", HoldPrefix+"*", err)
	}
	var out []promotion.MaintenanceHold
	for _, kv := range resp.Kvs {
		out = append(out, promotion.ReadMaintenanceHold(kv.Key, kv.Value, kv.ModRevision))
	}
	return out, resp.Header.Revision, nil
}

// WriteHolds prints the holds, one line each, after the status table.
func WriteHolds(w io.Writer, hs []promotion.MaintenanceHold) {
	for _, h := range hs {
		fmt.Fprintln(w, h)
	}
}

func holdErr(what, key string, err error) error {
	if errors.Is(err, rpctypes.ErrPermissionDenied) || errors.Is(err, rpctypes.ErrUserEmpty) || errors.Is(err, rpctypes.ErrInvalidAuthToken) {
		return fmt.Errorf("%w: %s %q: %w (a hold needs write permission on the prefix %s, and the right to grant and revoke leases: docs/roles.md, Maintenance holds)",
			ErrHoldRefused, what, key, err, `\x00understudy/`)
	}
	return fmt.Errorf("membership: %s %q: %w", what, key, err)
}

func revokeQuietly(ctx context.Context, cli *clientv3.Client, id clientv3.LeaseID) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = cli.Revoke(rctx, id) // a lease not revoked still ends at its TTL
}
