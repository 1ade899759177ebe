package e2e

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/understudy-kv/understudy/membership"
	"github.com/understudy-kv/understudy/promotion"
	"github.com/understudy-kv/understudy/test/harness"
)

// Pods of a StatefulSet that stop together (a scale-down, an uninstall)
// each leave at once. raft holds one membership change at a time and drops
// another proposed meanwhile, and etcd waits for the dropped one until the
// request ends: each leave must still end with its entry removed. The
// leaves start together (one status read, then every remove at once), as
// the preStop hooks of pods stopped by one command do. A leave of a member
// another leave removed first is done.
func TestReplicasLeavingAtOnceAllLeave(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	names := []string{"r1", "r2", "r3", "r4"}
	for _, name := range names {
		startReplica(t, bins, c, name, replicaOpts{}).Stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cli := c.Client(t)
	sts, err := membership.Status(ctx, cli, http.DefaultClient, promotion.Config{}, clockwork.NewRealClock())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, len(names))
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[i] = membership.Leave(ctx, clockwork.NewRealClock(), cli, sts, name)
		}()
	}
	close(start)
	wg.Wait()
	for i, name := range names {
		if errs[i] != nil {
			t.Errorf("leave %s, at once with the others: %v", name, errs[i])
		}
	}
	resp, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range resp.Members {
		if m.IsLearner {
			t.Errorf("learner %s (%x) still listed after every replica left", m.Name, m.ID)
		}
	}
	if len(resp.Members) != 3 {
		t.Fatalf("%d members after the leaves, want the 3 voters", len(resp.Members))
	}
	// A leave that finds its member gone, removed by another leave that read
	// the same status (two hooks, or an operator beside a hook), is done:
	// etcd answers "member not found", and the member is gone either way.
	if _, err := membership.Leave(ctx, clockwork.NewRealClock(), cli, sts, names[0]); err != nil {
		t.Fatalf("leave %s again, from the status read before it left: %v; want done", names[0], err)
	}
}
