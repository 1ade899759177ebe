package cascade

import (
	"context"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// What the front forwards goes to the upstreams as its caller: with the
// caller's token (from the gRPC "token", or the JSON gateway's
// "authorization", or grpc-proxy's context key), never the replica's own
// user. A client certificate the forwarding client must present (an
// upstream with --client-cert-auth) names a user on the source too: a call
// without a token would run as it, so with the source's auth on (by a copy
// confirmed as a checked call's is: authz.On) such a call is refused
// (ErrUserEmpty, as the source would refuse an anonymous one), but for the
// calls etcd does not check (unchecked).

// ForwardDialOptions are the forwarding client's interceptors.
func (s *Store) ForwardDialOptions() []grpc.DialOption {
	f := forwarder{clientCert: s.cfg.ClientCert, authOn: func(ctx context.Context) (bool, error) { return s.auth.On(ctx) }}
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(f.unary), grpc.WithChainStreamInterceptor(f.stream)}
}

type forwarder struct {
	clientCert bool
	authOn     func(context.Context) (bool, error)
}

// unchecked are the forwarded methods etcd runs without a user (an
// Authenticate is how a caller gets its token).
var unchecked = map[string]bool{
	"/etcdserverpb.Lease/LeaseKeepAlive": true,
	"/etcdserverpb.Auth/Authenticate":    true,
	"/etcdserverpb.Auth/AuthStatus":      true,
}

func (f forwarder) creds(ctx context.Context, method string) ([]grpc.CallOption, error) {
	if t := callerToken(ctx); t != "" {
		return []grpc.CallOption{grpc.PerRPCCredentials(tokenCred(t))}, nil
	}
	if f.clientCert && !unchecked[method] {
		on, err := f.authOn(ctx)
		if err != nil {
			return nil, err
		}
		if on {
			return nil, rpctypes.ErrGRPCUserEmpty
		}
	}
	return nil, nil
}

func (f forwarder) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	more, err := f.creds(ctx, method)
	if err != nil {
		return err
	}
	return invoker(ctx, method, req, reply, cc, append(opts, more...)...)
}

func (f forwarder) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	more, err := f.creds(ctx, method)
	if err != nil {
		return nil, err
	}
	return streamer(ctx, desc, cc, method, append(opts, more...)...)
}

// callerToken is the token of the call being forwarded.
func callerToken(ctx context.Context) string {
	for _, key := range []string{rpctypes.TokenFieldNameGRPC, rpctypes.TokenFieldNameSwagger} {
		if ts := metadata.ValueFromIncomingContext(ctx, key); len(ts) > 0 {
			return ts[0]
		}
	}
	if t, ok := ctx.Value(rpctypes.TokenFieldNameGRPCKey{}).(string); ok {
		return t
	}
	if md, ok := metadata.FromOutgoingContext(ctx); ok && len(md.Get(rpctypes.TokenFieldNameGRPC)) > 0 {
		return md.Get(rpctypes.TokenFieldNameGRPC)[0]
	}
	return ""
}

// tokenCred puts a token on a call.
type tokenCred string

func (t tokenCred) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{rpctypes.TokenFieldNameGRPC: string(t)}, nil
}

func (tokenCred) RequireTransportSecurity() bool { return false }

// Forwarder is the client the front forwards calls with: each with its
// caller's token.
func (s *Store) Forwarder() *clientv3.Client { return s.forward }

// ForwardLimits are the most bytes and operations a write the front
// forwards may have (Config.MaxRequestBytes and MaxTxnOps: etcd's
// defaults when 0).
func (s *Store) ForwardLimits() (maxBytes, maxOps int) {
	maxBytes, maxOps = embed.DefaultMaxRequestBytes, int(embed.DefaultMaxTxnOps)
	if s.cfg.MaxRequestBytes > 0 {
		maxBytes = int(s.cfg.MaxRequestBytes)
	}
	if s.cfg.MaxTxnOps > 0 {
		maxOps = int(s.cfg.MaxTxnOps)
	}
	return maxBytes, maxOps
}
