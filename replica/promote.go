package replica

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/understudy-kv/understudy/membership"
)

// leaderCallTimeout bounds a promotion sent to the leader's own client URL
// before it falls back to any voter's: a cut client URL costs the
// failover at most this.
const leaderCallTimeout = 3 * time.Second

// dialer builds a client with the role loop's TLS and credentials for the
// given endpoints; ctx bounds its dial and every call without a context
// of its own.
type dialer func(ctx context.Context, endpoints []string) (*clientv3.Client, error)

// changer is the membership Changer of the role loop's changes through
// cluster: each attempt bounded by attempt, each retry logged on lg.
func (r *roles) changer(lg *zap.Logger, cluster membership.Cluster, attempt time.Duration) (*membership.Changer, error) {
	cfg := membership.DefaultChangerConfig(cluster, r.clock)
	cfg.Attempt, cfg.Log = attempt, lg
	return membership.NewChanger(cfg)
}

// promote asks the cluster to promote the learner id.
//
// A voter that is not the leader forwards a promotion to the leader over
// its peer URL and passes on only the client's auth token: an identity
// from a client certificate's CN has none, so with auth on the leader
// refuses it as "auth: user name is empty", and the follower retries
// until its request timeout. The promotion therefore goes to the leader's
// own client URL first, and to whichever voter answers (r.cli) only if
// the leader's client URL does not answer (membership.Retryable); with a
// certificate identity that last path can succeed only if the call
// reaches the leader.
//
// The leader's client URL is skipped while the role loop's last read of
// the leader's view through it failed (viewAt zero), so that a cut client
// URL does not cost every attempt leaderCallTimeout. Both paths are the
// Changer's: a promotion whose answer was lost and that is asked again is
// answered "can only promote a learner member", which is done.
func (r *roles) promote(ctx context.Context, lg *zap.Logger, id uint64) error {
	why := "the leader's client URL did not answer the last view read"
	if !r.viewAt.IsZero() {
		err := r.promoteAtLeader(ctx, lg, id)
		if err == nil || !(errors.Is(err, errNoClientURL) || membership.Retryable(err)) || ctx.Err() != nil {
			return err
		}
		why = err.Error()
	}
	lg.Info("promotion not sent to the leader's client URL; sending it to any voter", zap.String("why", why))
	ch, err := r.changer(lg, r.cli.Cluster, r.attempt())
	if err != nil {
		return err
	}
	_, err = ch.Promote(ctx, id)
	return err
}

// attempt bounds one attempt of a cluster call of the role loop near the
// voters (a fence check, a membership change through any voter); far away
// it grows (evidenceTimeout).
func (r *roles) attempt() time.Duration {
	return evidenceTimeout(attemptTimeout, r.roundTrip())
}

// errNoClientURL is a leader the member list gives no client URL.
var errNoClientURL = errors.New("replica: no client URL")

// promoteAtLeader sends the promotion to the current leader's client URLs,
// within leaderCallTimeout.
func (r *roles) promoteAtLeader(ctx context.Context, lg *zap.Logger, id uint64) error {
	leader := r.srv.Leader()
	m := r.srv.Cluster().Member(leader)
	if m == nil || len(m.ClientURLs) == 0 {
		return fmt.Errorf("%w: leader %x has none in the member list", errNoClientURL, uint64(leader))
	}
	lctx, cancel := context.WithTimeout(ctx, leaderCallTimeout)
	defer cancel()
	cli, err := r.dial(lctx, m.ClientURLs)
	if err != nil {
		// With --user, the dial authenticates: a refusal is an answer.
		return fmt.Errorf("client for the leader %s at %v: %w", m.Name, m.ClientURLs, err)
	}
	defer cli.Close()
	ch, err := r.changer(lg, cli.Cluster, leaderCallTimeout)
	if err != nil {
		return err
	}
	if _, err := ch.Promote(lctx, id); err != nil {
		return fmt.Errorf("at the leader %s (%v): %w", m.Name, m.ClientURLs, err)
	}
	return nil
}
