package e2e

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/understudy-kv/understudy/test/harness"
)

// A learner entry that no process answers for (a replica stopped for good
// without leaving) shows in every other replica's
// understudy_cluster_learners_unanswered, the series the UnderstudyStaleLearner
// alert reads, and leaves it once the entry is removed.
func TestReplicasReportALearnerEntryNoReplicaAnswersFor(t *testing.T) {
	beside(t)
	bins := harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 3})
	r1 := startReplica(t, bins, c, "r1", replicaOpts{})
	r2 := startReplica(t, bins, c, "r2", replicaOpts{})
	unanswered := func(want float64) func() (bool, error) {
		return func() (bool, error) {
			m, err := harness.Scrape(t.Context(), r1.ClientURL+"/metrics", nil)
			if err != nil {
				return false, err
			}
			v, err := m.Value("understudy_cluster_learners_unanswered")
			return err == nil && v == want, err
		}
	}
	// One check runs at start and one every 30 s.
	harness.WaitFor(t, time.Minute, "r1 sees r2 answer", unanswered(0))
	r2.Stop()
	harness.WaitFor(t, 2*time.Minute, "r1 reports r2's entry unanswered", unanswered(1))
	if log := r1.Log(); !strings.Contains(log, "a learner entry's peer URLs do not answer") || !strings.Contains(log, `"name":"r2"`) {
		t.Fatalf("r1's log does not name r2's unanswered entry")
	}
	if out, err := exec.Command(bins.Replica, "leave", "--endpoints", strings.Join(c.Endpoints(), ","), "r2").CombinedOutput(); err != nil {
		t.Fatalf("replica leave r2: %v\n%s", err, out)
	}
	harness.WaitFor(t, 2*time.Minute, "r1 reports no unanswered entry once r2 left", unanswered(0))
}
