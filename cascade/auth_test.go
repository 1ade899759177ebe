package cascade

import (
	"context"
	"errors"
	"runtime"
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

	"github.com/understudy-kv/understudy/wire"
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
	issue(t, a, "t-alice", "alice")
	issue(t, a, "t-root", "root")
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
	issue(t, a, "t-root", "root")
	clock := a.clock.(*clockwork.FakeClock)
	clock.Advance(1500 * time.Millisecond)
	if err := a.Permit(withToken("t-root"), rangeCheck("pub/a")); err != nil {
		t.Fatalf("a copy confirmed 1.5 s ago: %v", err)
	}
	clock.Advance(time.Second)
	ctx, cancel := context.WithCancel(withToken("t-root"))
	cancel()
	if err := a.Permit(ctx, rangeCheck("pub/a")); status.Code(err) != codes.Canceled {
		t.Fatalf("a copy confirmed 2.5 s ago, the call canceled: %v, want Canceled", err)
	}
	select {
	case <-a.kick:
	default:
		t.Fatal("the waiting call did not ask the loop for a confirmation")
	}
	// The call waits on its timer (maxWait): no confirmation within it,
	// Unavailable.
	bctx, bcancel := context.WithTimeout(context.Background(), time.Minute)
	defer bcancel()
	done := make(chan error, 1)
	go func() { done <- a.Permit(withToken("t-root"), rangeCheck("pub/a")) }()
	if err := clock.BlockUntilContext(bctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(5 * time.Second)
	if err := <-done; status.Code(err) != codes.Unavailable {
		t.Fatalf("no confirmation within maxWait: %v, want Unavailable", err)
	}
	go func() { done <- a.Permit(withToken("t-root"), rangeCheck("pub/a")) }()
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
	clock := clockwork.NewFakeClock()
	a := newAuthz(zap.NewNop(), clock, t.TempDir(), nil, time.Second, nil)
	v, err := a.build(authState{rev: 3})
	if err != nil {
		t.Fatal(err)
	}
	a.view.Store(v)
	a.confirm(clock.Now())
	issue(t, a, "t", "alice")
	if err := a.Permit(context.Background(), rangeCheck("x")); err != nil || len(a.tokens) != 0 {
		t.Fatalf("auth off: %v, tokens %v", err, a.tokens)
	}
}

// A copy of a source with auth off, confirmed longer than twice the
// interval ago (a quiet spell), permits nothing until it is confirmed
// again: meanwhile the source may have turned auth on, and the call is
// then checked by the new copy.
func TestAuthzConfirmsACopyWithAuthOff(t *testing.T) {
	a, clock := newAuthOffAuthz(t)
	clock.Advance(3 * time.Second)
	done := make(chan error, 1)
	go func() { done <- a.Permit(context.Background(), rangeCheck("pub/a")) }()
	recv := func() error {
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("Permit did not return")
			return nil
		}
	}
	select {
	case <-a.kick:
	case err := <-done:
		t.Fatalf("a copy with auth off confirmed 3 s ago permitted a call without asking for a confirmation: %v", err)
	}
	// The loop's refresh: the source turned auth on.
	turnAuthOn(t, a)
	if err := recv(); !errors.Is(err, auth.ErrUserEmpty) {
		t.Fatalf("an anonymous call once the source turned auth on: %v, want %v", err, auth.ErrUserEmpty)
	}
}

