package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/understudy-kv/understudy/test/harness"
)

// A replica serves /debug/pprof/ on its client URL with etcd's
// --enable-pprof, as a voter does, and not without it.
func TestReplicaPprofAsEtcd(t *testing.T) {
	beside(t)
	harness.Binaries(t)
	c := harness.StartCluster(t, harness.ClusterConfig{N: 1})
	with := harness.StartReplica(t, c, harness.ReplicaConfig{Name: "r1", Extra: []string{"--enable-pprof"}})
	without := harness.StartReplica(t, c, harness.ReplicaConfig{Name: "r2"})
	if code, body := httpDo(http.MethodGet, with.ClientURL+"/debug/pprof/", ""); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Errorf("GET /debug/pprof/ with --enable-pprof: %d %.200q; want 200 and the profile index", code, body)
	}
	if code, body := httpDo(http.MethodGet, with.ClientURL+"/debug/pprof/goroutine?debug=1", ""); code != http.StatusOK || !strings.Contains(body, "goroutine profile") {
		t.Errorf("GET /debug/pprof/goroutine?debug=1: %d %.200q", code, body)
	}
	if code, _ := httpDo(http.MethodGet, without.ClientURL+"/debug/pprof/", ""); code != http.StatusNotFound {
		t.Errorf("GET /debug/pprof/ without --enable-pprof: %d, want 404 as etcd", code)
	}
}
