package learner

import (
	"context"
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/zap"
)

// etcd serves a member once it has published itself: a proposal of its
// name and client URLs, retried until it is applied (publishV3). etcd
// refuses any proposal while the member's commit index is more than 5,000
// entries past its AppliedIndex(), and a snapshot moves the commit index
// but not AppliedIndex(): only an entry applied after the snapshot does. A
// learner that caught up by a snapshot in a quiet cluster, and whose first
// publish the snapshot holds (applied as part of it, so its waiter never
// fires), is refused every later publish as "too many requests" until the
// cluster writes something, which a quiet cluster may never do; etcd spins
// on it with a warning each time (thousands a second). Asking the voters
// for an entry that changes nothing (an AuthStatus, which etcd itself
// applies as a request with no side effect) ends the wait.

// Publishing is what WaitPublished watches and does.
type Publishing struct {
	// Published is closed once etcd has published the member
	// (EtcdServer.ReadyNotify).
	Published <-chan struct{}
	// Failed carries the member's fatal error (embed.Etcd.Err).
	Failed <-chan error
	// SnapshotLast reports whether the last thing the member applied is a
	// snapshot (its applied index, a snapshot counted, is past etcd's
	// AppliedIndex()), and that index.
	SnapshotLast func() (bool, uint64)
	// Nudge asks the voters for an entry that changes nothing.
	Nudge func(ctx context.Context) error
	// Clock times the checks; nil means the real clock.
	Clock clockwork.Clock
}

const (
	// publishPoll is how often WaitPublished looks at the member: a
	// member refused its publish spins, so the sooner the better.
	publishPoll = 20 * time.Millisecond
	// nudgeEvery is the least time between two nudges: the first one's
	// entry takes a round trip to the voters and back.
	nudgeEvery = 2 * time.Second
	// nudgeTimeout bounds one nudge.
	nudgeTimeout = 5 * time.Second
)

// WaitPublished returns once the member is published, with its fatal
// error, or with ctx's error; meanwhile, whenever the last thing it
// applied is a snapshot, it nudges (at most every nudgeEvery). It logs
// what it waits for once, and a failed nudge at debug level.
func WaitPublished(ctx context.Context, lg *zap.Logger, p Publishing) error {
	clock := p.Clock
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	t := clock.NewTicker(publishPoll)
	defer t.Stop()
	var lastNudge time.Time
	said := false
	for {
		select {
		case <-p.Published:
			return nil
		case err := <-p.Failed:
			return fmt.Errorf("learner failed: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-t.Chan():
		}
		snap, index := p.SnapshotLast()
		if !snap || (!lastNudge.IsZero() && clock.Since(lastNudge) < nudgeEvery) {
			continue
		}
		if !said {
			lg.Info("caught up by a snapshot; etcd publishes this member only once it has applied an entry after it, and the cluster is quiet: asking the voters for one (an AuthStatus, which changes nothing)",
				zap.Uint64("snapshot-index", index))
			said = true
		}
		lastNudge = clock.Now()
		nctx, cancel := context.WithTimeout(ctx, nudgeTimeout)
		if err := p.Nudge(nctx); err != nil {
			lg.Debug("asking the voters for an entry failed; asking again", zap.Error(err))
		}
		cancel()
	}
}
