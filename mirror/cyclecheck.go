package mirror

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// checkCycles reads the checkpoints the mirror can read (in the
// destination, and in the source when it is another cluster), refuses a
// cycle, and keeps the feeders (the mirrors writing into the source under
// the prefix). It returns the destination's checkpoints. A source whose
// reserved prefix the mirror may not read (auth) shows no checkpoints.
func (mr *mirror) checkCycles(ctx context.Context) (map[string]Checkpoint, error) {
	dcps, err := allCheckpoints(ctx, mr.cfg.Dest)
	if err != nil {
		return nil, err
	}
	var links []link
	for name, c := range dcps {
		if name != mr.cfg.Name {
			links = append(links, link{name: name, src: c.SourceClusterID, dst: mr.destID, srcPrefix: c.SourcePrefix, dstPrefix: c.DestPrefix})
		}
	}
	if mr.sourceID != mr.destID {
		scps, err := allCheckpoints(ctx, mr.cfg.Source)
		switch {
		case errors.Is(err, rpctypes.ErrPermissionDenied):
			if !mr.sourceHidden {
				mr.lg.Warn("cannot read the source's mirror checkpoints (permission denied on the reserved prefix): mirrors writing into the source are not checked for cycles, and their keys are copied", zap.Error(err))
			}
			mr.sourceHidden = true
		case err != nil:
			return nil, fmt.Errorf("mirror: source: %w", err)
		}
		for name, c := range scps {
			links = append(links, link{name: name, src: c.SourceClusterID, dst: mr.sourceID, srcPrefix: c.SourcePrefix, dstPrefix: c.DestPrefix})
		}
	}
	slices.SortFunc(links, func(a, b link) int { return cmp.Or(cmp.Compare(a.dst, b.dst), cmp.Compare(a.name, b.name)) })
	self := link{name: mr.cfg.Name, src: mr.sourceID, dst: mr.destID, srcPrefix: mr.cfg.Prefix, dstPrefix: mr.cfg.DestPrefix}
	if path, ok := findCycle(self, links); ok {
		return nil, cycleError(self, path)
	}
	feeders := mr.feedersOf(links)
	if !slices.Equal(feeders, mr.feeders) && len(feeders) > 0 {
		names := make([]string, len(feeders))
		for i, f := range feeders {
			names[i] = f.describe()
		}
		if mr.cfg.CopyMirrored {
			mr.lg.Info("other mirrors write into the source under the prefix; their keys are copied (CopyMirrored)", zap.Strings("mirrors", names))
		} else {
			mr.lg.Info("other mirrors write into the source under the prefix; the keys they write are not copied", zap.Strings("mirrors", names))
		}
	}
	mr.feeders = feeders
	return dcps, nil
}

// recheck looks for cycles again before a checkpoint write: right after
// the mirror first wrote its checkpoint (claimed its image), so that of
// two mirrors started at once the later check sees the other's claim, and
// then every CycleCheckInterval. A cycle found while the checkpoint is
// still the claim (nothing copied) deletes the claim, so that a restart
// after the operator's fix starts clean.
func (mr *mirror) recheck(ctx context.Context) error {
	if !mr.cycleDue && time.Since(mr.checkedAt) < mr.cfg.CycleCheckInterval {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, 3*mr.cfg.RequestTimeout)
	_, err := mr.checkCycles(cctx)
	cancel()
	switch {
	case errors.Is(err, ErrRefused):
		if mr.cpModRev != 0 && mr.cpModRev == mr.claimRev {
			mr.unclaim(ctx)
		}
		return err
	case err != nil && mr.cycleDue:
		return fmt.Errorf("mirror: checking for mirror cycles after claiming the image: %w", err)
	case err != nil:
		mr.lg.Warn("cannot check for mirror cycles; trying again", zap.Error(err), zap.Duration("after", mr.cfg.CycleCheckInterval))
	}
	mr.cycleDue, mr.checkedAt = false, time.Now()
	return nil
}

// unclaim deletes this mirror's checkpoint if it is still the claim it
// wrote.
func (mr *mirror) unclaim(ctx context.Context) {
	tctx, cancel := context.WithTimeout(ctx, mr.cfg.RequestTimeout)
	defer cancel()
	resp, err := mr.cfg.Dest.Txn(tctx).If(clientv3.Compare(clientv3.ModRevision(mr.cpKey), "=", mr.claimRev)).
		Then(clientv3.OpDelete(mr.cpKey)).Commit()
	switch {
	case err != nil:
		mr.lg.Warn("cannot delete this mirror's checkpoint after the refusal; delete it before starting the mirror again", zap.String("key", mr.cpKey), zap.Error(err))
	case resp.Succeeded:
		mr.lg.Info("deleted this mirror's checkpoint (nothing was copied)", zap.String("key", mr.cpKey))
	}
}
