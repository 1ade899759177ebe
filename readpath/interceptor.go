package readpath

import (
	"context"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/understudy-kv/understudy/wire"
)

// kvService is counted by kvServer itself, which knows the read mode.
const kvService = "etcdserverpb.KV"

// probeAnswer is what a replica tells a balancer's or `replica status`'s
// probe (a request carrying wire.ProbeKey), in response headers.
type probeAnswer struct {
	// name is the replica's --name (wire.NameKey).
	name      string
	zone      string
	roleState func() string
	// compaction tells the auto-compaction the replica would run as
	// leader (wire.CompactionKey); nil for a source that runs none.
	compaction func() string
	// freshness is the freshness age; contact, the time since the leader
	// was last heard from (false if never).
	freshness func() time.Duration
	contact   func() (time.Duration, bool)
	// chain names the replica and what it copies from
	// (wire.UpstreamChainKey).
	chain func() []string
}

// header is the probe's answer: best effort (a probe without it only loses
// affinity or freshness information).
func (p probeAnswer) header() metadata.MD {
	md := metadata.Pairs(wire.FreshnessAgeKey, p.freshness().String())
	if d, ok := p.contact(); ok {
		md.Set(wire.LeaderContactAgeKey, d.String())
	}
	if p.name != "" {
		md.Set(wire.NameKey, p.name)
	}
	if p.zone != "" {
		md.Set(wire.ZoneKey, p.zone)
	}
	if p.compaction != nil {
		if c := p.compaction(); c != "" {
			md.Set(wire.CompactionKey, c)
		}
	}
	if p.chain != nil {
		md.Set(wire.UpstreamChainKey, strings.Join(p.chain(), ","))
	}
	if p.roleState != nil {
		if st := p.roleState(); st != "" {
			md.Set(wire.RoleStateKey, st)
		}
	}
	return md
}

// unaryInterceptor counts requests (and tells touch of each, so that the
// freshness rounds keep their pace while clients come: see
// readindex.Freshness.Touch), answers probes, and, like etcd's own, refuses
// a request that requires a leader when the member knows none; so it does
// any request that would be a raft proposal (see proposes). It does not
// refuse learners: serving them is this package's point.
func unaryInterceptor(lw *leaderWatch, m *Metrics, probe probeAnswer, touch func()) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if !isBackground(ctx) {
			touch()
		}
		if isProbe(ctx) {
			_ = grpc.SetHeader(ctx, probe.header())
		}
		service, method := splitMethod(info.FullMethod)
		if service != kvService {
			m.requests.WithLabelValues(shortService(service), method, modeNone).Inc()
		}
		if (requiresLeader(ctx) || proposes(info.FullMethod, req)) && !lw.hasLeader() {
			return nil, rpctypes.ErrGRPCNoLeader
		}
		return handler(ctx, req)
	}
}

// streamInterceptor tells touch of each stream, refuses a require-leader
// stream with no leader, and hands the ones it lets through to lw, which
// ends them if the leader is lost for long (etcd's monitorLeader).
func streamInterceptor(lw *leaderWatch, m *Metrics, touch func()) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if !isBackground(ss.Context()) {
			touch()
		}
		service, method := splitMethod(info.FullMethod)
		m.requests.WithLabelValues(shortService(service), method, modeNone).Inc()
		if !requiresLeader(ss.Context()) {
			return handler(srv, ss)
		}
		if !lw.hasLeader() {
			return rpctypes.ErrGRPCNoLeader
		}
		guarded, release := lw.guard(ss)
		defer release()
		return handler(srv, guarded)
	}
}

// requiresLeader reports clientv3.WithRequireLeader, which lease keep-alives
// use so that a partitioned member does not keep a lease alive by itself.
func requiresLeader(ctx context.Context) bool {
	// ValueFromIncomingContext reads one key; FromIncomingContext would
	// copy the whole metadata on every request.
	ks := metadata.ValueFromIncomingContext(ctx, rpctypes.MetadataRequireLeaderKey)
	return len(ks) > 0 && ks[0] == rpctypes.MetadataHasLeader
}

// isBackground reports a replica's request for its own upkeep
// (wire.BackgroundKey), which is no client demand.
func isBackground(ctx context.Context) bool {
	return len(metadata.ValueFromIncomingContext(ctx, wire.BackgroundKey)) > 0
}

// isProbe reports a balancer's health probe, which wants the zone.
func isProbe(ctx context.Context) bool {
	return len(metadata.ValueFromIncomingContext(ctx, wire.ProbeKey)) > 0
}

// splitMethod splits "/etcdserverpb.KV/Range" into service and method.
func splitMethod(full string) (service, method string) {
	full = strings.TrimPrefix(full, "/")
	service, method, _ = strings.Cut(full, "/")
	return service, method
}

func shortService(service string) string {
	return strings.TrimPrefix(service, "etcdserverpb.")
}
