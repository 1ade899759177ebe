package replica

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/storage/mvcc"

	"github.com/understudy-kv/understudy/membership"
	"github.com/understudy-kv/understudy/promotion"
)

// readHolds reads the maintenance holds from the replica's own store, and
// the store's revision then (the fence's: membership.HoldsUnchanged).
func (r *roles) readHolds(ctx context.Context) ([]promotion.MaintenanceHold, int64, error) {
	res, err := r.srv.KV().Range(ctx, []byte(membership.HoldPrefix), []byte(clientv3.GetPrefixRangeEnd(membership.HoldPrefix)), mvcc.RangeOptions{})
	if err != nil {
		return nil, 0, fmt.Errorf("maintenance holds: %w", err)
	}
	seen, now := map[int64]time.Time{}, r.clock.Now()
	var out []promotion.MaintenanceHold
	for _, kv := range res.KVs {
		h := promotion.ReadMaintenanceHold(kv.Key, kv.Value, kv.ModRevision)
		if h.Seen = r.holdSeen[kv.ModRevision]; h.Seen.IsZero() {
			h.Seen = now
		}
		seen[kv.ModRevision] = h.Seen
		out = append(out, h)
	}
	r.holdSeen = seen // the holds gone are forgotten
	return out, res.Rev, nil
}
