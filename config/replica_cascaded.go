package config

import (
	"fmt"
	"slices"

	"github.com/understudy-kv/understudy/promotion"
)

// validateCascaded refuses what a cascaded replica cannot be: it is no
// member of the cluster, so it joins nothing, holds no role and shares no
// member's rounds.
func (c Replica) validateCascaded() []error {
	var problems []error
	add := func(format string, a ...any) { problems = append(problems, fmt.Errorf(format, a...)) }
	if c.joinSet || len(c.Join) > 0 {
		add("--upstream and --join: give --join for a learner replica (a member of the cluster) or --upstream for a cascaded replica (fed by another replica's watch), not both")
	}
	if c.Promotion.Role != promotion.RoleReader {
		add("--role %s with --upstream: a cascaded replica is no member of the cluster and cannot be promoted; give --join for a standby or voter role", c.Promotion.Role)
	}
	if len(c.ReadIndex.ViaURLs) > 0 {
		add("--read-index-via with --upstream: a cascaded replica's strong reads already go through its upstream")
	}
	if c.RemoveOnExit {
		add("--remove-on-exit with --upstream: a cascaded replica has no member entry to remove")
	}
	if c.ReplaceOwnLearner {
		add("--replace-own-learner with --upstream: a cascaded replica has no member entry")
	}
	if c.ReplaceStaleDataDir != "" {
		add("--replace-stale-data-dir with --upstream: a cascaded replica bootstraps its store again by itself")
	}
	if c.ResolverTTL < 1 {
		add("--resolver-ttl %d: must be at least 1 (seconds)", c.ResolverTTL)
	}
	for _, u := range c.Upstream {
		if slices.Contains(c.AdvertiseClientURLs, u) || slices.Contains(c.ListenClientURLs, u) {
			add("--upstream %s: is this replica's own client URL; name a replica or member of the source cluster", u)
		}
	}
	return problems
}
