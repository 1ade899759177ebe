package replica

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/understudy-kv/understudy/readpath"
)

// memberHandle closes the embedded member once: leaveOnExit closes it
// before removing its data dir, and Run's deferred close does nothing then
// (embed.Etcd.Close panics when called twice).
type memberHandle struct {
	*embed.Etcd
	closed bool
}

func (m *memberHandle) close() {
	if !m.closed {
		m.closed = true
		m.Etcd.Close()
	}
}

// serve runs, until ctx ends or one of them fails: the front on every
// listener, the watch on the member, the quota guard, the learner watch,
// the auto-compaction (learning it, and compacting while this member
// leads) and, for a standby or voter role, the role loop (r, nil for a
// reader). Every goroutine is the errgroup's.
func serve(ctx context.Context, lg *zap.Logger, cfg learnerConfig, m *embed.Etcd, front *readpath.Front, ls *listenerSet,
	quota *quotaGuard, r *roles, learners *learnerWatch, compaction *compaction, ready chan<- struct{}) error {
	ls.served = true
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return front.Run(gctx) })
	for _, l := range ls.client {
		g.Go(func() error { return front.Serve(l) })
	}
	for _, l := range ls.metrics {
		g.Go(func() error { return front.ServeMetrics(l) })
	}
	lg.Info("replica serving", zap.String("name", cfg.Name), zap.String("member-id", m.Server.MemberID().String()),
		zap.Strings("client-urls", cfg.AdvertiseClientURLs))
	if ready != nil {
		close(ready)
	}
	g.Go(func() error {
		defer front.Stop()
		select {
		case <-gctx.Done():
			return nil
		case err := <-m.Err():
			return fmt.Errorf("replica: member: %w", err)
		case <-m.Server.StopNotify():
			return ErrStopped
		}
	})
	g.Go(func() error { return quota.run(gctx) })
	g.Go(func() error { learners.run(gctx); return nil })
	g.Go(func() error { compaction.run(gctx); return nil })
	if r != nil {
		lg.Info("promotion policy", zap.String("role", string(cfg.Promotion.Role)), zap.Uint64("promote-max-lag", cfg.Promotion.MaxLag),
			zap.Duration("promote-hold", cfg.Promotion.Hold), zap.Duration("failover-after", cfg.Promotion.FailoverAfter))
		g.Go(func() error { r.run(gctx); return nil })
	}
	return g.Wait()
}

// leaveOnExit honours --remove-on-exit after serve ended with err: a clean
// stop of a learner takes the member entry and data with it, and so does
// the quota guard's stop of a learner (which costs no quorum), so that a
// replica without its data dir can join again. A promoted member (a voter)
// stays: its removal would change the quorum. It returns err, joined with what
// went wrong on the way out.
func leaveOnExit(ctx context.Context, lg *zap.Logger, clock clockwork.Clock, cfg learnerConfig, cli *clientv3.Client, m *memberHandle, err error) error {
	cleanStop := err == nil && ctx.Err() != nil
	if !cfg.RemoveOnExit || !(cleanStop || errors.Is(err, errQuotaPassed)) {
		return err
	}
	id := uint64(m.Server.MemberID())
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	// The local view may not have applied a promotion the voters have
	// committed (a stop right after it): the cluster's own list decides,
	// and the role loop, stopped by now, promotes nothing more.
	if voter, why := aVoterNow(rctx, cli, m, id); voter {
		// A promoted replica is a voter: removing it changes the quorum,
		// which a clean stop must not do on its own.
		lg.Warn("--remove-on-exit: this member is a voter now (promoted), or the cluster cannot say it is not; it stays a member with its data dir (remove it with `replica leave` if that is meant)",
			zap.String("member-id", fmt.Sprintf("%x", id)), zap.String("why", why))
		return err
	}
	if rerr := removeOwnLearner(rctx, lg, clock, cli, id); rerr != nil {
		return errors.Join(err, fmt.Errorf("replica: --remove-on-exit: removing member %x: %w (remove it with `etcdctl member remove %x`)", id, rerr, id))
	}
	m.close()
	if rerr := removeMemberData(lg, cfg.DataDir); rerr != nil {
		return errors.Join(err, fmt.Errorf("replica: --remove-on-exit: member %x removed, but %w", id, rerr))
	}
	lg.Info("removed this replica's member entry and data", zap.String("member-id", fmt.Sprintf("%x", id)))
	return err
}

// removeMemberData removes what etcd wrote in dataDir (member/), then
// dataDir itself if nothing else is in it and it is no symlink (unlinking
// one would drop the way to a target that may hold other files): a
// --data-dir may hold the operator's own files, which stay.
func removeMemberData(lg *zap.Logger, dataDir string) error {
	member := filepath.Join(dataDir, "member")
	if err := os.RemoveAll(member); err != nil {
		return fmt.Errorf("its data stays in %s: %w", member, err)
	}
	fi, err := os.Lstat(dataDir)
	if err != nil || fi.Mode()&fs.ModeSymlink != 0 {
		return nil
	}
	switch err := os.Remove(dataDir); {
	case err == nil, errors.Is(err, fs.ErrNotExist):
	case errors.Is(err, syscall.ENOTEMPTY), errors.Is(err, syscall.EEXIST):
		lg.Info("removed this member's data; the data dir holds other files and stays", zap.String("data-dir", dataDir))
	default:
		lg.Warn("removed this member's data, but not the emptied data dir", zap.String("data-dir", dataDir), zap.Error(err))
	}
	return nil
}

// aVoterNow reports whether member id must be kept as a voter: the local
// member says it is one, or the cluster's member list (linearizable, from
// the voters) does, or cannot be read.
func aVoterNow(ctx context.Context, cli *clientv3.Client, m *memberHandle, id uint64) (bool, string) {
	if !m.Server.IsLearner() {
		return true, "the local member is a voter"
	}
	ml, err := cli.MemberList(ctx)
	if err != nil {
		return true, fmt.Sprintf("the cluster's member list: %v", err)
	}
	for _, mb := range ml.Members {
		if mb.ID == id {
			if !mb.IsLearner {
				return true, "the cluster lists it as a voter"
			}
			return false, ""
		}
	}
	return false, ""
}
