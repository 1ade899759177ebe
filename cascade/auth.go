package cascade

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/auth"
	"go.etcd.io/etcd/server/v3/storage/backend"
	"go.uber.org/zap"
	"golang.org/x/sync/singleflight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/understudy-kv/understudy/wire"
)

// A cascaded replica enforces the source's auth as the source does, with
// etcd's own checks (auth.AuthStore's Is*Permitted, apply.CheckTxnAuth) on a
// copy of the source's users and roles (authView). The local store runs
// with auth off: only the Applier writes it, and the front checks every
// call it serves from it. The copy is kept current by asking the upstream
// for the source's auth revision every AuthRefreshInterval, as a bounded
// read of that age (a learner replica upstream answers it from its own
// rounds, at no cost to the leader), while calls come, and rebuilt
// whenever it moved; a call waits for a confirmation when the last is
// older than twice that. So a change of users, roles or permissions takes
// effect here within about twice AuthRefreshInterval, and a replica nobody
// calls asks nothing. Tokens are the source's: a client
// authenticates through the replica (the upstream checks the password)
// and the replica keeps the name its token stands for until the source's
// auth changes, when the client authenticates again (etcd's clients do it
// by themselves on ErrInvalidAuthToken). A token the replica did not see
// issued is refused the same way.

// authView is the source's auth state at one auth revision.
type authView struct {
	enabled bool
	// rev is the source's auth revision.
	rev uint64
	// as holds the source's users and roles (nil with auth off).
	as auth.AuthStore
	be backend.Backend
	// path is as's file.
	path      string
	refs      refs
	closeOnce sync.Once
}

// refs counts the checks reading a copy: a retired copy is closed once
// the last is done, and none acquires it after.
type refs struct {
	mu            sync.Mutex
	n             int
	retired, shut bool
}

// acquire holds v for a check; false once it is closed.
func (v *authView) acquire() bool {
	v.refs.mu.Lock()
	defer v.refs.mu.Unlock()
	if v.refs.shut {
		return false
	}
	v.refs.n++
	return true
}

func (v *authView) release() {
	v.refs.mu.Lock()
	v.refs.n--
	last := v.refs.retired && v.refs.n == 0 && !v.refs.shut
	if last {
		v.refs.shut = true
	}
	v.refs.mu.Unlock()
	if last {
		v.close()
	}
}

// retire closes v once no check holds it (now, if none does).
func (v *authView) retire() {
	if v == nil {
		return
	}
	v.refs.mu.Lock()
	v.refs.retired = true
	now := v.refs.n == 0 && !v.refs.shut
	if now {
		v.refs.shut = true
	}
	v.refs.mu.Unlock()
	if now {
		v.close()
	}
}

// close closes v's store and removes its file, once.
func (v *authView) close() {
	if v == nil || v.as == nil {
		return
	}
	v.closeOnce.Do(func() {
		v.as.Close()
		_ = v.be.Close()
		_ = os.Remove(v.path)
	})
}

// maxTokens bounds the tokens a replica keeps: past it, every client
// authenticates again. A token unused for tokenTTL is forgotten (etcd's
// --auth-token-ttl default for simple tokens).
const (
	maxTokens = 1 << 16
	tokenTTL  = 5 * time.Minute
)

// authz is the replica's copy of the source's auth and the tokens it saw
// issued.
type authz struct {
	lg  *zap.Logger
	dir string
	// cli reads the source's auth as the replica's user; checkToken asks
	// the source whether the token of ctx's call stands (recheck; nil: it
	// does not).
	cli        *clientv3.Client
	checkToken func(ctx context.Context, rev uint64) error
	clock      clockwork.Clock
	// interval is AuthRefreshInterval: the copy is confirmed that often
	// while calls come (demand), not at all while none do. A call checked
	// with a copy confirmed longer than fresh ago waits (at most maxWait)
	// for the next confirmation (see Permit for a source with auth off).
	interval, fresh, maxWait time.Duration
	view                     atomic.Pointer[authView]
	demand                   atomic.Bool
	// failedAt is when (Unix ns) the last refresh failed (no upstream
	// answered); 0 if it succeeded.
	failedAt atomic.Int64
	kick     chan struct{}
	// checked is when (Unix ns) an upstream last confirmed view's rev;
	// confirmed is closed at the next confirmation.
	checked   atomic.Int64
	confirmed chan struct{}
	builds    atomic.Uint64
	copies    prometheus.Counter
	mu        sync.Mutex
	tokens    map[string]issued
	rechecks  singleflight.Group
	waiting   atomic.Int32 // calls waiting for a recheck
}

