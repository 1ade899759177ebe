package replica

import (
	"context"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/understudy-kv/understudy/membership"
)

// attemptTimeout bounds one attempt of a cluster call of the role loop
// (a fence check, a membership change through any voter) near the
// voters; far away it grows (evidenceTimeout).
const attemptTimeout = time.Second

// retryUnanswered runs the fence check call (a comparison: asking it again
// changes nothing) with each attempt bounded by per, again while its
// answer is worth asking again (membership.Retryable, the one reading of
// etcd's answers), until ctx ends. Membership changes are the Changer's.
//
// A connection whose peer went silent (a cut client URL) stays READY in
// the client's round robin until a keep-alive ping on an active call
// times out (DialKeepAliveTime + DialKeepAliveTimeout, 8 s): a call picked
// onto it waits that long, or the act's whole budget. A bounded attempt
// gives up on it early, and the next attempt is picked onto the next
// connection. An attempt that failed before its bound waits one
// roleInterval before the next.
func retryUnanswered(ctx context.Context, clock clockwork.Clock, per time.Duration, call func(context.Context) error) error {
	for {
		start := clock.Now()
		actx, cancel := clockwork.WithTimeout(ctx, clock, per)
		err := call(actx)
		cancel()
		if err == nil || !membership.Retryable(err) || ctx.Err() != nil {
			return err
		}
		if clock.Since(start) < per {
			select {
			case <-ctx.Done():
				return err
			case <-clock.After(roleInterval):
			}
		}
	}
}
