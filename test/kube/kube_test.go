//go:build kube

package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/test/harness"
)

const (
	// ns is the namespace the test's objects live in.
	ns = "understudy-e2e"
	// restartTimeout bounds the wait for a killed server to serve again.
	restartTimeout = 2 * time.Minute
)

// server is one endpoint the apiserver's --etcd-servers names: a replica, or
// a voter in the reference run.
type server struct {
	name, url string
	proc      *harness.Proc
	// serving waits until the restarted server serves again.
	serving func(t *testing.T)
	// On the node (node_test.go) a server is a pod: stop deletes it (its
	// StatefulSet starts it again, which serving waits for), and
	// metricsURL is where its /metrics is now; proc is nil.
	stop       func(t *testing.T)
	metricsURL func(t *testing.T) string
}

// TestKubeAPIServer runs a real kube-apiserver storing in etcd through the
// learner replicas only, through cascaded replicas only, and, as the
// reference, through stock etcd voters.
//
//	scripts/build-kube.sh && go test -tags kube ./test/kube -v -timeout 30m
func TestKubeAPIServer(t *testing.T) {
	bins := kubeBinaries(t)
	t.Run("replicas", func(t *testing.T) {
		start := time.Now()
		c := harness.StartCluster(t, harness.ClusterConfig{Kinds: []harness.Kind{harness.KindEtcd, harness.KindEtcd, harness.KindEtcd}})
		var servers []*server
		for _, name := range []string{"r1", "r2"} {
			r := harness.StartReplica(t, c, harness.ReplicaConfig{Name: name})
			servers = append(servers, &server{name: name, url: r.ClientURL, proc: r.Proc,
				serving: func(t *testing.T) { r.WaitServing(t, restartTimeout) }})
		}
		t.Logf("3 voters and 2 replicas serving in %v", time.Since(start).Round(time.Millisecond))
		kubeScenario(t, bins, c, servers)
		t.Logf("replicas: %v in all", time.Since(start).Round(time.Millisecond))
	})
	t.Run("cascaded", func(t *testing.T) {
		start := time.Now()
		c := harness.StartCluster(t, harness.ClusterConfig{Kinds: []harness.Kind{harness.KindEtcd, harness.KindEtcd, harness.KindEtcd}})
		var upstreams []string
		for _, name := range []string{"r1", "r2"} {
			upstreams = append(upstreams, harness.StartReplica(t, c, harness.ReplicaConfig{Name: name}).ClientURL)
		}
		// The apiserver knows only the cascaded replicas: none of them is
		// a member, and a watch resumed on the other one after a kill
		// resumes by the cluster's own revisions.
		var servers []*server
		for _, name := range []string{"c1", "c2"} {
			r := harness.StartReplica(t, c, harness.ReplicaConfig{Name: name, Upstream: upstreams})
			servers = append(servers, &server{name: name, url: r.ClientURL, proc: r.Proc,
				serving: func(t *testing.T) { r.WaitServing(t, restartTimeout) }})
		}
		t.Logf("3 voters, 2 learner replicas and 2 cascaded replicas serving in %v", time.Since(start).Round(time.Millisecond))
		kubeScenario(t, bins, c, servers)
		t.Logf("cascaded: %v in all", time.Since(start).Round(time.Millisecond))
	})
	t.Run("voters", func(t *testing.T) {
		start := time.Now()
		c := harness.StartCluster(t, harness.ClusterConfig{Kinds: []harness.Kind{harness.KindEtcd, harness.KindEtcd, harness.KindEtcd}})
		var servers []*server
		for _, m := range c.Members {
			servers = append(servers, &server{name: m.Name, url: m.ClientURL, proc: m.Proc,
				serving: func(t *testing.T) {
					harness.WaitFor(t, restartTimeout, "voter "+m.Name+" answers Status", func() (bool, error) {
						_, err := c.Status(m)
						return err == nil, err
					})
					c.Leader(t)
				}})
		}
		kubeScenario(t, bins, c, servers)
		t.Logf("voters: %v in all", time.Since(start).Round(time.Millisecond))
	})
}

// kubeScenario is the whole test against an apiserver whose --etcd-servers
// are servers' client URLs; it kills and restarts every server in turn
// while a watch is open.
func kubeScenario(t *testing.T, bins kubeBins, c *harness.Cluster, servers []*server) {
	urls := make([]string, len(servers))
	for i, s := range servers {
		urls[i] = s.url
	}
	a := startAPIServer(t, bins.apiserver, urls)
	k := newKubectl(t, bins.kubectl, a.URL)
	k.must(t, "", "create", "namespace", ns)

	step(t, "create, consistent list, conflict", func() { crudAndConflict(t, k, c.Client(t), "/registry") })
	step(t, "watch across kills and restarts", func() { watchAcrossRestarts(t, k, servers) })
	step(t, "CRD and custom resource", func() { customResource(t, k) })
	step(t, "kubectl apply --dry-run=server of deploy/kubernetes", func() { dryRunManifests(t, k) })
	if a.Exited() {
		t.Fatalf("kube-apiserver exited during the test")
	}
	// What each server's store holds for the apiserver's watch cache: a
	// replica serves a client's watch stream over several of etcd's when
	// it has more than 100 watchers (readpath/watch_shards.go); the
	// apiserver opens one stream per watcher, as the voters show.
	for _, s := range servers {
		m, err := harness.Scrape(context.Background(), s.url+"/metrics", nil)
		if err != nil {
			t.Fatalf("%s/metrics: %v", s.name, err)
		}
		streams, _ := m.Value("etcd_debugging_mvcc_watch_stream_total")
		w, _ := m.Value("etcd_debugging_mvcc_watcher_total")
		t.Logf("%s: %v mvcc watch streams, %v watchers", s.name, streams, w)
	}
}

