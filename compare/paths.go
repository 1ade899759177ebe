package compare

import "errors"

// ErrPrefixInUse is returned when the prefix to measure under already
// holds keys: compare writes only under a prefix it owns, and deletes it
// afterwards.
var ErrPrefixInUse = errors.New("compare: the prefix already holds keys; pick a fresh --prefix (compare deletes everything under it when done)")

// Path is one way of reading the prefix.
type Path string

const (
	PathLeader         Path = "leader"          // linearizable reads through the voters
	PathReplicaStrong  Path = "replica-strong"  // etcd's default read, on the replica
	PathReplicaWeak    Path = "replica-weak"    // serializable, on the replica
	PathReplicaBounded Path = "replica-bounded" // serializable with understudy-max-staleness
	PathCascadedStrong Path = "cascaded-strong" // etcd's default read, on a cascaded replica fed by the replica
	PathCascadedWeak   Path = "cascaded-weak"   // serializable, on the cascaded replica
	PathMirror         Path = "mirror"          // serializable, on the mirror's destination
)

// Paths lists every read path, in report order. A run against existing
// clusters reads the cascaded paths only when it is given one (--cascaded).
var Paths = []Path{PathLeader, PathReplicaStrong, PathReplicaWeak, PathReplicaBounded, PathCascadedStrong, PathCascadedWeak, PathMirror}

// Cascaded reports the paths through a cascaded replica.
func (p Path) Cascaded() bool { return p == PathCascadedStrong || p == PathCascadedWeak }

// Replica reports the paths through a replica, learner or cascaded: those
// whose answers carry a staleness bound.
func (p Path) Replica() bool {
	return p == PathReplicaStrong || p == PathReplicaWeak || p == PathReplicaBounded || p.Cascaded()
}
