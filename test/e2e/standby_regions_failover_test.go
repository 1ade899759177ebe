package e2e

import (
	"testing"

	"github.com/understudy-kv/understudy/test/harness"
)

// The failover scenarios of standby_scenes_test.go with the standby in
// region B at standbyRTT: a restart, a lost quorum or a dead --join
// endpoint across the WAN ends as it does at loopback.

// standbyInRegionB is a standby scene in region B at standbyRTT, joined
// through the voter named joinOnly alone ("": every voter).
func standbyInRegionB(t *testing.T, joinOnly string) standbyScene {
	t.Helper()
	g := startStandbyAt(t, standbyRTT, joinOnly)
	return standbyScene{c: g.Cluster, s: g.Replica, cut: g.CutClientURL,
		restarted: func() { g.SetRTT(standbyRTT, standbyJitter) }}
}

// member is c's voter named name.
func member(t *testing.T, c *harness.Cluster, name string) *harness.Member {
	t.Helper()
	for _, m := range c.Members {
		if m.Name == name {
			return m
		}
	}
	t.Fatalf("no voter named %s", name)
	return nil
}

// TestStandbyInRegionBRemovalRetriedAfterTheLeaderDies:
// removalRetriedAfterTheLeaderDies at standbyRTT; the leader restarts in
// region A while the promoted standby waits across the WAN.
func TestStandbyInRegionBRemovalRetriedAfterTheLeaderDies(t *testing.T) {
	wanVariant(t, "TestStandbyRemovalRetriedAfterTheLeaderDies")
	removalRetriedAfterTheLeaderDies(t, standbyInRegionB(t, ""))
}

// TestStandbyInRegionBKilledBetweenPromotionAndRemoval:
// killedBetweenPromotionAndRemoval at standbyRTT; the restarted standby
// resumes across the WAN.
func TestStandbyInRegionBKilledBetweenPromotionAndRemoval(t *testing.T) {
	wanVariant(t, "TestStandbyKilledBetweenPromotionAndRemoval")
	killedBetweenPromotionAndRemoval(t, standbyInRegionB(t, ""))
}

// TestStandbyInRegionBWhoseOnlyJoinEndpointDies: onlyJoinEndpointDies at
// standbyRTT, the standby joined through m1 alone (the leader or a
// follower, as the election went).
func TestStandbyInRegionBWhoseOnlyJoinEndpointDies(t *testing.T) {
	wanVariant(t, "TestStandbyWhoseOnlyJoinEndpointDies")
	sc := standbyInRegionB(t, "m1")
	onlyJoinEndpointDies(t, sc, member(t, sc.c, "m1"))
}

// TestStandbyInRegionBWhoseOnlyJoinEndpointLosesItsClientURL:
// onlyJoinEndpointLosesItsClientURL at standbyRTT, the standby joined
// through m1 alone.
func TestStandbyInRegionBWhoseOnlyJoinEndpointLosesItsClientURL(t *testing.T) {
	wanVariant(t, "TestStandbyWhoseOnlyJoinEndpointLosesItsClientURL")
	sc := standbyInRegionB(t, "m1")
	onlyJoinEndpointLosesItsClientURL(t, sc, member(t, sc.c, "m1"))
}
