package source

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/auth"
	"go.etcd.io/etcd/server/v3/etcdserver/apply"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/understudy-kv/understudy/readpath"
)

// A cascaded replica's store runs with auth off: every call the front
// serves from it is checked here, with etcd's own checks, against the
// copy of the source's auth (cascade.Store.Permit), where etcd's servers would
// check it (v3rpc's authMaintenanceServer and watch server, the
// applier's range and txn checks). What is forwarded is the upstream's to
// check, with the caller's own token.

// Permit runs one of etcd's auth checks for a call's caller.
type Permit func(ctx context.Context, check func(auth.AuthStore, *auth.AuthInfo) error) error

func (p Permit) check(ctx context.Context, check func(auth.AuthStore, *auth.AuthInfo) error) error {
	return readpath.AuthError(p(ctx, check))
}

func (p Permit) rangeOK(ctx context.Context, key, end []byte) error {
	return p.check(ctx, func(as auth.AuthStore, ai *auth.AuthInfo) error { return as.IsRangePermitted(ai, key, end) })
}

func (p Permit) txnOK(ctx context.Context, r *pb.TxnRequest) error {
	// A read-only txn puts nothing: the lessor (for puts' leases) is not
	// reached.
	return p.check(ctx, func(as auth.AuthStore, ai *auth.AuthInfo) error { return apply.CheckTxnAuth(as, ai, nil, r) })
}

func (p Permit) adminOK(ctx context.Context) error {
	return p.check(ctx, func(as auth.AuthStore, ai *auth.AuthInfo) error { return as.IsAdminPermitted(ai) })
}

// userOK is etcd's requireAuthInfo: any authenticated caller.
func (p Permit) userOK(ctx context.Context) error {
	return p.check(ctx, func(_ auth.AuthStore, ai *auth.AuthInfo) error {
		if ai.Username == "" {
			return auth.ErrUserEmpty
		}
		return nil
	})
}

// permittedWatch refuses a watch its caller may not read, as etcd's watch
// server does (a created-and-canceled response naming the reason), before
// the store's watch server sees it. Sends are serialised: the refusal is
// sent from the receiving goroutine.
type permittedWatch struct {
	pb.Watch_WatchServer
	permit Permit
	rev    func() int64
	ended  *endedTokens
	mu     sync.Mutex
}

// endedTokens are the tokens a watch stream was ended for lately (an
// unknown token: the client authenticates again on its next stream). A
// token it happens to again within endedWindow (a fixed token never
// issued here, a client that authenticates elsewhere) is refused as etcd
// refuses it instead: the stream is not ended for ever, every 100 ms.
type endedTokens struct {
	mu    sync.Mutex
	clock clockwork.Clock
	at    map[string]time.Time
}

// endedWindow is how long a token's stream ending counts.
const endedWindow = 10 * time.Second

// first records an ending for token now, and reports whether it is the
// first within endedWindow.
func (e *endedTokens) first(token string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.clock.Now()
	if at, ok := e.at[token]; ok && now.Sub(at) < endedWindow {
		return false
	}
	if len(e.at) >= 4096 {
		clear(e.at)
	}
	e.at[token] = now
	return true
}

func (w *permittedWatch) Recv() (*pb.WatchRequest, error) {
	for {
		req, err := w.Watch_WatchServer.Recv()
		if err != nil {
			return nil, err
		}
		cr := req.GetCreateRequest()
		if cr == nil {
			return req, nil
		}
		key := cr.Key
		if len(key) == 0 {
			key = []byte{0} // as etcd's watch server, before its check
		}
		err = w.permit.rangeOK(w.Context(), key, cr.RangeEnd)
		if err == nil {
			return req, nil
		}
		if c := status.Code(err); c == codes.Unavailable || c == codes.Canceled || c == codes.DeadlineExceeded {
			// The source's permissions could not be confirmed: not a
			// refusal (clients give up a refused watch); the stream ends
			// and the client opens it again.
			return nil, err
		}
		if errors.Is(err, rpctypes.ErrGRPCInvalidAuthToken) && w.ended.first(streamToken(w.Context())) {
			// A token this replica did not see issued (or one the source
			// no longer takes): etcd's clients authenticate for each
			// stream they open (clientv3's stream interceptor), not for a
			// watch refused on one. The stream ends, Unavailable, and the
			// client opens another (after its backoff) with a new token.
			return nil, status.Error(codes.Unavailable, "understudy: this cascaded replica does not take the stream's auth token (issued through another endpoint, or no longer valid at the source): open the stream again, authenticating through this replica")
		}
		resp := &pb.WatchResponse{Header: &pb.ResponseHeader{Revision: w.rev()}, WatchId: clientv3.InvalidWatchID,
			Created: true, Canceled: true, CancelReason: watchCancelReason(err)}
		if err := w.Send(resp); err != nil {
			return nil, err
		}
	}
}

func (w *permittedWatch) Send(resp *pb.WatchResponse) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.Watch_WatchServer.Send(resp)
}

// watchCancelReason is etcd's: its auth errors by name, anything else a
// permission denied.
func watchCancelReason(err error) string {
	for _, e := range []error{rpctypes.ErrGRPCInvalidAuthToken, rpctypes.ErrGRPCAuthOldRevision, rpctypes.ErrGRPCUserEmpty} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return rpctypes.ErrGRPCPermissionDenied.Error()
}

// cascadeAuth is the Auth service of a cascaded replica: the upstream's
// (grpc-proxy's), and the tokens the source issues through it recorded
// for the local checks (Cascade.Issued). AuthStatus carries the caller's
// read bound on (a cascaded replica below asks with one).
type cascadeAuth struct {
	pb.AuthServer
	up      pb.AuthClient
	issueAt func(ctx context.Context) (func(token, user string), error)
}

func (a *cascadeAuth) Authenticate(ctx context.Context, r *pb.AuthenticateRequest) (*pb.AuthenticateResponse, error) {
	issued, err := a.issueAt(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := a.up.Authenticate(forwardMD(ctx), r)
	if err == nil {
		issued(resp.Token, r.Name)
	}
	return resp, err
}

func (a *cascadeAuth) AuthStatus(ctx context.Context, r *pb.AuthStatusRequest) (*pb.AuthStatusResponse, error) {
	return a.up.AuthStatus(forwardMD(ctx), r)
}

// streamToken is a stream's token, as the client sent it ("" for none).
func streamToken(ctx context.Context) string {
	for _, key := range []string{rpctypes.TokenFieldNameGRPC, rpctypes.TokenFieldNameSwagger} {
		if ts := metadata.ValueFromIncomingContext(ctx, key); len(ts) > 0 {
			return ts[0]
		}
	}
	return ""
}
