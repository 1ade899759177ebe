package mirror

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// checkLeases, as streaming starts, writes again the keys of every live
// source lease under the prefix that has no live destination lease: their
// destination lease ended while the mirror was away, and nothing in the
// watch would bring them back.
func (mr *mirror) checkLeases(ctx context.Context) error {
	if mr.leases == nil {
		return nil
	}
	mr.leases.takeLost() // all of them are among the unmapped
	srcs, err := mr.leases.unmapped(ctx)
	if err != nil {
		return err
	}
	return mr.restore(ctx, srcs)
}

// restore writes the keys of source leases under the prefix again, with
// their values now, on new destination leases. It runs in the loop that
// applies the watch, after everything applied so far, so a value it reads
// is never older than what is applied; later changes follow by the watch.
func (mr *mirror) restore(ctx context.Context, srcs []int64) error {
	if len(srcs) == 0 {
		return nil
	}
	keys, keyless, err := mr.leaseKeys(ctx, srcs)
	if err != nil {
		return err
	}
	mr.leases.keyless(keyless)
	if len(keys) == 0 {
		return nil
	}
	kvs, err := mr.readKeys(ctx, keys)
	if err != nil {
		return err
	}
	if err := mr.ensureLeases(ctx, kvs); err != nil {
		return err
	}
	for chunk := range chunks(kvs, mr.batch()) {
		ops := make([]owned, len(chunk))
		for i, kv := range chunk {
			ops[i] = mr.putOp(kv)
		}
		if _, err := mr.commitResp(ctx, ops); err != nil {
			return err
		}
	}
	mr.m.restored.Add(float64(len(kvs)))
	mr.lg.Info("wrote again the keys of source leases that lost their destination lease", zap.Int("leases", len(srcs)-len(keyless)), zap.Int("keys", len(kvs)))
	return nil
}

// leaseKeys lists the keys under the prefix attached to source leases,
// and the leases that have none.
func (mr *mirror) leaseKeys(ctx context.Context, srcs []int64) ([]string, []int64, error) {
	var (
		mu      sync.Mutex
		keys    []string
		keyless []int64
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(leaseWorkers)
	for _, s := range srcs {
		g.Go(func() error {
			rctx, cancel := context.WithTimeout(gctx, mr.cfg.RequestTimeout)
			defer cancel()
			ttl, err := mr.cfg.Source.TimeToLive(rctx, clientv3.LeaseID(s), clientv3.WithAttachedKeys())
			if err != nil {
				return fmt.Errorf("mirror: source lease %x: %w", s, err)
			}
			var mine []string
			for _, k := range ttl.Keys {
				if strings.HasPrefix(string(k), mr.cfg.Prefix) && !reserved(k) {
					mine = append(mine, string(k))
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if len(mine) == 0 && ttl.TTL > 0 {
				keyless = append(keyless, s)
			}
			keys = append(keys, mine...)
			return nil
		})
	}
	return keys, keyless, g.Wait()
}

// readKeys reads keys from the source now; keys gone are left out.
func (mr *mirror) readKeys(ctx context.Context, keys []string) ([]*mvccpb.KeyValue, error) {
	var (
		mu  sync.Mutex
		kvs []*mvccpb.KeyValue
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(leaseWorkers)
	for _, k := range keys {
		g.Go(func() error {
			resp, err := mr.get(gctx, mr.cfg.Source, k)
			if err != nil {
				return sourceErr(err)
			}
			mu.Lock()
			kvs = append(kvs, resp.Kvs...)
			mu.Unlock()
			return nil
		})
	}
	return kvs, g.Wait()
}
