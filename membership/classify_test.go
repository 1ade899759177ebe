package membership

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Every answer etcd gives a membership change, in the client's form, the
// server's (a gRPC status) and wrapped, means one thing for each change.
func TestClassify(t *testing.T) {
	retry := Answer{Verdict: Retry}
	unanswered := Answer{Verdict: Retry, Unanswered: true}
	done := Answer{Verdict: Done}
	already := Answer{Verdict: Done, Already: true}
	check := Answer{Verdict: Check}
	refused := Answer{Verdict: Refused}
	failed := Answer{Verdict: Failed}
	all := []Op{OpAddLearner, OpPromote, OpRemove, OpRemoveLearner}
	for _, tc := range []struct {
		name string
		err  error
		// want is the answer for each op; an op missing takes every.
		every Answer
		want  map[Op]Answer
	}{
		{name: "made", err: nil, every: done},

		// Refused before raft: nothing changed, worth asking again.
		{name: "unhealthy cluster", err: rpctypes.ErrUnhealthy, every: retry},
		{name: "too many requests", err: rpctypes.ErrTooManyRequests, every: retry},
		{name: "not enough started members", err: rpctypes.ErrMemberNotEnoughStarted, every: retry},

		// No answer: may still be applied.
		{name: "etcd's request timeout (a change raft dropped beside another)", err: rpctypes.ErrTimeout, every: unanswered},
		{name: "timeout, leader failed", err: rpctypes.ErrTimeoutDueToLeaderFail, every: unanswered},
		{name: "timeout, connection lost", err: rpctypes.ErrTimeoutDueToConnectionLost, every: unanswered},
		{name: "no leader", err: rpctypes.ErrNoLeader, every: unanswered},
		{name: "leader changed", err: rpctypes.ErrLeaderChanged, every: unanswered},
		{name: "member stopped", err: rpctypes.ErrStopped, every: unanswered},
		{name: "attempt's deadline", err: context.DeadlineExceeded, every: unanswered},
		{name: "attempt canceled", err: context.Canceled, every: unanswered},
		{name: "gRPC deadline", err: status.Error(codes.DeadlineExceeded, "context deadline exceeded"), every: unanswered},
		{name: "no connection", err: status.Error(codes.Unavailable, "connection error: connection refused"), every: unanswered},

		// The cluster's auth: nothing changed, and asking again will not help.
		{name: "permission denied", err: rpctypes.ErrPermissionDenied, every: refused},
		{name: "user name empty", err: rpctypes.ErrUserEmpty, every: refused},
		{name: "authentication failed", err: rpctypes.ErrAuthFailed, every: refused},

		// Depends on the change.
		{name: "member not found", err: rpctypes.ErrMemberNotFound, want: map[Op]Answer{
			OpAddLearner: retry, // the ID of a member removed this second
			OpPromote:    refused,
			OpRemove:     already, OpRemoveLearner: already,
		}},
		{name: "peer URLs exist", err: rpctypes.ErrPeerURLExist, every: failed, want: map[Op]Answer{OpAddLearner: check}},
		{name: "member ID exists", err: rpctypes.ErrMemberExist, every: failed, want: map[Op]Answer{OpAddLearner: check}},
		{name: "too many learners", err: rpctypes.ErrTooManyLearners, every: failed, want: map[Op]Answer{OpAddLearner: refused}},
		{name: "bad peer URLs", err: rpctypes.ErrMemberBadURLs, every: failed, want: map[Op]Answer{OpAddLearner: refused}},
		{name: "not a learner: a voter already", err: rpctypes.ErrMemberNotLearner, every: failed, want: map[Op]Answer{OpPromote: already}},
		{name: "learner not ready (etcd's 90% check)", err: rpctypes.ErrMemberLearnerNotReady, every: failed, want: map[Op]Answer{OpPromote: refused}},

		{name: "anything else", err: errors.New("boom"), every: failed},
		{name: "not capable", err: rpctypes.ErrNotCapable, every: failed},
	} {
		for _, op := range all {
			want, ok := tc.want[op]
			if !ok {
				want = tc.every
			}
			forms := map[string]error{"client's form": tc.err}
			if tc.err != nil {
				forms["wrapped"] = fmt.Errorf("at the leader m1: %w", tc.err)
				if ee, ok := tc.err.(rpctypes.EtcdError); ok {
					forms["server's form"] = status.Error(ee.Code(), ee.Error())
					forms["server's form, wrapped"] = fmt.Errorf("remove: %w", status.Error(ee.Code(), ee.Error()))
				}
			}
			for form, err := range forms {
				if got := Classify(op, err); got != want {
					t.Errorf("%s, %s, %s: Classify = %+v, want %+v", op, tc.name, form, got, want)
				}
			}
		}
	}
}

