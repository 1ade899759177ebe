package membership

import (
	"context"
	"fmt"
	"io"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/promotion"
)

const (
	// FailoverLockKey is where standbys take turns: one acts at a time.
	FailoverLockKey = "\x00understudy/failover-lock"
	// FailoverRecordKey holds the failover under way (promotion.Record).
	// It sits beside the lock's prefix, not under it: the lock's owner is
	// the oldest key under its prefix.
	FailoverRecordKey = "\x00understudy/failover-record"
)

// Failover reads the failover under way; nil if none.
func Failover(ctx context.Context, cli *clientv3.Client) (*promotion.Record, error) {
	resp, err := cli.Get(ctx, FailoverRecordKey)
	if err != nil {
		return nil, fmt.Errorf("membership: failover record: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	return promotion.ParseRecord(resp.Kvs[0].Value)
}

// WriteFailover prints the failover under way, if any, as a line after the
// status table.
func WriteFailover(w io.Writer, r *promotion.Record, now time.Time) {
	if r == nil {
		return
	}
	fmt.Fprintf(w, "failover under way for %v: %s\n", now.Sub(r.Since).Round(time.Second), r)
}