// issued is a token's user, as of the source's auth revision rev, and
// when (Unix ns) it was last used here.
type issued struct {
	user string
	rev  uint64
	used int64
}

// status asks an upstream for the source's auth revision, as a read no
// older than interval (wire.MaxStalenessKey).
func (a *authz) status(ctx context.Context) (*clientv3.AuthStatusResponse, error) {
	// Upkeep, as member.aged's: no client's demand for rounds upstream.
	ctx = metadata.AppendToOutgoingContext(background(ctx), wire.MaxStalenessKey, a.interval.String())
	return a.cli.AuthStatus(ctx)
}

// sync reads the source's auth and puts a copy of it in use; it returns
// the copy it replaced, which a check may still be reading.
func (a *authz) sync(ctx context.Context, now time.Time) (*authView, error) {
	s, err := a.read(ctx)
	if err != nil {
		return nil, err
	}
	v, err := a.build(s)
	if err != nil {
		return nil, err
	}
	old := a.view.Swap(v)
	// Tokens recorded as of an older copy stay: each is checked with the
	// source once, at its next use (caller).
	a.confirm(now)
	a.copies.Inc()
	a.lg.Info("copied the source's auth", zap.Bool("enabled", s.enabled), zap.Uint64("auth-revision", s.rev),
		zap.Int("users", len(s.users)), zap.Int("roles", len(s.roles)))
	return old, nil
}

// refresh asks the upstream for the source's auth revision and copies its
// auth again if it moved (returning the copy replaced, as sync).
func (a *authz) refresh(ctx context.Context, now time.Time) (*authView, error) {
	st, err := a.status(ctx)
	if err != nil {
		return nil, fmt.Errorf("cascade: the source's auth status: %w", err)
	}
	if v := a.view.Load(); v != nil && v.enabled == st.Enabled && v.rev == st.AuthRevision {
		a.confirm(now)
		return nil, nil
	}
	return a.sync(ctx, now)
}

// confirm records the copy confirmed at now, and wakes the calls waiting
// for it.
func (a *authz) confirm(now time.Time) {
	a.checked.Store(now.UnixNano())
	a.mu.Lock()
	close(a.confirmed)
	a.confirmed = make(chan struct{})
	a.mu.Unlock()
}

// waitConfirmed returns once the copy was confirmed within fresh, asking
// the loop for a confirmation if it was not; Unavailable if none comes
// within maxWait or ctx.
func (a *authz) waitConfirmed(ctx context.Context) error {
	if a.clock.Since(time.Unix(0, a.checked.Load())) <= a.fresh {
		return nil // every call's path while calls come: no lock
	}
	var t clockwork.Timer
	for {
		a.mu.Lock()
		ch := a.confirmed // before the age: a confirmation after it closes ch
		a.mu.Unlock()
		age := a.clock.Since(time.Unix(0, a.checked.Load()))
		if age <= a.fresh {
			return nil
		}
		select {
		case a.kick <- struct{}{}:
		default:
		}
		if t == nil {
			t = a.clock.NewTimer(a.maxWait) // once: maxWait in all
			defer t.Stop()
		}
		select {
		case <-ch:
			continue
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-t.Chan():
		}
		return status.Errorf(codes.Unavailable, "understudy: the source cluster's permissions were last confirmed %v ago and no upstream confirmed them since; this replica checks no call with them", age.Round(time.Millisecond))
	}
}