func TestSettle(t *testing.T) {
	voter := &etcdserverpb.Member{ID: 1, Name: "v1", PeerURLs: []string{"http://v1:2380"}}
	learner := &etcdserverpb.Member{ID: 2, Name: "r1", PeerURLs: []string{"http://r1:2380"}, IsLearner: true}
	unstarted := &etcdserverpb.Member{ID: 3, PeerURLs: []string{"http://r2:2380", "http://r2b:2380"}, IsLearner: true}
	members := []*etcdserverpb.Member{voter, learner, unstarted}
	for _, tc := range []struct {
		name    string
		c       Change
		verdict Verdict
		already bool
		member  *etcdserverpb.Member
		why     error
	}{
		{"add: a learner that never started at exactly these URLs", Change{Op: OpAddLearner, PeerURLs: []string{"http://r2b:2380", "http://r2:2380"}}, Done, true, unstarted, nil},
		{"add: a started learner at these URLs", Change{Op: OpAddLearner, PeerURLs: []string{"http://r1:2380"}}, Refused, false, learner, ErrPeerURLsHeld},
		{"add: a voter at these URLs", Change{Op: OpAddLearner, PeerURLs: []string{"http://v1:2380"}}, Refused, false, voter, ErrPeerURLsHeld},
		{"add: some of the URLs held", Change{Op: OpAddLearner, PeerURLs: []string{"http://r2:2380"}}, Refused, false, unstarted, ErrPeerURLsHeld},
		{"add: nobody at them", Change{Op: OpAddLearner, PeerURLs: []string{"http://r9:2380"}}, Retry, false, nil, nil},
		{"promote: a voter now", Change{Op: OpPromote, ID: 1}, Done, true, voter, nil},
		{"promote: still a learner", Change{Op: OpPromote, ID: 2}, Retry, false, learner, nil},
		{"promote: gone", Change{Op: OpPromote, ID: 9}, Refused, false, nil, ErrNoMember},
		{"remove: gone", Change{Op: OpRemove, ID: 9}, Done, true, nil, nil},
		{"remove: a voter still listed", Change{Op: OpRemove, ID: 1}, Retry, false, voter, nil},
		{"remove learner: gone", Change{Op: OpRemoveLearner, ID: 9}, Done, true, nil, nil},
		{"remove learner: still a learner", Change{Op: OpRemoveLearner, ID: 2}, Retry, false, learner, nil},
		{"remove learner: a voter now", Change{Op: OpRemoveLearner, ID: 1}, Refused, false, voter, ErrRefused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := Settle(tc.c, members)
			if a.Verdict != tc.verdict || a.Already != tc.already || a.Member != tc.member || !errors.Is(a.Why, tc.why) || (tc.why == nil) != (a.Why == nil) {
				t.Fatalf("Settle = %+v, want %v (already %v) with member %v, why %v", a, tc.verdict, tc.already, tc.member, tc.why)
			}
		})
	}
}

// A change left to be retried, or a call without an answer, may go
// another way; a refusal or a change made may not.
func TestRetryable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("at the leader: %w", status.Error(codes.Unavailable, "connection refused")), true},
		{rpctypes.ErrUnhealthy, true},
		{rpctypes.ErrPermissionDenied, false},
		{&ChangeError{Change: Change{Op: OpPromote}, Verdict: Retry, Ctx: context.DeadlineExceeded, Err: rpctypes.ErrNoLeader}, true},
		{fmt.Errorf("wrapped: %w", &ChangeError{Change: Change{Op: OpPromote}, Verdict: Refused, Err: rpctypes.ErrMemberLearnerNotReady}), false},
		{&ChangeError{Change: Change{Op: OpPromote}, Verdict: Failed, Err: errors.New("boom")}, false},
	} {
		if got := Retryable(tc.err); got != tc.want {
			t.Errorf("Retryable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
