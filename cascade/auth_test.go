package cascade

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/authpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/server/v3/auth"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// newTestAuthz is an authz holding a copy of a source with auth on: a
// role "reader" that reads pub/…, a user alice with it, and root.
func newTestAuthz(t *testing.T, now time.Time) *authz {
	t.Helper()
	a := newAuthz(zap.NewNop(), clockwork.NewFakeClockAt(now), t.TempDir(), nil, time.Second, prometheus.NewCounter(prometheus.CounterOpts{Name: "c"}))
	v, err := a.build(authState{enabled: true, rev: 7,
		users: map[string][]string{"root": {"root"}, "alice": {"reader"}},
		roles: map[string][]*authpb.Permission{"root": nil, "reader": {{PermType: authpb.READ, Key: []byte("pub/"), RangeEnd: []byte("pub0")}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.close)
	a.view.Store(v)
	a.checked.Store(now.UnixNano())
	return a
}

func withToken(token string) context.Context {
	return metadata.NewIncomingContext(context.Background(), metadata.Pairs(rpctypes.TokenFieldNameGRPC, token))
}

func rangeCheck(key string) func(auth.AuthStore, *auth.AuthInfo) error {
	return func(as auth.AuthStore, ai *auth.AuthInfo) error { return as.IsRangePermitted(ai, []byte(key), nil) }
}

func TestAuthzChecksTheSourcesPermissions(t *testing.T) {
	now := time.Now()
	a := newTestAuthz(t, now)
	a.Issued("t-alice", "alice")
	a.Issued("t-root", "root")
	for _, tc := range []struct {
		ctx  context.Context
		key  string
		want error
	}{
		{withToken("t-alice"), "pub/a", nil},
		{withToken("t-alice"), "secret/a", auth.ErrPermissionDenied},
		{withToken("t-root"), "secret/a", nil},
		{withToken("never-issued"), "pub/a", auth.ErrInvalidAuthToken},
		{context.Background(), "pub/a", auth.ErrUserEmpty},
	} {
		if err := a.Permit(tc.ctx, rangeCheck(tc.key)); !errors.Is(err, tc.want) {
			t.Errorf("%v on %s: %v, want %v", metadata.ValueFromIncomingContext(tc.ctx, "token"), tc.key, err, tc.want)
		}
	}
	if err := a.Permit(withToken("t-alice"), func(as auth.AuthStore, ai *auth.AuthInfo) error { return as.IsAdminPermitted(ai) }); !errors.Is(err, auth.ErrPermissionDenied) {
		t.Errorf("alice as admin: %v", err)
	}
}

// A call checked with a copy confirmed longer than twice the interval
// ago asks for a confirmation and waits for it; none coming, it is refused
// (Unavailable), never checked with the old copy.
func TestAuthzWaitsForAConfirmation(t *testing.T) {
	now := time.Now()
	a := newTestAuthz(t, now)
	a.Issued("t-root", "root")
	clock := a.clock.(*clockwork.FakeClock)
	clock.Advance(1500 * time.Millisecond)
	if err := a.Permit(withToken("t-root"), rangeCheck("pub/a")); err != nil {
		t.Fatalf("a copy confirmed 1.5 s ago: %v", err)
	}
	clock.Advance(time.Second)
	ctx, cancel := context.WithCancel(withToken("t-root"))
	cancel()
	if err := a.Permit(ctx, rangeCheck("pub/a")); status.Code(err) != codes.Unavailable {
		t.Fatalf("a copy confirmed 2.5 s ago, nothing confirming it: %v, want Unavailable", err)
	}
	select {
	case <-a.kick:
	default:
		t.Fatal("the waiting call did not ask the loop for a confirmation")
	}
	done := make(chan error, 1)
	go func() { done <- a.Permit(withToken("t-root"), rangeCheck("pub/a")) }()
	// The call waits on its timer (maxWait) until the confirmation.
	bctx, bcancel := context.WithTimeout(context.Background(), time.Minute)
	defer bcancel()
	if err := clock.BlockUntilContext(bctx, 1); err != nil {
		t.Fatal(err)
	}
	a.confirm(clock.Now())
	if err := <-done; err != nil {
		t.Fatalf("after a confirmation: %v", err)
	}
}

// With the source's auth off, everything is permitted, and no token is
// recorded.
func TestAuthzAuthOff(t *testing.T) {
	a := newAuthz(zap.NewNop(), clockwork.NewFakeClock(), t.TempDir(), nil, time.Second, nil)
	v, err := a.build(authState{rev: 3})
	if err != nil {
		t.Fatal(err)
	}
	a.view.Store(v)
	a.Issued("t", "alice")
	if err := a.Permit(context.Background(), rangeCheck("x")); err != nil || len(a.tokens) != 0 {
		t.Fatalf("auth off: %v, tokens %v", err, a.tokens)
	}
}
