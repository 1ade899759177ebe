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
	// the leader.
	FreshnessAgeKey = "understudy-freshness-age"

	// RoleStateKey is the response header key under which a replica with
	// --role standby or voter tells what its role loop is doing, and why
	// ("waiting: hold 3.1s of 5s", "blocked: ..."), in answer to a request
	// carrying ProbeKey. `replica status` shows it.
	RoleStateKey = "understudy-role-state"
)