// While no upstream answers, a copy of a source with auth off is served
// (weak reads outlive an upstream's outage): after maxWait when the call
// asked for a confirmation that did not come, at once while a refresh
// failed within fresh; one that failed longer ago is not taken for an
// outage now.
func TestAuthzServesAuthOffWhileNoUpstreamAnswers(t *testing.T) {
	a, clock := newAuthOffAuthz(t)
	clock.Advance(3 * time.Second)
	done := make(chan error, 1)
	go func() { done <- a.Permit(context.Background(), rangeCheck("pub/a")) }()
	bctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clock.BlockUntilContext(bctx, 1); err != nil { // its timer
		t.Fatal(err)
	}
	clock.Advance(5 * time.Second)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("no confirmation within maxWait, auth off: %v, want served", err)
		}
	case <-bctx.Done():
		t.Fatal("Permit did not return after maxWait")
	}
	a.failedAt.Store(clock.Now().Add(-time.Second).UnixNano())
	<-a.kick // the first call's
	if err := a.Permit(context.Background(), rangeCheck("pub/a")); err != nil {
		t.Fatalf("a refresh failed 1 s ago, auth off: %v, want served", err)
	}
	select {
	case <-a.kick:
		t.Fatal("a call asked for a confirmation while the last refresh had just failed, auth off")
	default:
	}
	// A failure 3 s old (the upstream may be back, the source's auth on):
	// the call waits for a confirmation.
	a.failedAt.Store(clock.Now().Add(-3 * time.Second).UnixNano())
	go func() { done <- a.Permit(context.Background(), rangeCheck("pub/a")) }()
	select {
	case <-a.kick:
	case err := <-done:
		t.Fatalf("a copy with auth off, its last refresh failed 3 s ago, permitted a call without a confirmation: %v", err)
	}
	a.confirm(clock.Now())
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A forwarded call without a token, through a client certificate, asks
// whether the source's auth is on by a confirmed copy: one saying off
// after a quiet spell is confirmed first (the source turned auth on: the
// call is refused, never run as the certificate's user).
func TestForwarderConfirmsAuthOffBeforeForwardingAsTheCertificate(t *testing.T) {
	a, clock := newAuthOffAuthz(t)
	f := forwarder{clientCert: true, authOn: a.On}
	if _, err := f.creds(context.Background(), "/etcdserverpb.KV/Put"); err != nil {
		t.Fatalf("auth off, confirmed now: %v, want forwarded", err)
	}
	clock.Advance(3 * time.Second)
	done := make(chan error, 1)
	go func() { _, err := f.creds(context.Background(), "/etcdserverpb.KV/Put"); done <- err }()
	select {
	case <-a.kick:
	case err := <-done:
		t.Fatalf("auth off confirmed 3 s ago: forwarded without a confirmation (%v)", err)
	}
	turnAuthOn(t, a)
	if err := <-done; !errors.Is(err, rpctypes.ErrGRPCUserEmpty) {
		t.Fatalf("once the source turned auth on: %v, want user name is empty", err)
	}
}

// newAuthOffAuthz is an authz holding a copy of a source with auth off,
// confirmed now, on a fake clock.
func newAuthOffAuthz(t *testing.T) (*authz, *clockwork.FakeClock) {
	t.Helper()
	clock := clockwork.NewFakeClock()
	a := newAuthz(zap.NewNop(), clock, t.TempDir(), nil, time.Second, nil)
	off, err := a.build(authState{rev: 3})
	if err != nil {
		t.Fatal(err)
	}
	a.view.Store(off)
	a.confirm(clock.Now())
	return a, clock
}

