package mirror

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/understudy-kv/understudy/mirror/core"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// feeders are the mirrors writing into the source under the prefix, as
// read through source revision rev (or confirmed unchanged through it by
// the link follower): the keys they write there are not copied
// (mirrored.go), and a new one means a cycle check before the next write.
type feeders struct {
	list []link
	rev  int64
	// hidden: the source's checkpoints cannot be read (auth): none known.
	hidden bool
	// follower follows the source's mirror checkpoints while the mirror
	// watches the source (links.go), or nil.
	follower *linkFollower
}

// checkCycles reads the checkpoints the mirror can read (in the
// destination, and in the source when it is another cluster), refuses a
// cycle, and keeps the feeders (the mirrors writing into the source under
// the prefix). It returns the destination's checkpoints.
func (mr *mirror) checkCycles(ctx context.Context) (map[string]Checkpoint, error) {
	dcps, drev, err := allCheckpoints(ctx, mr.cfg.Dest)
	if err != nil {
		return nil, err
	}
	links := mr.withoutFailedBack(linksInto(mr.destID, dcps, mr.cfg.Name), mr.destID)
	inSource, srev := links, drev
	if mr.sourceID != mr.destID {
		all, rev, err := mr.sourceLinks(ctx)
		if err != nil {
			return nil, err
		}
		mr.linksRead(all, rev)
		inSource, srev = mr.withoutFailedBack(all, mr.sourceID), rev
		links = append(links, inSource...)
	}
	self := link{name: mr.cfg.Name, src: mr.sourceID, dst: mr.destID, srcPrefix: mr.cfg.Prefix, dstPrefix: mr.cfg.DestPrefix}
	if path, ok := findCycle(self, links); ok {
		return nil, cycleError(self, path)
	}
	mr.setFeeders(mr.feedersOf(inSource), srev)
	return dcps, nil
}

// linksInto are the mirrors whose checkpoints cps are kept in cluster,
// but the one named except (this mirror's own checkpoint), by name.
func linksInto(cluster string, cps map[string]Checkpoint, except string) []link {
	var out []link
	for name, c := range cps {
		if name != except {
			out = append(out, link{name: name, src: c.SourceClusterID, dst: cluster, srcPrefix: c.SourcePrefix, dstPrefix: c.DestPrefix})
		}
	}
	slices.SortFunc(out, func(a, b link) int { return cmp.Compare(a.name, b.name) })
	return out
}

// sourceLinks are the mirrors writing into the source, as of the source
// revision returned (a failback's source among them: withoutFailedBack).
// A source whose reserved prefix the mirror may not read (auth) shows
// none, at every revision.
func (mr *mirror) sourceLinks(ctx context.Context) ([]link, int64, error) {
	cps, rev, err := allCheckpoints(ctx, mr.cfg.Source)
	switch {
	case errors.Is(err, rpctypes.ErrPermissionDenied):
		if !mr.feeders.hidden {
			mr.lg.Warn("cannot read the source's mirror checkpoints (permission denied on the reserved prefix): mirrors writing into the source are not checked for cycles, and the keys they write are copied", zap.Error(err))
		}
		mr.feeders.hidden = true
		return nil, math.MaxInt64, nil
	case err != nil:
		return nil, 0, fmt.Errorf("mirror: source: %w", err)
	}
	except := ""
	if mr.sourceID == mr.destID {
		except = mr.cfg.Name
	}
	return linksInto(mr.sourceID, cps, except), rev, nil
}

