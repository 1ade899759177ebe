package mirror

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// leases gives each source lease a destination lease and keeps it alive
// while the source lease lives. The policy: a key on a source lease is
// written with a destination lease granted for the source lease's
// remaining TTL; every second the mirror asks the source whether each
// lease still lives, and keeps its destination lease alive if so, or
// revokes it if not (the source has deleted its keys too, and the deletes
// arrive by the watch). The mapping is kept in the destination, under the
// lease it names, so that a restarted mirror keeps the same leases alive.
type leases struct {
	src, dst *clientv3.Client
	prefix   string
	lg       *zap.Logger

	mu sync.Mutex
	m  map[int64]int64 // source lease → destination lease
}

func newLeases(src, dst *clientv3.Client, prefix string, lg *zap.Logger) *leases {
	return &leases{src: src, dst: dst, prefix: prefix, lg: lg, m: map[int64]int64{}}
}

// load reads the mapping a previous run left.
func (l *leases) load(ctx context.Context) error {
	resp, err := l.dst.Get(ctx, l.prefix, clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("mirror: reading lease mappings: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, kv := range resp.Kvs {
		src, err1 := strconv.ParseInt(strings.TrimPrefix(string(kv.Key), l.prefix), 16, 64)
		dst, err2 := strconv.ParseInt(string(kv.Value), 16, 64)
		if err1 == nil && err2 == nil {
			l.m[src] = dst
		}
	}
	return nil
}

// dest returns the destination lease for a source lease, granting it the
// first time; 0 if the source lease has already expired.
func (l *leases) dest(ctx context.Context, src int64) (int64, error) {
	l.mu.Lock()
	id, ok := l.m[src]
	l.mu.Unlock()
	if ok {
		return id, nil
	}
	ttl, err := l.src.TimeToLive(ctx, clientv3.LeaseID(src))
	if err != nil {
		return 0, fmt.Errorf("mirror: source lease %x: %w", src, err)
	}
	if ttl.TTL <= 0 {
		return 0, nil
	}
	g, err := l.dst.Grant(ctx, ttl.TTL)
	if err != nil {
		return 0, fmt.Errorf("mirror: destination lease for %x: %w", src, err)
	}
	// The mapping lives on the lease it names, so it goes when that does.
	if _, err := l.dst.Put(ctx, l.prefix+strconv.FormatInt(src, 16), strconv.FormatInt(int64(g.ID), 16), clientv3.WithLease(g.ID)); err != nil {
		return 0, fmt.Errorf("mirror: recording destination lease for %x: %w", src, err)
	}
	l.mu.Lock()
	l.m[src] = int64(g.ID)
	l.mu.Unlock()
	return int64(g.ID), nil
}

// keepAlive runs until ctx ends, once a second checking each source lease.
func (l *leases) keepAlive(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		l.mu.Lock()
		pairs := make(map[int64]int64, len(l.m))
		for s, d := range l.m {
			pairs[s] = d
		}
		l.mu.Unlock()
		for src, dst := range pairs {
			ttl, err := l.src.TimeToLive(ctx, clientv3.LeaseID(src))
			if err != nil {
				continue // try again next second
			}
			if ttl.TTL > 0 {
				if _, err := l.dst.KeepAliveOnce(ctx, clientv3.LeaseID(dst)); err == nil {
					continue
				}
				// The destination lease is gone (the mirror was away
				// longer than its TTL): the next put of its keys grants
				// a new one.
			} else if _, err := l.dst.Revoke(ctx, clientv3.LeaseID(dst)); err != nil && ctx.Err() == nil {
				l.lg.Debug("revoking destination lease", zap.Error(err))
			}
			l.mu.Lock()
			delete(l.m, src)
			l.mu.Unlock()
		}
	}
}
