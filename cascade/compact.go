package cascade

import (
	"context"
	"errors"
	"fmt"
	"sort"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/storage/mvcc"
	"go.uber.org/zap"
)

// probeKey is what the replica reads of an upstream when it needs only a
// revision: a key in understudy's reserved range, which nobody writes.
const probeKey = "\x00understudy/cascade"

// readableFrom is the least revision in [lo, hi] at which a store still
// reads, hi+1 if none: with etcd's rule, a read at revision r fails with a
// compaction error exactly when r is below the store's compaction
// revision, so this is that revision (lo if it is lo or lower).
func readableFrom(lo, hi int64, compacted func(r int64) (bool, error)) (int64, error) {
	var ferr error
	n := sort.Search(int(hi-lo+1), func(i int) bool {
		c, err := compacted(lo + int64(i))
		if err != nil && ferr == nil {
			ferr = err
		}
		return !c
	})
	return lo + int64(n), ferr
}

// followCompaction compacts the local store as far as the source has
// been, and no further than the local store has applied (upto): etcd
// exports no compaction revision, so the upstream is asked whether it
// still reads where the local store begins, and the revision it compacted
// at is searched for only when it does not (reads of a key nobody writes,
// serializable: the upstream's own store, at once).
func (s *Store) followCompaction(ctx context.Context, u *upstream, upto int64) error {
	local, err := s.localReadableFrom(upto)
	if err != nil {
		return err
	}
	bctx := background(ctx)
	remote := func(r int64) (bool, error) {
		rctx, cancel := context.WithTimeout(bctx, s.cfg.UpstreamTimeout)
		defer cancel()
		_, err := u.cli.Get(rctx, probeKey, clientv3.WithRev(r), clientv3.WithSerializable(), clientv3.WithCountOnly())
		switch {
		case err == nil:
			return false, nil
		case errors.Is(err, rpctypes.ErrCompacted):
			return true, nil
		}
		return false, err
	}
	if c, err := remote(local); err != nil || !c {
		return err
	}
	at, err := readableFrom(local+1, upto, remote)
	if err != nil {
		return err
	}
	at = min(at, upto)
	if at <= local {
		return nil
	}
	if _, err := s.e.Server.Compact(ctx, &pb.CompactionRequest{Revision: at}); err != nil && !errors.Is(err, mvcc.ErrCompacted) {
		return fmt.Errorf("cascade: compacting here at %d as the source did: %w", at, err)
	}
	s.lg.Info("compacted as the source did", zap.Int64("revision", at))
	return nil
}

// localReadableFrom is the least revision the local store reads at (its
// compaction revision; 1 if it was never compacted), found as the
// upstream's, in-process.
func (s *Store) localReadableFrom(upto int64) (int64, error) {
	kv := s.e.Server.KV()
	return readableFrom(1, upto, func(r int64) (bool, error) {
		_, err := kv.Range(context.Background(), []byte(probeKey), nil, mvcc.RangeOptions{Rev: r, CountOnly: true})
		if errors.Is(err, mvcc.ErrCompacted) {
			return true, nil
		}
		return false, err
	})
}
