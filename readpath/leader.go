package readpath

import (
	"context"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/server/v3/etcdserver"
	"google.golang.org/grpc"
)

// maxNoLeaderCnt is how many election timeouts without a leader end open
// require-leader streams, as in etcd: reconnecting a stream costs more
// than refusing a new request, so streams get longer.
const maxNoLeaderCnt = 3

// leaderWatch knows whether the replica has a leader. A learner never
// campaigns, so its raft keeps naming the last leader it heard from
// however long ago that was; the replica's freshness says when that
// really was. No leader means none known, or none heard from for
// noLeaderAfter (two election timeouts: a partitioned etcd follower loses
// its leader after one, and a replica's rounds may queue behind others').
type leaderWatch struct {
	s             *etcdserver.EtcdServer
	fresh         *Freshness
	election      time.Duration
	noLeaderAfter time.Duration
	started       time.Time

	mu      sync.Mutex
	streams map[*leaderStream]struct{}
}

func newLeaderWatch(s *etcdserver.EtcdServer, fresh *Freshness) *leaderWatch {
	election := time.Duration(s.Cfg.TickMs) * time.Duration(s.Cfg.ElectionTicks) * time.Millisecond
	return &leaderWatch{s: s, fresh: fresh, election: election, noLeaderAfter: 2 * election, started: time.Now(), streams: map[*leaderStream]struct{}{}}
}

func (l *leaderWatch) hasLeader() bool {
	if l.s.Leader() == 0 {
		return false
	}
	heard := l.fresh.AsOf()
	if heard.IsZero() {
		// Before its first round completes, the last sure contact is the
		// catch-up that came before serving.
		heard = l.started
	}
	return time.Since(heard) <= l.noLeaderAfter
}

// run ends the open require-leader streams once the replica has had no
// leader for maxNoLeaderCnt election timeouts, until ctx ends.
func (l *leaderWatch) run(ctx context.Context) {
	t := time.NewTicker(l.election)
	defer t.Stop()
	without := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if l.hasLeader() {
			without = 0
			continue
		}
		if without++; without < maxNoLeaderCnt {
			continue
		}
		l.mu.Lock()
		for ls := range l.streams {
			ls.cancel(rpctypes.ErrGRPCNoLeader)
		}
		l.streams = map[*leaderStream]struct{}{}
		l.mu.Unlock()
	}
}

// guard wraps a require-leader stream so that run can end it.
func (l *leaderWatch) guard(ss grpc.ServerStream) (*leaderStream, func()) {
	ctx, cancel := context.WithCancelCause(ss.Context())
	ls := &leaderStream{ServerStream: ss, ctx: causeContext{ctx}, cancel: cancel}
	l.mu.Lock()
	l.streams[ls] = struct{}{}
	l.mu.Unlock()
	return ls, func() {
		l.mu.Lock()
		delete(l.streams, ls)
		l.mu.Unlock()
		cancel(nil)
	}
}

// leaderStream is a stream whose context run may cancel with a reason.
type leaderStream struct {
	grpc.ServerStream
	ctx    context.Context
	cancel context.CancelCauseFunc
}

func (s *leaderStream) Context() context.Context { return s.ctx }

// causeContext reports its cancellation cause as its error, so that
// etcd's watch server, which returns the stream context's error, tells the
// client "no leader" rather than "canceled".
type causeContext struct{ context.Context }

func (c causeContext) Err() error {
	if err := c.Context.Err(); err != nil {
		if cause := context.Cause(c.Context); cause != nil {
			return cause
		}
		return err
	}
	return nil
}
