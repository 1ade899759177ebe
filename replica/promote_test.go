package replica

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A promotion falls back from the leader's client URL to any voter only
// when the leader did not answer; a refusal is final, and the quota guard
// still tells it from a promotion in doubt once wrapped.
func TestPromotionErrors(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("at the leader m1 ([https://127.0.0.1:1]): %w", err) }
	for _, tc := range []struct {
		name                string
		err                 error
		unanswered, refused bool
	}{
		{"no connection", wrap(status.Error(codes.Unavailable, "connection refused")), true, false},
		{"no answer in time", wrap(context.DeadlineExceeded), true, false},
		{"grpc deadline", wrap(status.Error(codes.DeadlineExceeded, "context deadline exceeded")), true, false},
		{"no client URL", fmt.Errorf("%w: leader 1 has no client URL", errUnanswered), true, false},
		{"not the leader any more", wrap(rpctypes.ErrLeaderChanged), true, false},
		{"no leader", wrap(rpctypes.ErrNoLeader), true, false},
		{"learner not ready", wrap(rpctypes.ErrMemberLearnerNotReady), false, true},
		{"not a learner", wrap(rpctypes.ErrMemberNotLearner), false, true},
		{"not found", wrap(rpctypes.ErrMemberNotFound), false, true},
		{"server's form", rpctypes.ErrGRPCLearnerNotReady, false, true},
		{"no rights", wrap(rpctypes.ErrPermissionDenied), false, false},
		{"user name empty", wrap(rpctypes.ErrUserEmpty), false, false},
		{"request timed out: in doubt", wrap(rpctypes.ErrTimeout), false, false},
		{"other", errors.New("boom"), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := unanswered(tc.err); got != tc.unanswered {
				t.Errorf("unanswered(%v) = %v, want %v", tc.err, got, tc.unanswered)
			}
			if got := refused(tc.err); got != tc.refused {
				t.Errorf("refused(%v) = %v, want %v", tc.err, got, tc.refused)
			}
		})
	}
}
