package readpath

import (
	"context"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"

	"github.com/understudy-kv/understudy/readindex"
)

// maxNoLeaderCnt is how many election timeouts without a leader end open
// require-leader streams, as in etcd: reconnecting a stream costs more
// than refusing a new request, so streams get longer.
const maxNoLeaderCnt = 3

// leaderWatch knows whether the replica has a leader, as etcd's
// require-leader check asks: a known leader heard from within
// noLeaderAfter (two election timeouts: a partitioned etcd follower loses
// its leader after one, randomised), by raft's own traffic (readindex.LeaderContact),
// whatever --freshness-interval is.
type leaderWatch struct {
	contact       *readindex.LeaderContact
	clock         clockwork.Clock
	election      time.Duration
	noLeaderAfter time.Duration

	mu      sync.Mutex
	streams map[*leaderStream]struct{}
}

func newLeaderWatch(contact *readindex.LeaderContact, clock clockwork.Clock, election time.Duration) *leaderWatch {
	return &leaderWatch{contact: contact, clock: clock, election: election, noLeaderAfter: 2 * election, streams: map[*leaderStream]struct{}{}}
}

func (l *leaderWatch) hasLeader() bool { return l.contact.HeardWithin(l.noLeaderAfter) }

// run ends the open require-leader streams once the replica has had no
// leader for maxNoLeaderCnt election timeouts, until ctx ends.
func (l *leaderWatch) run(ctx context.Context) {
	t := l.clock.NewTicker(l.election)
	defer t.Stop()
	without := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
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
