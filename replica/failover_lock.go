package replica

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/understudy-kv/understudy/membership"
	"github.com/understudy-kv/understudy/promotion"
)

const (
	failoverLockKey   = membership.FailoverLockKey
	failoverRecordKey = membership.FailoverRecordKey
	// failoverLockTTL is the lock's lease, in seconds: a holder silent for
	// this long loses the lock to another standby.
	failoverLockTTL = 10
)

var (
	// errFenced means the lock is no longer this replica's, or the record
	// is not the one the action was decided on.
	errFenced = errors.New("replica: the failover lock is not held, the failover record changed, or a maintenance hold was written")
)

// failoverLock is the failover lock and the record it guards. Every write
// of the record, and the check before each membership change, is a
// transaction that succeeds only while this replica owns the lock, so a
// standby that wakes up after losing the lock cannot act on what it
// decided before.
type failoverLock struct {
	session *concurrency.Session
	mu      *concurrency.Mutex
	locked  bool
}

func (l *failoverLock) held() bool { return l.locked }

// done is closed when the session behind the held lock ends; nil (never
// ready) when no lock is held.
func (l *failoverLock) done() <-chan struct{} {
	if !l.locked {
		return nil
	}
	return l.session.Done()
}

// acquire tries once for the lock. Every call is bounded by ctx: the lease
// is granted here (concurrency.NewSession would grant it without a
// deadline), and the session only keeps it alive.
func (l *failoverLock) acquire(ctx context.Context, cli *clientv3.Client) (bool, error) {
	if l.session == nil {
		lease, err := cli.Grant(ctx, failoverLockTTL)
		if err != nil {
			return false, fmt.Errorf("failover lock: LeaseGrant: %w", err)
		}
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(failoverLockTTL), concurrency.WithLease(lease.ID))
		if err != nil {
			revokeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
			_, _ = cli.Revoke(revokeCtx, lease.ID)
			cancel()
			return false, fmt.Errorf("failover lock: LeaseKeepAlive: %w", err)
		}
		l.session, l.mu = s, concurrency.NewMutex(s, failoverLockKey)
	}
	select {
	case <-l.session.Done():
		l.forget()
		return false, errors.New("failover lock: session expired")
	default:
	}
	switch err := l.mu.TryLock(ctx); {
	case err == nil:
		l.locked = true
		return true, nil
	case errors.Is(err, concurrency.ErrLocked):
		return false, nil
	default:
		return false, fmt.Errorf("failover lock: Txn on %q: %w", failoverLockKey, err)
	}
}

// forget drops the lock without talking to the cluster (its lease is
// gone).
func (l *failoverLock) forget() {
	if l.session != nil {
		l.session.Orphan()
	}
	l.session, l.mu, l.locked = nil, nil, false
}

// release unlocks and ends the session, so that no lease outlives the
// failover.
func (l *failoverLock) release(lg *zap.Logger) {
	if l.session == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if l.locked {
		if err := l.mu.Unlock(ctx); err != nil {
			lg.Warn("failover lock: unlock", zap.Error(err))
		}
	}
	// Session.Close would revoke within the lease's TTL; a shorter
	// deadline keeps the loop moving (the lease ends by itself anyway).
	l.session.Orphan()
	if _, err := l.session.Client().Revoke(ctx, l.session.Lease()); err != nil {
		lg.Debug("failover lock: revoke its lease", zap.Error(err))
	}
	l.session, l.mu, l.locked = nil, nil, false
}

// recordIs compares the stored record with r; nil means none is stored.
func recordIs(r *promotion.Record) clientv3.Cmp {
	if r == nil {
		return clientv3.Compare(clientv3.CreateRevision(failoverRecordKey), "=", 0)
	}
	return clientv3.Compare(clientv3.Value(failoverRecordKey), "=", r.Marshal())
}

// fenced runs ops only while this replica owns the lock, the stored
// record is was, and the comparisons also hold.
func (l *failoverLock) fenced(ctx context.Context, was *promotion.Record, also []clientv3.Cmp, ops ...clientv3.Op) error {
	if !l.locked {
		return errFenced
	}
	cmps := append([]clientv3.Cmp{l.mu.IsOwner(), recordIs(was)}, also...)
	resp, err := l.session.Client().Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return fmt.Errorf("failover record: Txn on %q: %w", failoverRecordKey, err)
	}
	if !resp.Succeeded {
		return errFenced
	}
	return nil
}

// check confirms, just before a membership change, that the lock is held,
// the record is still r, and no maintenance hold was written since the
// holds were read at revision holdsRev, when the change was decided.
func (l *failoverLock) check(ctx context.Context, r *promotion.Record, holdsRev int64) error {
	return l.fenced(ctx, r, []clientv3.Cmp{membership.HoldsUnchanged(holdsRev)})
}

// write stores r in place of was while no maintenance hold was written
// since revision holdsRev.
func (l *failoverLock) write(ctx context.Context, was, r *promotion.Record, holdsRev int64) error {
	return l.fenced(ctx, was, []clientv3.Cmp{membership.HoldsUnchanged(holdsRev)}, clientv3.OpPut(failoverRecordKey, r.Marshal()))
}

// clear deletes r, hold or not: a finished or abandoned failover changes
// no membership.
func (l *failoverLock) clear(ctx context.Context, r *promotion.Record) error {
	return l.fenced(ctx, r, nil, clientv3.OpDelete(failoverRecordKey))
}
