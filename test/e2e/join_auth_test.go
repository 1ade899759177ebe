package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/understudy-kv/understudy/test/harness"
)

// TestReplicaJoinWithoutRootSaysWhatItNeeds: on an auth-enabled cluster, a
// reader replica whose --user lacks the root role is refused the member
// add: it exits non-zero at once, naming the user and the role it needs,
// and the cluster's members are as they were.
func TestReplicaJoinWithoutRootSaysWhatItNeeds(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	for _, args := range authSetup {
		harness.MustEtcdctl(t, bins, c.Endpoints(), args...)
	}
	r := startReplica(t, bins, c, "r1", replicaOpts{NoWait: true, Extra: []string{"--user", "alice:alicepw"}})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code, err := r.Proc.Wait(ctx)
	if err != nil || code == 0 {
		t.Fatalf("a replica joining as a user without root: exit %d, %v; want a non-zero exit", code, err)
	}
	if log := r.Proc.Log(); !strings.Contains(log, "permission denied") || !strings.Contains(log, `user "alice" (--user)`) || !strings.Contains(log, "root role") {
		t.Fatalf("the refusal does not name the user and the root role:\n%s", log)
	}
	members := harness.MustEtcdctl(t, bins, c.Endpoints(), "member", "list", "--user", "root:rootpw")
	if n := strings.Count(strings.TrimSpace(members), "\n") + 1; n != 3 || strings.Contains(members, "r1") {
		t.Fatalf("the members after the refused join:\n%s", members)
	}
}