// turnAuthOn is the loop's refresh after the source turned auth on (root
// its only user): the new copy, confirmed now.
func turnAuthOn(t *testing.T, a *authz) {
	t.Helper()
	on, err := a.build(authState{enabled: true, rev: 4, users: map[string][]string{"root": {"root"}}, roles: map[string][]*authpb.Permission{"root": nil}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(on.close)
	a.view.Store(on)
	a.confirm(a.clock.Now())
}

// issue records a token as a forwarded Authenticate does.
func issue(t *testing.T, a *authz, token, user string) {
	t.Helper()
	record, err := a.IssueAt(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	record(token, user)
}

// A token is forgotten after tokenTTL unused.
func TestAuthzTokensExpire(t *testing.T) {
	now := time.Now()
	a := newTestAuthz(t, now)
	clock := a.clock.(*clockwork.FakeClock)
	issue(t, a, "t-alice", "alice")
	clock.Advance(tokenTTL + time.Second)
	a.confirm(clock.Now())
	if err := a.Permit(withToken("t-alice"), rangeCheck("pub/a")); !errors.Is(err, auth.ErrInvalidAuthToken) {
		t.Fatalf("a token unused for longer than %v: %v, want invalid", tokenTTL, err)
	}
}

// An Authenticate is recorded against a copy confirmed when it is
// forwarded: with the copy not confirmed lately, IssueAt waits for a
// confirmation first (so that the next check does not refresh the copy and
// find the token older than it).
func TestAuthzIssuesAgainstAConfirmedCopy(t *testing.T) {
	now := time.Now()
	a := newTestAuthz(t, now)
	clock := a.clock.(*clockwork.FakeClock)
	clock.Advance(3 * time.Second) // a quiet spell: the copy is not fresh
	done := make(chan error, 1)
	go func() {
		_, err := a.IssueAt(context.Background())
		done <- err
	}()
	select {
	case <-a.kick:
	case <-time.After(time.Minute):
		t.Fatal("IssueAt did not ask for a confirmation")
	}
	select {
	case err := <-done:
		t.Fatalf("IssueAt returned before a confirmation: %v", err)
	default:
	}
	a.confirm(clock.Now())
	if err := <-done; err != nil {
		t.Fatalf("after a confirmation: %v", err)
	}
}

// After a change of the source's auth, a token recorded before it is
// checked with the source once, at its next use: one the source takes
// (the change did not touch its user; a permission denied is the read's,
// not the token's) is kept, one it refuses is refused as the source refuses
// it and forgotten, and with no answer the call is Unavailable.
func TestAuthzRechecksTokensAfterAChange(t *testing.T) {
	now := time.Now()
	a := newTestAuthz(t, now)
	for _, tok := range []string{"t-kept", "t-denied", "t-gone", "t-old", "t-noanswer"} {
		issue(t, a, tok, "alice")
	}
	answers := map[string]error{
		"t-kept": nil, "t-denied": rpctypes.ErrGRPCPermissionDenied, "t-gone": rpctypes.ErrGRPCInvalidAuthToken,
		"t-old": rpctypes.ErrGRPCAuthOldRevision, "t-noanswer": status.Error(codes.Unavailable, "no upstream"),
	}
	asked := map[string]int{}
	a.checkToken = func(ctx context.Context, _ uint64) error {
		tok := metadata.ValueFromIncomingContext(ctx, rpctypes.TokenFieldNameGRPC)[0]
		asked[tok]++
		return answers[tok]
	}
	v, err := a.build(authState{enabled: true, rev: 8,
		users: map[string][]string{"root": {"root"}, "alice": {"reader"}, "bob": nil},
		roles: map[string][]*authpb.Permission{"root": nil, "reader": {{PermType: authpb.READ, Key: []byte("pub/"), RangeEnd: []byte("pub0")}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.close)
	a.view.Store(v) // an unrelated change: bob added
	for tok, want := range map[string][]error{"t-kept": {nil, nil}, "t-denied": {nil, nil},
		"t-gone": {auth.ErrInvalidAuthToken, auth.ErrInvalidAuthToken}, "t-old": {auth.ErrAuthOldRevision, auth.ErrInvalidAuthToken}} {
		for i, w := range want {
			if err := a.Permit(withToken(tok), rangeCheck("pub/a")); !errors.Is(err, w) {
				t.Errorf("%s, use %d after an auth change: %v, want %v", tok, i+1, err, w)
			}
		}
	}
	if err := a.Permit(withToken("t-noanswer"), rangeCheck("pub/a")); status.Code(err) != codes.Unavailable {
		t.Errorf("a token the source did not answer for: %v, want Unavailable", err)
	}
	if asked["t-kept"] != 1 || asked["t-denied"] != 1 {
		t.Errorf("tokens the source took were asked about %v; want once each", asked)
	}
	if _, ok := a.tokens["t-gone"]; ok {
		t.Errorf("a token the source refused is still recorded")
	}
}

// A client's calls with one token, at once after an auth change, ask the
// source once between them; a caller whose own deadline passes while the
// question is out is told so (DeadlineExceeded), not that the source did
// not answer, and the others still get the source's answer.
func TestAuthzAsksOnceForACallersManyCalls(t *testing.T) {
	a := newTestAuthz(t, time.Now())
	issue(t, a, "t-alice", "alice")
	asked, answer := make(chan struct{}, 16), make(chan error)
	a.checkToken = func(ctx context.Context, _ uint64) error {
		asked <- struct{}{}
		select {
		case err := <-answer:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	v, err := a.build(authState{enabled: true, rev: 8, users: map[string][]string{"root": {"root"}, "alice": {"reader"}, "bob": nil},
		roles: map[string][]*authpb.Permission{"root": nil, "reader": {{PermType: authpb.READ, Key: []byte("pub/"), RangeEnd: []byte("pub0")}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.close)
	a.view.Store(v)
	const calls = 8
	done := make(chan error, calls)
	for range calls {
		go func() { done <- a.Permit(withToken("t-alice"), rangeCheck("pub/a")) }()
	}
	short, cancel := context.WithCancel(withToken("t-alice"))
	shortDone := make(chan error, 1)
	go func() { shortDone <- a.Permit(short, rangeCheck("pub/a")) }()
	deadline := time.Now().Add(time.Minute)
	for a.waiting.Load() != calls+1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls waiting for the recheck, want %d", a.waiting.Load(), calls+1)
		}
		runtime.Gosched()
	}
	<-asked
	cancel() // as a passed deadline: the caller's own end
	if err := <-shortDone; status.Code(err) != codes.Canceled {
		t.Fatalf("a caller whose context ended while the token was rechecked: %v, want Canceled", err)
	}
	answer <- nil
	for range calls {
		if err := <-done; err != nil {
			t.Fatalf("a call once the source took the token: %v", err)
		}
	}
	if n := len(asked); n != 0 {
		t.Fatalf("the source was asked %d more times; want once for all the calls", n)
	}
}

// The forwarding client puts the caller's token on the call (gRPC's, or
// the JSON gateway's), and refuses an untokened call that would otherwise
// run as its client certificate's user.
func TestForwarderCarriesTheCallersToken(t *testing.T) {
	f := forwarder{clientCert: true, authOn: func(context.Context) (bool, error) { return true, nil }}
	gw := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "gw-token"))
	if opts, err := f.creds(gw, "/etcdserverpb.Lease/LeaseGrant"); err != nil || len(opts) != 1 {
		t.Fatalf("a gateway call: %v %v", opts, err)
	}
	if callerToken(gw) != "gw-token" {
		t.Fatalf("the gateway's token: %q", callerToken(gw))
	}
	if _, err := f.creds(context.Background(), "/etcdserverpb.KV/Put"); !errors.Is(err, rpctypes.ErrGRPCUserEmpty) {
		t.Fatalf("an untokened write with a client certificate: %v, want user name is empty", err)
	}
	for _, m := range []string{"/etcdserverpb.Lease/LeaseKeepAlive", "/etcdserverpb.Auth/Authenticate"} {
		if _, err := f.creds(context.Background(), m); err != nil {
			t.Fatalf("an untokened %s: %v", m, err)
		}
	}
	f.clientCert = false
	if _, err := f.creds(context.Background(), "/etcdserverpb.KV/Put"); err != nil {
		t.Fatalf("an untokened write without a client certificate: %v", err)
	}
}

// A replaced copy is closed once the last check reading it is done, and
// never acquired after: no timer guesses how long checks take.
func TestAuthViewIsClosedAfterItsLastCheck(t *testing.T) {
	a := newTestAuthz(t, time.Now())
	v := a.view.Load()
	held := a.acquire()
	if held != v {
		t.Fatalf("acquire: %p, want the copy in use %p", held, v)
	}
	v.retire()
	if v.refs.shut {
		t.Fatal("a retired copy closed while a check held it")
	}
	if err := held.as.IsRangePermitted(&auth.AuthInfo{Username: "alice", Revision: held.as.Revision()}, []byte("pub/a"), nil); err != nil {
		t.Fatalf("a check on the held copy after it was retired: %v", err)
	}
	held.release()
	if !v.refs.shut {
		t.Fatal("a retired copy not closed after its last check")
	}
	if a.acquire() != nil {
		t.Fatal("a closed copy acquired")
	}
}

// A call that requires the source's auth at a revision its copy has not
// reached (wire.AuthRevisionKey: a cascaded replica below rechecking a
// token after a change it learned first) waits for the copy to reach it,
// so that a token recorded before the change is checked against it here
// too; none coming within maxWait, it is Unavailable.
func TestAuthzWaitsForTheRevisionACallRequires(t *testing.T) {
	now := time.Now()
	a := newTestAuthz(t, now) // at auth revision 7
	issue(t, a, "t-alice", "alice")
	rechecked := 0
	a.checkToken = func(context.Context, uint64) error { rechecked++; return rpctypes.ErrGRPCInvalidAuthToken }
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(rpctypes.TokenFieldNameGRPC, "t-alice", wire.AuthRevisionKey, "8"))
	done := make(chan error, 1)
	go func() { done <- a.Permit(ctx, rangeCheck("pub/a")) }()
	select {
	case <-a.kick:
	case <-time.After(time.Minute):
		t.Fatal("a call requiring revision 8 of a copy at 7 did not ask for a refresh")
	}
	select {
	case err := <-done:
		t.Fatalf("a call requiring revision 8 was checked with the copy at 7: %v", err)
	default:
	}
	v, err := a.build(authState{enabled: true, rev: 8, users: map[string][]string{"root": {"root"}, "alice": {"reader"}},
		roles: map[string][]*authpb.Permission{"root": nil, "reader": {{PermType: authpb.READ, Key: []byte("pub/"), RangeEnd: []byte("pub0")}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.close)
	a.view.Store(v)
	a.confirm(a.clock.Now())
	if err := <-done; !errors.Is(err, auth.ErrInvalidAuthToken) || rechecked != 1 {
		t.Fatalf("after the copy reached 8: %v, rechecked %d times; want the token checked with the source and refused", err, rechecked)
	}
	clock := a.clock.(*clockwork.FakeClock)
	ctx = metadata.NewIncomingContext(context.Background(), metadata.Pairs(wire.AuthRevisionKey, "9"))
	go func() { done <- a.Permit(ctx, rangeCheck("pub/a")) }()
	bctx, bcancel := context.WithTimeout(context.Background(), time.Minute)
	defer bcancel()
	if err := clock.BlockUntilContext(bctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(5 * time.Second)
	if err := <-done; status.Code(err) != codes.Unavailable {
		t.Fatalf("revision 9 never reached: %v, want Unavailable", err)
	}
}
