// Package wire names what understudy adds to etcd's gRPC protocol: a few
// metadata keys that replicas understand and clients may send. It has no
// dependencies, so that client code (the balancer) need not link etcd's
// server to speak to a replica.
package wire

const (
	// MaxStalenessKey is the request metadata key that bounds the staleness
	// of a serializable read on a replica: a Go duration such as "100ms".
	// It overrides the replica's --max-staleness. Strong reads ignore it.
	MaxStalenessKey = "understudy-max-staleness"

	// ProbeKey, in request metadata with any value, asks a replica to
	// describe itself in the response header (ZoneKey). Balancers send it
	// on their health probes only, so that ordinary responses stay small.
	ProbeKey = "understudy-probe"

	// ZoneKey is the response header key under which a replica started
	// with --zone names its zone, in answer to a request carrying ProbeKey.
	ZoneKey = "understudy-zone"

	// FreshnessAgeKey is the response header key under which a replica
	// tells how stale its store may be (a Go duration: the time since the
	// start of its last completed ReadIndex round), in answer to a request
	// carrying ProbeKey. It also proves when the replica last heard from
	// the leader (but a quiet replica's rounds are far apart: see
	// LeaderContactAgeKey).
	FreshnessAgeKey = "understudy-freshness-age"

	// LeaderContactAgeKey is the response header key under which a replica
	// tells how long ago it last heard from its leader (a Go duration; by
	// raft's own traffic or its own ReadIndex rounds), in answer to a
	// request carrying ProbeKey; absent while it knows no leader.
	LeaderContactAgeKey = "understudy-leader-contact-age"

	// BackgroundKey, in request metadata with any value, marks a request a
	// replica makes for its own upkeep, not for a client: a cascaded
	// replica's background freshness rounds, its compaction and lease
	// checks. The replica asked serves it as any other, but it does not
	// count as client demand: it does not wake a quiet replica's rounds
	// (--freshness-quiet-interval), which cascaded replicas that are
	// themselves quiet would otherwise keep from ever going quiet.
	BackgroundKey = "understudy-background"

	// ReplicasTarget is where cascaded replicas announce themselves in the
	// source cluster, unless told another prefix (replica
	// --resolver-prefix): keys ReplicasTarget/<name> in the format of
	// etcd's naming package (endpoints.Manager), on a lease. Balancers
	// discover them there (they are in no member list).
	ReplicasTarget = "\x00understudy/replicas"

	// AuthRevisionKey, in request metadata, is the least auth revision of
	// the source (decimal) a cascaded replica's copy of its users and roles
	// must have to check the request: a cascaded replica below, asking
	// whether a token still stands after an auth change, sends the
	// revision it saw, so that the copy it asks is not older than its own.
	AuthRevisionKey = "understudy-auth-revision"

	// UpstreamChainKey is the response header key under which a replica
	// names itself and what it copies from, in answer to a request carrying
	// ProbeKey: comma-separated IDs, its own first, then its upstream's
	// chain (a cascaded replica's). A learner replica's ID is its member ID
	// (hex); a cascaded replica's, which has no member, is its first
	// advertised client URL (--advertise-client-urls): unique per replica
	// and the same after a restart. A cascaded replica refuses an upstream
	// whose chain holds its own ID: a cycle.
	UpstreamChainKey = "understudy-upstream-chain"

	// NameKey is the response header key under which a replica tells its
	// --name, in answer to a request carrying ProbeKey: how `replica status
	// --cascaded` names a cascaded replica, which is in no member list.
	NameKey = "understudy-name"

	// CompactionKey is the response header key under which a learner
	// replica tells the auto-compaction it would run once promoted and
	// leading, and where that comes from ("learned periodic 5m0s: …",
	// "flags revision 1000", "learning: …"; see package autocompact), in
	// answer to a request carrying ProbeKey. `replica status` shows it.
	CompactionKey = "understudy-compaction"

	// RoleStateKey is the response header key under which a replica with
	// --role standby or voter tells what its role loop is doing, and why
	// ("waiting: hold 3.1s of 5s", "blocked: ..."), in answer to a request
	// carrying ProbeKey. `replica status` shows it.
	RoleStateKey = "understudy-role-state"

	// FreshnessKey, in request metadata with any value, asks a replica for
	// the answer keys below on that answer, or on that stream (a Watch, a
	// RangeStream). A replica answers with them only when asked (its
	// default, --freshness-headers=on-request), always, or never (off): the
	// four keys cost a weak read about a tenth of its throughput, and a
	// client that does not read them should not pay for them. A request
	// carrying ProbeKey asks for them too. Through the JSON gateway the
	// request header Understudy-Freshness (or
	// Grpc-Metadata-Understudy-Freshness) asks.
	FreshnessKey = "understudy-freshness"

	// The answer keys below are in the response header of every Range,
	// Txn, RangeStream, Put, DeleteRange and Compact a replica serves, and
	// in the header of every Watch stream (sent when the stream opens,
	// before its first response), when the request asked (FreshnessKey,
	// ProbeKey) or the replica runs with --freshness-headers=always.
	// Through a replica's JSON gateway (/v3/...) they are HTTP
	// response headers named with grpc-gateway's prefix, canonicalised:
	// Grpc-Metadata-Understudy-Read-Mode, Grpc-Metadata-Understudy-Staleness-Bound,
	// Grpc-Metadata-Understudy-Known-Leader and
	// Grpc-Metadata-Understudy-Applied-Revision. A JSON client sends
	// MaxStalenessKey as the request header Grpc-Metadata-Understudy-Max-Staleness.

	// ReadModeKey tells how the replica served the request: ReadModeStrong,
	// ReadModeWeak, ReadModeBounded or ReadModeForwarded.
	ReadModeKey = "understudy-read-mode"

	// StalenessBoundKey is the staleness the replica can prove for the
	// answer, a Go duration: how much older than the moment it served the
	// read (after any wait for a round) the state it served may be — it
	// holds every write acknowledged before that moment minus the bound. It
	// is the time since the start of its last completed ReadIndex round
	// (FreshnessAgeKey) for weak and bounded reads and watches, rounded up
	// to the millisecond below 10ms and above that to 1, 1.2, 1.5, 2, 2.5,
	// 3, 4, 5, 6 or 8 times a power of ten milliseconds (at most a third
	// more, and few distinct values, which HTTP/2 header compression sends
	// as indexes); "0s" for strong reads and forwarded writes (both are
	// linearizable: the store held every write acknowledged before the
	// request arrived). A replica that has never completed a round says
	// "2562047h47m16.854775807s" (the largest duration).
	StalenessBoundKey = "understudy-staleness-bound"

	// KnownLeaderKey is "true" while the replica knows a leader it has heard
	// from within two election timeouts (the test etcd's require-leader
	// check applies), else "false": then weak reads and watches still come
	// from its store, and StalenessBoundKey grows.
	KnownLeaderKey = "understudy-known-leader"

	// AppliedRevisionKey is the replica store's revision when it answered
	// (decimal): every revision up to it is applied here.
	AppliedRevisionKey = "understudy-applied-revision"
)

// Values of ReadModeKey.
const (
	// ReadModeStrong: a linearizable read (a ReadIndex round that started
	// after the request arrived, applied here).
	ReadModeStrong = "strong"
	// ReadModeWeak: a serializable read from the store as it was, with no
	// bound; also every watch.
	ReadModeWeak = "weak"
	// ReadModeBounded: a serializable read served only once the replica was
	// known fresh within the request's bound (MaxStalenessKey) or its
	// --max-staleness.
	ReadModeBounded = "bounded"
	// ReadModeForwarded: a write (Put, DeleteRange, Txn with a write,
	// Compact) forwarded through raft to the leader and applied here
	// before the answer.
	ReadModeForwarded = "forwarded"
)

// Values of a replica's --freshness-headers: when its answers carry the
// answer keys (ReadModeKey, StalenessBoundKey, KnownLeaderKey,
// AppliedRevisionKey).
const (
	// HeadersOnRequest: when the request carries FreshnessKey or ProbeKey.
	HeadersOnRequest = "on-request"
	// HeadersAlways: on every answer.
	HeadersAlways = "always"
	// HeadersOff: never.
	HeadersOff = "off"
)