// step runs f and logs how long it took.
func step(t *testing.T, name string, f func()) {
	t.Helper()
	start := time.Now()
	f()
	t.Logf("%s: %v", name, time.Since(start).Round(time.Millisecond))
}

// object is the part of a Kubernetes object the test reads.
type object struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name            string `json:"name"`
		Namespace       string `json:"namespace,omitempty"`
		ResourceVersion string `json:"resourceVersion,omitempty"`
	} `json:"metadata"`
	Data  map[string]string `json:"data,omitempty"`
	Items []object          `json:"items,omitempty"`
}

func decode(t *testing.T, s string) object {
	t.Helper()
	var o object
	if err := json.Unmarshal([]byte(s), &o); err != nil {
		t.Fatalf("decode kubectl output: %v\n%s", err, s)
	}
	return o
}

// rv is a resourceVersion as a number: the etcd revision it is, which lets
// the test check order.
func rv(t *testing.T, o object) int64 {
	t.Helper()
	n, err := strconv.ParseInt(o.Metadata.ResourceVersion, 10, 64)
	if err != nil {
		t.Fatalf("%s %s: resourceVersion %q: %v", o.Kind, o.Metadata.Name, o.Metadata.ResourceVersion, err)
	}
	return n
}

func configMap(name, rv string, data map[string]string) string {
	o := map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": ns, "resourceVersion": rv},
		"data":     data,
	}
	b, _ := json.Marshal(o)
	return string(b)
}

// crudAndConflict creates a ConfigMap, checks that every consistent list
// after an update shows it, that a replace with a stale resourceVersion is
// refused with a conflict, that the object is in the voters' etcd (read
// with etcd) under prefix, and deletes it.
func crudAndConflict(t *testing.T, k *kubectl, etcd *clientv3.Client, prefix string) {
	created := decode(t, k.must(t, configMap("cm1", "", map[string]string{"v": "0"}), "create", "-f", "-", "-o", "json"))
	first := created
	for i := 1; i <= 5; i++ {
		updated := decode(t, k.must(t, configMap("cm1", created.Metadata.ResourceVersion, map[string]string{"v": strconv.Itoa(i)}), "replace", "-f", "-", "-o", "json"))
		if rv(t, updated) <= rv(t, created) {
			t.Fatalf("update %d: resourceVersion %s, not after %s", i, updated.Metadata.ResourceVersion, created.Metadata.ResourceVersion)
		}
		created = updated
		// A list without a resourceVersion is a consistent read: it must
		// show the update just acknowledged.
		list := decode(t, k.must(t, "", "get", "configmaps", "-n", ns, "-o", "json"))
		var got *object
		for j := range list.Items {
			if list.Items[j].Metadata.Name == "cm1" {
				got = &list.Items[j]
			}
		}
		if got == nil || got.Data["v"] != strconv.Itoa(i) || got.Metadata.ResourceVersion != updated.Metadata.ResourceVersion {
			t.Fatalf("consistent list after update %d (resourceVersion %s): cm1 is %+v", i, updated.Metadata.ResourceVersion, got)
		}
	}
	_, err := k.run(configMap("cm1", first.Metadata.ResourceVersion, map[string]string{"v": "stale"}), "replace", "-f", "-")
	if err == nil || !strings.Contains(err.Error(), "Conflict") || !strings.Contains(err.Error(), "the object has been modified") {
		t.Fatalf("replace with the stale resourceVersion %s: want a Conflict, got %v", first.Metadata.ResourceVersion, err)
	}
	if got := decode(t, k.must(t, "", "get", "configmap", "cm1", "-n", ns, "-o", "json")); got.Data["v"] != "5" {
		t.Fatalf("after the refused replace cm1 holds %v, want v=5", got.Data)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := etcd.Get(ctx, prefix+"/configmaps/"+ns+"/cm1")
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].ModRevision != rv(t, created) {
		t.Fatalf("cm1 in the voters' etcd: %v, %v; want mod revision %d", kvsOf(resp), err, rv(t, created))
	}
	k.must(t, "", "delete", "configmap", "cm1", "-n", ns)
	if _, err := k.run("", "get", "configmap", "cm1", "-n", ns); err == nil || !strings.Contains(err.Error(), "NotFound") {
		t.Fatalf("get after delete: want NotFound, got %v", err)
	}
}

func kvsOf(resp *clientv3.GetResponse) string {
	if resp == nil {
		return "no response"
	}
	var s []string
	for _, kv := range resp.Kvs {
		s = append(s, fmt.Sprintf("%s@%d", kv.Key, kv.ModRevision))
	}
	return fmt.Sprintf("%d keys %v", len(resp.Kvs), s)
}
