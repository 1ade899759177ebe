package readpath

import (
	"context"

	"github.com/jonboulle/clockwork"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/etcdserver"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3election/v3electionpb"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3lock/v3lockpb"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/understudy-kv/understudy/readindex"
)

// Source is what the front serves: a store it reads and watches, and what
// the front needs of it beside — declared here, where it is used, as
// etcd's read package declares the server it needs. The front owns the
// read modes, the answer headers, require-leader, readiness and the HTTP
// surface; a source says how its store is proved fresh, and gives the
// services that are not reads and watches. A learner replica's member
// (Member) and a store copied from another replica's watch are its two
// kinds.
type Source interface {
	// Server is the etcd server whose mvcc store the front reads and
	// watches, and whose limits (request size, streams, request timeout)
	// the front keeps.
	Server() *etcdserver.EtcdServer
	// Rounds is the store as the ReadIndex machinery needs it.
	Rounds() readindex.Source
	// Services builds, once, what the front serves beside its reads and
	// watches, on h.
	Services(h Host) (Services, error)
	// Progress is how far the store has applied, and how far what it
	// copies has committed (/readyz's caught_up compares them, in the
	// same unit: raft entries, or revisions).
	Progress() (applied, committed uint64)
}

// Host is what the front gives a source to build its services on.
type Host struct {
	// Ctx ends when the front stops: goroutines a service starts end with
	// it (and close their Services.Done).
	Ctx    context.Context
	Logger *zap.Logger
	Clock  clockwork.Clock
	// ReadMode makes ctx's read as fresh as its mode asks (strong: after
	// a round that began after the call; bounded: within its bound), as
	// the front's KV does before a local read.
	ReadMode func(ctx context.Context, bounded bool) error
}

// Services is what a source serves through the front.
type Services struct {
	// KV serves the writes, and the local reads the front's read modes
	// have made fresh enough (the front's KV wraps it).
	KV pb.KVServer
	// WatchStream, if set, wraps each watch stream before the store's
	// watch server sees it (a check that server does not make).
	WatchStream func(pb.Watch_WatchServer) pb.Watch_WatchServer
	Lease       pb.LeaseServer
	Cluster     pb.ClusterServer
	Auth        pb.AuthServer
	Maintenance pb.MaintenanceServer
	Lock        v3lockpb.LockServer
	Election    v3electionpb.ElectionServer
	// Unary and Stream run before the front's own interceptors.
	Unary  []grpc.UnaryServerInterceptor
	Stream []grpc.StreamServerInterceptor
	// Chain names the replica and what it copies from, first the replica
	// (a probe's wire.UpstreamChainKey).
	Chain func() []string
	// Ready are the source's own readiness checks beside the front's, by
	// name (/readyz lists them as etcd lists its own).
	Ready map[string]func() error
	// ProvesFreshness: etcd's linearizable_read readiness check on
	// Server is a round that proves the store fresh (a learner's member:
	// a ReadIndex through the leader). Not so for a private store.
	ProvesFreshness bool
	// ServesHubs: the front answers --read-index-via askers with the
	// member's raft index (a learner's member only).
	ServesHubs bool
	// Done are closed once the goroutines the services started (until
	// Host.Ctx ends) have ended; Close, if set, is called once the front
	// has stopped serving them.
	Done  []<-chan struct{}
	Close func()
}
