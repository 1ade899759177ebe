package readpath

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"

	gw "github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/tmc/grpc-websocket-proxy/wsproxy"
	etcdservergw "go.etcd.io/etcd/api/v3/etcdserverpb/gw"
	"go.etcd.io/etcd/server/v3/etcdserver"
	"go.etcd.io/etcd/server/v3/etcdserver/api/etcdhttp"
	v3electiongw "go.etcd.io/etcd/server/v3/etcdserver/api/v3election/v3electionpb/gw"
	v3lockgw "go.etcd.io/etcd/server/v3/etcdserver/api/v3lock/v3lockpb/gw"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/understudy-kv/understudy/wire"
)

// The HTTP half of a replica's client URL is what etcd's embed serves on a
// voter's (server/v3/embed/serve.go), built from the same parts: the
// grpc-gateway JSON API under /v3/ (streams over websockets), /version,
// /metrics, and /health and /livez from etcdhttp. Only /readyz differs:
// etcd's fails every learner, so the replica's has checks of its own (see
// readiness).

// gateway is the JSON API: etcd's generated gateway handlers, dialing the
// front's own gRPC server in memory, so every JSON request takes the same
// path, read modes and checks as a gRPC one.
type gateway struct {
	mux  *gw.ServeMux
	conn *grpc.ClientConn
	mem  *bufconn.Listener
}

// newGateway builds the gateway on gs; serve serves gs to it.
func newGateway(ctx context.Context, gs *grpc.Server) (*gateway, error) {
	mem := bufconn.Listen(1 << 20)
	conn, err := grpc.NewClient("passthrough:///replica-front",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return mem.DialContext(ctx) }),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1<<31-1)))
	if err != nil {
		_ = mem.Close()
		return nil, fmt.Errorf("readpath: gateway connection: %w", err)
	}
	// etcd's gateway options (embed's registerGateway).
	mux := gw.NewServeMux(gw.WithMarshalerOption(gw.MIMEWildcard, &gw.HTTPBodyMarshaler{
		Marshaler: &gw.JSONPb{
			MarshalOptions:   protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: false},
			UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: true},
		},
	}), gw.WithIncomingHeaderMatcher(requestKeys))
	for _, register := range []func(context.Context, *gw.ServeMux, *grpc.ClientConn) error{
		etcdservergw.RegisterKVHandler,
		etcdservergw.RegisterWatchHandler,
		etcdservergw.RegisterLeaseHandler,
		etcdservergw.RegisterClusterHandler,
		etcdservergw.RegisterMaintenanceHandler,
		etcdservergw.RegisterAuthHandler,
		v3lockgw.RegisterLockHandler,
		v3electiongw.RegisterElectionHandler,
	} {
		if err := register(ctx, mux, conn); err != nil {
			_ = conn.Close()
			_ = mem.Close()
			return nil, fmt.Errorf("readpath: gateway: %w", err)
		}
	}
	return &gateway{mux: mux, conn: conn, mem: mem}, nil
}

// serve serves gs on the gateway's in-memory listener until gs stops or
// close closes the listener.
func (g *gateway) serve(gs *grpc.Server) { _ = gs.Serve(g.mem) }

func (g *gateway) close() {
	_ = g.conn.Close()
	_ = g.mem.Close()
}

// handler serves the gateway as etcd does: streams over websockets, POST
// for every stream request.
func (g *gateway) handler(lg *zap.Logger) http.Handler {
	return wsproxy.WebsocketProxy(g.mux,
		wsproxy.WithRequestMutator(func(_ *http.Request, outgoing *http.Request) *http.Request {
			outgoing.Method = http.MethodPost
			return outgoing
		}),
		wsproxy.WithMaxRespBodyBufferSize(0x7fffffff),
		wsproxy.WithLogger(wsLogger{lg}),
	)
}

type wsLogger struct{ *zap.Logger }

func (w wsLogger) Warnln(i ...any)  { w.Warn(fmt.Sprint(i...)) }
func (w wsLogger) Debugln(i ...any) { w.Debug(fmt.Sprint(i...)) }

