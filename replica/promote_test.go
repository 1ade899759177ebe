package replica

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/understudy-kv/understudy/membership"
)

// A promotion falls back from the leader's client URL to any voter only
// when the leader did not get it through (a change still to be asked, a
// dial without an answer, no client URL); a refusal is final. The quota
// guard's gate takes only a refusal with nothing in doubt as "nothing
// changed", however wrapped.
func TestPromotionErrors(t *testing.T) {
	atLeader := func(err error) error { return fmt.Errorf("at the leader m1 ([https://127.0.0.1:1]): %w", err) }
	change := func(v membership.Verdict, inDoubt bool, err, ctx error) error {
		return &membership.ChangeError{Change: membership.Change{Op: membership.OpPromote, ID: 2}, Verdict: v, InDoubt: inDoubt, Attempts: 1, Err: err, Ctx: ctx}
	}
	for _, tc := range []struct {
		name                string
		err                 error
		fallBack, unchanged bool
	}{
		{"no connection, leader's time up", atLeader(change(membership.Retry, true, status.Error(codes.Unavailable, "connection refused"), context.DeadlineExceeded)), true, false},
		{"no leader, leader's time up", atLeader(change(membership.Retry, true, rpctypes.ErrNoLeader, context.DeadlineExceeded)), true, false},
		{"unhealthy, leader's time up", atLeader(change(membership.Retry, false, rpctypes.ErrUnhealthy, context.DeadlineExceeded)), true, false},
		{"dial without an answer", fmt.Errorf("client for the leader m1 at [x]: %w", context.DeadlineExceeded), true, false},
		{"no client URL", fmt.Errorf("%w: leader 1 has none in the member list", errNoClientURL), true, false},
		{"learner not ready", atLeader(change(membership.Refused, false, rpctypes.ErrMemberLearnerNotReady, nil)), false, true},
		{"no rights", atLeader(change(membership.Refused, false, rpctypes.ErrPermissionDenied, nil)), false, true},
		{"refused after an attempt in doubt", atLeader(change(membership.Refused, true, rpctypes.ErrMemberLearnerNotReady, nil)), false, false},
		{"dial refused by auth", fmt.Errorf("client for the leader m1 at [x]: %w", rpctypes.ErrAuthFailed), false, false},
		{"unknown answer", atLeader(change(membership.Failed, false, errors.New("boom"), nil)), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := errors.Is(tc.err, errNoClientURL) || membership.Retryable(tc.err); got != tc.fallBack {
				t.Errorf("falls back = %v, want %v (%v)", got, tc.fallBack, tc.err)
			}
			if got := membership.Unchanged(tc.err); got != tc.unchanged {
				t.Errorf("Unchanged = %v, want %v (%v)", got, tc.unchanged, tc.err)
			}
		})
	}
}