// run refreshes the copy every interval while calls come, and whenever a
// call waits for it, until ctx ends: a replica nobody calls asks its
// upstream nothing. A replaced copy is retired: closed once the last check
// reading it is done (authView.acquire).
func (a *authz) run(ctx context.Context) {
	t := a.clock.NewTicker(a.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
			if !a.demand.Swap(false) {
				continue
			}
		case <-a.kick:
		}
		rctx, cancel := context.WithTimeout(ctx, a.interval+5*time.Second)
		old, err := a.refresh(rctx, a.clock.Now())
		cancel()
		if err != nil {
			a.failedAt.Store(a.clock.Now().UnixNano())
		} else {
			a.failedAt.Store(0)
		}
		old.retire()
		if err != nil && ctx.Err() == nil {
			a.lg.Warn("could not confirm the source's auth; keeping the copy", zap.Error(err))
		}
	}
}

// IssueAt is called before an Authenticate is forwarded; the function it
// returns records that the token the source then issued stands for user,
// as of the copy of the source's auth confirmed now (it waits for that,
// as a checked call does): so the next check does not find the copy
// moved since and the token older than it.
func (a *authz) IssueAt(ctx context.Context) (func(token, user string), error) {
	a.demand.Store(true)
	if v := a.view.Load(); v != nil && v.enabled {
		if err := a.waitConfirmed(ctx); err != nil {
			return nil, err
		}
	}
	v := a.view.Load()
	return func(token, user string) {
		if v == nil || !v.enabled || token == "" {
			return
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		if len(a.tokens) >= maxTokens {
			clear(a.tokens)
		}
		// As of the copy confirmed before the Authenticate: if the
		// source's auth moved meanwhile, the token is checked with the
		// source at its next use.
		a.tokens[token] = issued{user: user, rev: v.rev, used: a.clock.Now().UnixNano()}
	}, nil
}

// On reports whether the source's auth is on, by a copy confirmed within
// fresh. A copy with auth off is confirmed too, after a quiet spell: the
// source may have turned auth on meanwhile (the first calls after one were
// served to anyone until the next refresh). But while no upstream answers
// (a refresh failed within fresh, or none confirms within maxWait), a
// source with auth off is taken as off, so that weak reads outlive an
// upstream's outage (docs/cascaded.md: the known limit). It fails only with
// ctx.
func (a *authz) On(ctx context.Context) (bool, error) {
	a.demand.Store(true)
	if v := a.view.Load(); v == nil || v.enabled {
		return true, nil
	}
	if failed := a.failedAt.Load(); failed == 0 || a.clock.Since(time.Unix(0, failed)) > a.fresh {
		if err := a.waitConfirmed(ctx); err != nil && ctx.Err() != nil {
			return false, err
		}
	}
	v := a.view.Load()
	return v == nil || v.enabled, nil
}

// Permit runs check, one of etcd's auth checks, for ctx's caller on the
// copy of the source's auth, confirmed within fresh (it waits for that);
// with the source's auth off (On), it permits all.
func (a *authz) Permit(ctx context.Context, check func(auth.AuthStore, *auth.AuthInfo) error) error {
	if on, err := a.On(ctx); err != nil || !on {
		return err
	}
	if err := a.waitConfirmed(ctx); err != nil {
		return err
	}
	if err := a.waitRevision(ctx, requiredRevision(ctx)); err != nil {
		return err
	}
	v := a.acquire()
	if v == nil {
		return status.Error(codes.Unavailable, "understudy: the copy of the source's auth is closed (the replica is stopping)")
	}
	defer v.release()
	if !v.enabled {
		return nil
	}
	ai, err := a.caller(ctx, v)
	if err != nil {
		return err
	}
	return check(v.as, ai)
}

// requiredRevision is the least auth revision the caller requires of the
// copy (wire.AuthRevisionKey): 0 for none.
func requiredRevision(ctx context.Context) uint64 {
	vs := metadata.ValueFromIncomingContext(ctx, wire.AuthRevisionKey)
	if len(vs) == 0 {
		return 0
	}
	rev, err := strconv.ParseUint(vs[0], 10, 64)
	if err != nil {
		return 0
	}
	return rev
}

// waitRevision returns once the copy is at auth revision rev or later,
// asking the loop for a refresh; Unavailable if it is not within maxWait
// or ctx.
func (a *authz) waitRevision(ctx context.Context, rev uint64) error {
	var t clockwork.Timer
	for {
		a.mu.Lock()
		ch := a.confirmed
		a.mu.Unlock()
		if v := a.view.Load(); v == nil || v.rev >= rev {
			return nil
		}
		select {
		case a.kick <- struct{}{}:
		default:
		}
		if t == nil {
			t = a.clock.NewTimer(a.maxWait)
			defer t.Stop()
		}
		select {
		case <-ch:
			continue
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-t.Chan():
		}
		return status.Errorf(codes.Unavailable, "understudy: the caller needs the source's auth at revision %d or later; this replica's copy is older and no upstream gave a newer one within %v", rev, a.maxWait)
	}
}

// acquire is the copy in use, held until release (a copy replaced
// meanwhile is closed after); nil once the last copy is closed.
func (a *authz) acquire() *authView {
	for {
		v := a.view.Load()
		if v == nil || v.acquire() {
			return v
		}
		if a.view.Load() == v {
			return nil // closed and not replaced: the store is closed
		}
	}
}

// caller is who ctx's call is from: its token's user, else its client
// certificate's common name (as etcd with --client-cert-auth), else
// no one (etcd's checks then say ErrUserEmpty).
func (a *authz) caller(ctx context.Context, v *authView) (*auth.AuthInfo, error) {
	ts := metadata.ValueFromIncomingContext(ctx, rpctypes.TokenFieldNameGRPC)
	if len(ts) == 0 {
		ts = metadata.ValueFromIncomingContext(ctx, rpctypes.TokenFieldNameSwagger) // the JSON gateway's
	}
	if len(ts) > 0 {
		now := a.clock.Now().UnixNano()
		a.mu.Lock()
		i, ok := a.tokens[ts[0]]
		if ok && now-i.used > int64(tokenTTL) {
			delete(a.tokens, ts[0])
			ok = false
		} else if ok {
			i.used = now
			a.tokens[ts[0]] = i
		}
		a.mu.Unlock()
		if !ok {
			return nil, auth.ErrInvalidAuthToken
		}
		if i.rev != v.rev {
			if err := a.recheck(ctx, ts[0], v.rev); err != nil {
				return nil, err
			}
		}
		return &auth.AuthInfo{Username: i.user, Revision: v.as.Revision()}, nil
	}
	if ai := v.as.AuthInfoFromTLS(ctx); ai != nil {
		return ai, nil
	}
	return &auth.AuthInfo{}, nil
}

// authCopyTimeout bounds the first copy of the source's auth (a read of
// every user and role).
const authCopyTimeout = time.Minute

// recheck asks the source whether token, recorded as of an older copy of
// its auth (the auth changed since it was issued), still stands: a read
// with it, linearizable, to an upstream (a learner replica checks it with
// the cluster's own auth store, as of now). A token the source no longer
// takes (its user's password changed, the user deleted; a JWT older than
// the change) is refused as the source refuses it, and forgotten; one it
// takes (the change did not touch its user) is recorded as of rev. A
// permission denied is the read's, not the token's: the token stands.
func (a *authz) recheck(ctx context.Context, token string, rev uint64) error {
	if a.checkToken == nil {
		return auth.ErrInvalidAuthToken
	}
	// A client's calls after a change come at once: they ask once (one
	// that comes as the answer is recorded finds it). The
	// question is no one caller's (it runs within maxWait, whatever the
	// first caller's deadline); each caller waits for it as long as its
	// own call may, and is told its own deadline passed, not the source's.
	ch := a.rechecks.DoChan(token+"@"+strconv.FormatUint(rev, 10), func() (any, error) {
		a.mu.Lock()
		cur, ok := a.tokens[token]
		a.mu.Unlock()
		switch {
		case !ok:
			return nil, auth.ErrInvalidAuthToken // refused by a question just answered
		case cur.rev >= rev:
			return nil, nil // taken by a question just answered
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.maxWait)
		defer cancel()
		return nil, a.rechecked(token, rev, a.checkToken(rctx, rev))
	})
	a.waiting.Add(1)
	defer a.waiting.Add(-1)
	select {
	case r := <-ch:
		return r.Err
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}

// rechecked records the source's answer err about token as of rev, and
// says what the call is told.
func (a *authz) rechecked(token string, rev uint64, err error) error {
	switch {
	case err == nil, errors.Is(rpctypes.Error(err), rpctypes.ErrPermissionDenied):
		a.mu.Lock()
		if cur, ok := a.tokens[token]; ok {
			cur.rev = max(cur.rev, rev)
			a.tokens[token] = cur
		}
		a.mu.Unlock()
		return nil
	case errors.Is(rpctypes.Error(err), rpctypes.ErrInvalidAuthToken), errors.Is(rpctypes.Error(err), rpctypes.ErrAuthOldRevision):
		a.mu.Lock()
		delete(a.tokens, token)
		a.mu.Unlock()
		if errors.Is(rpctypes.Error(err), rpctypes.ErrAuthOldRevision) {
			return auth.ErrAuthOldRevision
		}
		return auth.ErrInvalidAuthToken
	}
	return status.Errorf(codes.Unavailable, "understudy: the source's auth changed since the caller's token was issued, and no upstream said within %v whether it still stands: %v", a.maxWait, err)
}

// copyAuth makes the store's first copy of the source's auth. A source
// with auth on needs a replica user of the root role (ErrAuth).
func (s *Store) copyAuth(ctx context.Context) error {
	s.auth = newAuthz(s.lg, s.clock, s.cfg.Dir, s.all, s.cfg.AuthRefreshInterval, s.m.authCopies)
	s.auth.checkToken = func(ctx context.Context, rev uint64) error {
		// The forwarding client sends the caller's token, never the
		// replica's user; a cascaded upstream checks it with a copy of the
		// source's auth at rev at least (not an older one, which would
		// still take a token the change ended).
		ctx = metadata.AppendToOutgoingContext(ctx, wire.AuthRevisionKey, strconv.FormatUint(rev, 10))
		_, err := s.forward.Get(ctx, probeKey, clientv3.WithCountOnly())
		return err
	}
	if err := os.MkdirAll(s.cfg.Dir, 0o700); err != nil {
		return fmt.Errorf("cascade: %w", err)
	}
	old, _ := filepath.Glob(filepath.Join(s.cfg.Dir, "auth-*.db"))
	for _, f := range old {
		_ = os.Remove(f)
	}
	sctx, cancel := context.WithTimeout(ctx, authCopyTimeout)
	defer cancel()
	_, err := s.auth.sync(sctx, s.clock.Now())
	if err != nil && isAuthError(err) {
		return fmt.Errorf("%w: %v", ErrAuth, err)
	}
	return err
}

// isAuthError tells whether err is etcd's refusal of a user.
func isAuthError(err error) bool {
	for _, e := range []error{rpctypes.ErrUserEmpty, rpctypes.ErrPermissionDenied, rpctypes.ErrAuthFailed, rpctypes.ErrInvalidAuthToken, rpctypes.ErrUserNotFound} {
		if errors.Is(rpctypes.Error(err), e) || errors.Is(err, e) {
			return true
		}
	}
	return false
}

func newAuthz(lg *zap.Logger, clock clockwork.Clock, dir string, cli *clientv3.Client, interval time.Duration, copies prometheus.Counter) *authz {
	return &authz{lg: lg, clock: clock, dir: dir, cli: cli, interval: interval, fresh: 2 * interval, maxWait: 5 * time.Second,
		kick: make(chan struct{}, 1), confirmed: make(chan struct{}), copies: copies, tokens: map[string]issued{}}
}

// IssueAt is called before the front forwards an Authenticate; the
// function it returns records the token the source issued (authz.IssueAt).
func (s *Store) IssueAt(ctx context.Context) (func(token, user string), error) {
	return s.auth.IssueAt(ctx)
}

// Permit runs check, one of etcd's auth checks, for ctx's caller as the
// source's auth stands (its copy here); with the source's auth off, it
// permits everything.
func (s *Store) Permit(ctx context.Context, check func(auth.AuthStore, *auth.AuthInfo) error) error {
	return s.auth.Permit(ctx, check)
}
