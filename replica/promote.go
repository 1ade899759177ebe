package replica

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// leaderCallTimeout bounds a promotion sent to the leader's own client URL
// before it falls back to any voter's: a cut client URL costs the
// failover at most this.
const leaderCallTimeout = 3 * time.Second

// dialer builds a client with the role loop's TLS and credentials for the
// given endpoints; ctx bounds its dial and every call without a context
// of its own.
type dialer func(ctx context.Context, endpoints []string) (*clientv3.Client, error)

// promote asks the cluster to promote the learner id.
//
// A voter that is not the leader forwards a promotion to the leader over
// its peer URL and passes on only the client's auth token: an identity
// from a client certificate's CN has none, so with auth on the leader
// refuses it as "auth: user name is empty", and the follower retries
// until its request timeout. The promotion therefore goes to the leader's
// own client URL first, and to whichever voter answers (r.cli) only if
// the leader's client URL does not answer; with a certificate identity
// that last path can succeed only if the call reaches the leader.
//
// The leader's client URL is skipped while the role loop's last read of
// the leader's view through it failed (viewAt zero), so that a cut client
// URL does not cost every attempt leaderCallTimeout. A promotion that the
// leader proposed but did not answer within leaderCallTimeout is sent
// again: the second answer is then "member not a learner", and the next
// observation sees the promotion.
func (r *roles) promote(ctx context.Context, lg *zap.Logger, id uint64) error {
	err := fmt.Errorf("%w: the leader's client URL did not answer the last view read", errUnanswered)
	if !r.viewAt.IsZero() {
		err = r.promoteAtLeader(ctx, id)
	}
	if err == nil || !unanswered(err) || ctx.Err() != nil {
		return err
	}
	lg.Info("promotion not sent to the leader's client URL; sending it to any voter", zap.Error(err))
	return retryUnanswered(ctx, r.clock, r.attempt(), func(ctx context.Context) error {
		_, err := r.cli.MemberPromote(ctx, id)
		return err
	})
}

// attempt bounds one attempt of an idempotent cluster call at the
// distance the role loop measures to the voters.
func (r *roles) attempt() time.Duration {
	return evidenceTimeout(attemptTimeout, r.roundTrip())
}

// promoteAtLeader sends the promotion to the current leader's client URLs.
func (r *roles) promoteAtLeader(ctx context.Context, id uint64) error {
	leader := r.srv.Leader()
	m := r.srv.Cluster().Member(leader)
	if m == nil || len(m.ClientURLs) == 0 {
		return fmt.Errorf("%w: leader %x has no client URL in the member list", errUnanswered, uint64(leader))
	}
	lctx, cancel := context.WithTimeout(ctx, leaderCallTimeout)
	defer cancel()
	cli, err := r.dial(lctx, m.ClientURLs)
	if err != nil {
		// With --user, the dial authenticates: a refusal is an answer.
		return fmt.Errorf("client for the leader %s at %v: %w", m.Name, m.ClientURLs, err)
	}
	defer cli.Close()
	if _, err := cli.MemberPromote(lctx, id); err != nil {
		return fmt.Errorf("at the leader %s (%v): %w", m.Name, m.ClientURLs, err)
	}
	return nil
}

// errUnanswered marks a call that no member answered.
var errUnanswered = errors.New("replica: no answer")

// unanswered tells whether err means the call reached no leader (so
// another path may be tried), rather than the leader's refusal: no
// connection or no answer in time, or a member that is no longer the
// leader, or has none.
func unanswered(err error) bool {
	for _, e := range []error{errUnanswered, context.DeadlineExceeded,
		rpctypes.ErrNoLeader, rpctypes.ErrLeaderChanged, rpctypes.ErrStopped} {
		if errors.Is(err, e) {
			return true
		}
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}