// clientMux is everything a voter's client URL serves over HTTP.
func clientMux(lg *zap.Logger, s *etcdserver.EtcdServer, g *gateway, ready *readiness) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/v3/", g.handler(lg))
	etcdhttp.HandleVersion(mux, s)
	etcdhttp.HandleMetrics(mux)
	healthHandlers(lg, mux, s, ready)
	return mux
}

// metricsMux is what etcd serves on --listen-metrics-urls.
func metricsMux(lg *zap.Logger, s *etcdserver.EtcdServer, ready *readiness) *http.ServeMux {
	mux := http.NewServeMux()
	etcdhttp.HandleMetrics(mux)
	healthHandlers(lg, mux, s, ready)
	return mux
}

// healthHandlers installs etcd's /health and /livez as they are, and the
// replica's /readyz, which runs etcd's readyz checks too (all but
// non_learner) beside its own.
func healthHandlers(lg *zap.Logger, mux *http.ServeMux, s *etcdserver.EtcdServer, ready *readiness) {
	etcdMux := http.NewServeMux()
	etcdhttp.HandleHealth(lg, etcdMux, s)
	mux.Handle(etcdhttp.PathHealth, etcdMux)
	mux.Handle("/livez", etcdMux)
	mux.Handle("/livez/", etcdMux)
	h := ready.handler(etcdMux)
	mux.Handle("/readyz", h)
	mux.Handle("/readyz/", h)
}

// accessController is etcd's (embed's createAccessController): the
// /v3beta/ alias, the host allow-list against DNS rebinding on plain HTTP,
// and CORS.
type accessController struct {
	lg  *zap.Logger
	s   *etcdserver.EtcdServer
	mux http.Handler
}

func (ac *accessController) ServeHTTP(rw http.ResponseWriter, req *http.Request) {
	if strings.HasPrefix(req.URL.Path, "/v3beta/") {
		req.URL.Path = strings.Replace(req.URL.Path, "/v3beta/", "/v3/", 1)
	}
	if req.TLS == nil {
		host := req.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if !ac.s.AccessController.IsHostWhitelisted(host) {
			ac.lg.Warn("rejecting HTTP request to prevent DNS rebinding attacks", zap.String("host", host))
			http.Error(rw, fmt.Sprintf("etcd received your request, but the Host header %q was unrecognized (--host-whitelist)", host), http.StatusMisdirectedRequest)
			return
		}
	}
	if ac.s.AccessController.OriginAllowed("*") {
		addCORSHeader(rw, "*")
	} else if origin := req.Header.Get("Origin"); ac.s.OriginAllowed(origin) {
		addCORSHeader(rw, origin)
	}
	if req.Method == http.MethodOptions {
		rw.WriteHeader(http.StatusOK)
		return
	}
	ac.mux.ServeHTTP(rw, req)
}

func addCORSHeader(w http.ResponseWriter, origin string) {
	w.Header().Add("Access-Control-Allow-Methods", "POST, GET, OPTIONS, PUT, DELETE")
	w.Header().Add("Access-Control-Allow-Origin", origin)
	w.Header().Add("Access-Control-Allow-Headers", "accept, content-type, authorization")
}

// grpcHandlerFunc sends gRPC requests to gs and the rest to other, for TLS
// listeners, where the protocols cannot be told apart before the handshake
// (etcd's embed does the same).
func grpcHandlerFunc(gs *grpc.Server, other http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 2 && strings.Contains(r.Header.Get("Content-Type"), "application/grpc") {
			gs.ServeHTTP(w, r)
			return
		}
		other.ServeHTTP(w, r)
	})
}

// requestKeys is the gateway's incoming header matcher: grpc-gateway's
// (Grpc-Metadata-* and the permanent HTTP headers), and understudy's own
// request keys as plain HTTP headers (Understudy-Freshness,
// Understudy-Max-Staleness), which a curl user would rather type.
func requestKeys(key string) (string, bool) {
	switch k := strings.ToLower(key); k {
	case wire.FreshnessKey, wire.MaxStalenessKey:
		return k, true
	}
	return gw.DefaultHeaderMatcher(key)
}
