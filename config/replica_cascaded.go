package config

import (
	"errors"
	"fmt"

	"github.com/understudy-kv/understudy/promotion"
)

// Cascaded is a cascaded replica's own settings: where it copies from,
// and how it announces itself there.
type Cascaded struct {
	// Upstream are client URLs of the source cluster's replicas (or
	// members) to copy from, by snapshot and then watch; the replica is no
	// member of the cluster (package cascade).
	Upstream []string
	// Announce announces the replica in the source cluster while it serves
	// (clients that discover replicas find it): under ResolverPrefix
	// (empty: wire.ReplicasTarget), on a lease of ResolverTTL seconds
	// (grpc-proxy's flags and format).
	Announce       bool
	ResolverPrefix string
	ResolverTTL    int
	// Unused are the learner replica's flags given beside --upstream
	// that are not refused (LoadReplica): they set a member, a role or a
	// member entry a cascaded replica does not have, so they have no
	// effect; the replica says so when it starts.
	Unused []string
}

// DefaultCascaded announces the replica under understudy's own prefix.
func DefaultCascaded() Cascaded {
	return Cascaded{Announce: true, ResolverTTL: 10}
}

// Validate reports every problem of the cascaded replica's settings at
// once, each naming its flag.
func (c Cascaded) Validate() error {
	problems := checkURLs("upstream", c.Upstream)
	if len(c.Upstream) == 0 {
		problems = append(problems, errors.New("--upstream: must name at least one client URL of the source cluster"))
	}
	if c.ResolverTTL < 1 {
		problems = append(problems, fmt.Errorf("--resolver-ttl %d: must be at least 1 (seconds)", c.ResolverTTL))
	}
	return errors.Join(problems...)
}

// refuseLearner refuses the learner replica's settings given beside
// --upstream (joinGiven: --join was, even empty): a cascaded replica is no
// member of the cluster, so it joins nothing, holds no role and has no
// member entry. Its other settings (its member's) are not used.
func refuseLearner(l Learner, joinGiven bool) []error {
	var problems []error
	add := func(format string, a ...any) { problems = append(problems, fmt.Errorf(format, a...)) }
	if joinGiven || len(l.Join) > 0 {
		add("--upstream and --join: give --join for a learner replica (a member of the cluster) or --upstream for a cascaded replica (fed by another replica's watch), not both")
	}
	if l.Promotion.Role != promotion.RoleReader {
		add("--role %s with --upstream: a cascaded replica is no member of the cluster and cannot be promoted; give --join for a standby or voter role", l.Promotion.Role)
	}
	if l.RemoveOnExit {
		add("--remove-on-exit with --upstream: a cascaded replica has no member entry to remove")
	}
	if l.ReplaceOwnLearner {
		add("--replace-own-learner with --upstream: a cascaded replica has no member entry")
	}
	if l.ReplaceStaleDataDir != "" {
		add("--replace-stale-data-dir with --upstream: a cascaded replica bootstraps its store again by itself")
	}
	return problems
}
