package learner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Progress is one observation of a learner catching up.
type Progress struct {
	// Applied is the learner's applied index.
	Applied uint64
	// LeaderCommit is the leader's commit index, read before Applied.
	LeaderCommit uint64
}

// CaughtUp reports whether the learner had applied everything the leader had
// committed when it was asked: the commit index is read first, so a learner
// that passes has seen every entry committed before the check began.
func (p Progress) CaughtUp() bool { return p.LeaderCommit > 0 && p.Applied >= p.LeaderCommit }

// Behind is how many entries the learner lacks.
func (p Progress) Behind() uint64 {
	if p.Applied >= p.LeaderCommit {
		return 0
	}
	return p.LeaderCommit - p.Applied
}

// StatusClient is the part of clientv3.Maintenance the catch-up needs.
type StatusClient interface {
	Status(ctx context.Context, endpoint string) (*clientv3.StatusResponse, error)
}

var _ StatusClient = clientv3.Maintenance(nil)

// LeaderCommit asks endpoints, in order, until one answers, and returns the
// commit index of the leader, read from the leader itself when it is among
// them (a follower's commit index may trail the leader's).
func LeaderCommit(ctx context.Context, sc StatusClient, endpoints []string) (uint64, error) {
	var errs []error
	var best uint64
	for _, ep := range endpoints {
		st, err := sc.Status(ctx, ep)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", ep, err))
			continue
		}
		if st.Header.MemberId == st.Leader {
			return st.RaftIndex, nil
		}
		best = max(best, st.RaftIndex)
	}
	if best > 0 {
		return best, nil
	}
	return 0, fmt.Errorf("learner: no voter answered Status: %w", errors.Join(errs...))
}

// WaitCaughtUp polls until the learner has caught up, reporting each
// observation to report, or until ctx ends.
func WaitCaughtUp(ctx context.Context, lg *zap.Logger, clock clockwork.Clock, every time.Duration, observe func(context.Context) (Progress, error), report func(Progress)) (Progress, error) {
	return waitCaughtUp(ctx, lg, clock, every, observe, report)
}

// waitCaughtUp is WaitCaughtUp with its polls timed by clock.
func waitCaughtUp(ctx context.Context, lg *zap.Logger, clock clockwork.Clock, every time.Duration, observe func(context.Context) (Progress, error), report func(Progress)) (Progress, error) {
	t := clock.NewTicker(every)
	defer t.Stop()
	var last Progress
	for {
		p, err := observe(ctx)
		if err != nil {
			lg.Debug("catch-up observation failed", zap.Error(err))
		} else {
			last = p
			report(p)
			if p.CaughtUp() {
				return p, nil
			}
		}
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("%w: applied %d of the leader's %d (%d behind): %v",
				ErrNotReady, last.Applied, last.LeaderCommit, last.Behind(), ctx.Err())
		case <-t.Chan():
		}
	}
}