// refreshFeeders reads the feeders again when a version newer than the
// revision they were read at is to be copied: a mirror writes its
// checkpoint into the source before its first key there, so feeders read
// at or after a version's revision include whoever wrote it.
// While the mirror watches the source, its link follower (links.go) can
// confirm them unchanged through newest without a read.
func (mr *mirror) refreshFeeders(ctx context.Context, newest int64) error {
	if newest <= mr.feeders.rev {
		return nil
	}
	if f := mr.feeders.follower; f != nil {
		if through, ok := f.confirm(ctx, mr.clock, newest, linkProgressInterval, min(linkConfirmTimeout, mr.cfg.RequestTimeout)); ok {
			mr.feeders.rev = through
			mr.m.feederChecks.WithLabelValues("watch").Inc()
			return nil
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 3*mr.cfg.RequestTimeout)
	defer cancel()
	all, rev, err := mr.sourceLinks(rctx)
	if err != nil {
		return err
	}
	mr.m.feederChecks.WithLabelValues("read").Inc()
	mr.linksRead(all, rev)
	mr.setFeeders(mr.feedersOf(mr.withoutFailedBack(all, mr.sourceID)), rev)
	return nil
}

// linkProgressInterval is how often a check waiting on the link follower
// asks the source for a progress notification.
const linkProgressInterval = 20 * time.Millisecond

// linkConfirmTimeout bounds a check's wait for the link follower: a
// progress notification takes a round trip to the source, and a read of
// the links no more.
const linkConfirmTimeout = time.Second

// linksRead gives the links read at rev to the link follower, if any.
func (mr *mirror) linksRead(all []link, rev int64) {
	if f := mr.feeders.follower; f != nil {
		f.reset(all, rev)
	}
}

// setFeeders keeps the feeders read at source revision rev; a new one
// means a cycle check before the next write.
func (mr *mirror) setFeeders(feeders []link, rev int64) {
	mr.feeders.rev = rev
	if slices.Equal(feeders, mr.feeders.list) {
		return
	}
	for _, f := range feeders {
		if !slices.Contains(mr.feeders.list, f) {
			mr.st.NewFeeder()
		}
	}
	mr.feeders.list = feeders
	if len(feeders) == 0 {
		return
	}
	names := make([]string, len(feeders))
	for i, f := range feeders {
		names[i] = f.describe()
	}
	if mr.cfg.CopyMirrored {
		mr.lg.Info("other mirrors write into the source under the prefix; the keys they write are copied (CopyMirrored)", zap.Strings("mirrors", names))
	} else {
		mr.lg.Info("other mirrors write into the source under the prefix; the keys they write are not copied", zap.Strings("mirrors", names))
	}
}

// recheck looks for cycles again before a checkpoint write when
// core.State says one is due: right after the mirror first wrote its
// checkpoint (claimed its image), so that of two mirrors started at once
// the later check sees the other's claim, after a new feeder, and then
// every CycleCheckInterval. A cycle found while the checkpoint is still
// the claim (nothing copied) deletes the claim, so that a restart after
// the operator's fix starts clean.
func (mr *mirror) recheck(ctx context.Context) error {
	if !mr.st.CycleCheckDue(mr.clock.Now()) {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, 3*mr.cfg.RequestTimeout)
	_, err := mr.checkCycles(cctx)
	cancel()
	switch mr.st.CycleChecked(mr.clock.Now(), cycleCheck(err)) {
	case core.Unclaim:
		mr.unclaim(ctx, mr.st.ClaimRev())
		return err
	case core.StopWriting:
		if errors.Is(err, ErrRefused) {
			return err
		}
		return fmt.Errorf("mirror: checking for mirror cycles before the next write: %w", err)
	case core.WarnAndGoOn:
		mr.lg.Warn("cannot check for mirror cycles; trying again", zap.Error(err), zap.Duration("after", mr.cfg.CycleCheckInterval))
	}
	return nil
}

// cycleCheck is how checkCycles ended, for core.State.CycleChecked.
func cycleCheck(err error) core.CycleCheck {
	switch {
	case err == nil:
		return core.NoCycle
	case errors.Is(err, ErrRefused):
		return core.CycleFound
	}
	return core.CycleUnknown
}

// unclaim deletes this mirror's checkpoint if it is still the claim it
// wrote, at destination revision claimRev.
func (mr *mirror) unclaim(ctx context.Context, claimRev int64) {
	tctx, cancel := context.WithTimeout(ctx, mr.cfg.RequestTimeout)
	defer cancel()
	resp, err := mr.cfg.Dest.Txn(tctx).If(clientv3.Compare(clientv3.ModRevision(mr.cpKey), "=", claimRev)).
		Then(clientv3.OpDelete(mr.cpKey)).Commit()
	switch {
	case err != nil:
		mr.lg.Warn("cannot delete this mirror's checkpoint after the refusal; delete it before starting the mirror again", zap.String("key", mr.cpKey), zap.Error(err))
	case resp.Succeeded:
		mr.lg.Info("deleted this mirror's checkpoint (nothing was copied)", zap.String("key", mr.cpKey))
	}
}
