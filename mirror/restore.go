package mirror

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/understudy-kv/understudy/mirror/core"
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
	// Lost leases that a change of one of their keys mapped again are not
	// among the unmapped, and their other keys are still missing.
	lost := mr.leases.takeLost()
	srcs, err := mr.leases.unmapped(ctx)
	if err != nil {
		mr.leases.loseAgain(lost)
		return err
	}
	for _, s := range lost {
		if !slices.Contains(srcs, s) {
			srcs = append(srcs, s)
		}
	}
	return mr.restore(ctx, srcs)
}

// restore writes the keys of source leases under the prefix again, on new
// destination leases. It runs in the loop that applies the watch, between
// passes, and the watch brings what changed after the checkpoint in order,
// so the values are read at the checkpoint's revision once streaming has
// applied one (a key then never goes back to an older value). Right after
// a full sync, whose pages were read at newer revisions, or if the source
// has compacted that revision, they are read now: a key in the watch's
// backlog may then go back and forth once before it settles. Leases it
// could not restore stay lost.
func (mr *mirror) restore(ctx context.Context, srcs []int64) (err error) {
	if len(srcs) == 0 {
		return nil
	}
	defer func() {
		if err != nil {
			mr.leases.loseAgain(srcs)
		}
	}()
	keys, keyless, err := mr.leaseKeys(ctx, srcs)
	if err != nil {
		return err
	}
	mr.leases.keyless(keyless)
	if len(keys) == 0 {
		return nil
	}
	kvs, err := mr.readKeys(ctx, keys, mr.st.RestoreAt())
	if errors.Is(err, errCompacted) {
		kvs, err = mr.readKeys(ctx, keys, 0)
	}
	if err == nil {
		// Keys another mirror wrote into the source are not this one's.
		kvs, err = mr.dropMirrored(ctx, kvs)
	}
	if err != nil {
		return err
	}
	if err := mr.ensureLeases(ctx, kvs); err != nil {
		return err
	}
	for chunk := range core.ChunksBy(kvs, mr.budget(), core.KVBytes) {
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

// readKeys reads keys from the source at rev (0: now); keys that do not
// exist then are left out.
func (mr *mirror) readKeys(ctx context.Context, keys []string, rev int64) ([]*mvccpb.KeyValue, error) {
	var (
		mu  sync.Mutex
		kvs []*mvccpb.KeyValue
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(leaseWorkers)
	for _, k := range keys {
		g.Go(func() error {
			resp, err := mr.get(gctx, mr.cfg.Source, k, clientv3.WithRev(rev))
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
