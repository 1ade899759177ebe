package main

import (
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/understudy-kv/understudy/test/harness"
)

// topology is a running cluster with one extra non-voting member (a stock
// etcd learner or an understudy replica), with each process's role.
type topology struct {
	cluster  *harness.Cluster
	leader   *harness.Member
	follower *harness.Member
	// extraURL serves the extra member's clients; extraPID is its process.
	extraURL string
	extraPID int
	// extraPIDs are more replicas, added by a scenario.
	extraPIDs []int
	// replicaURLs are the client URLs of every replica joined (none on
	// stock etcd): the rounds they ask the leader for are counted.
	replicaURLs []string
}

// pids maps roles to process IDs for CPU accounting.
func (tp *topology) pids() map[string]int {
	m := map[string]int{"leader": tp.leader.Proc.PID(), "extra": tp.extraPID}
	for i, pid := range tp.extraPIDs {
		m[fmt.Sprintf("extra%d", i+2)] = pid
	}
	i := 1
	for _, mem := range tp.cluster.Members {
		if mem != tp.leader {
			m[fmt.Sprintf("follower%d", i)] = mem.Proc.PID()
			i++
		}
	}
	return m
}

func (tp *topology) roles(r *runner) {
	tp.leader = tp.cluster.Leader(r)
	for _, m := range tp.cluster.Members {
		if m != tp.leader {
			tp.follower = m
			break
		}
	}
}

// understudyTopology is 3 primaries and 1 replica.
func understudyTopology(r *runner, replicaArgs ...string) *topology {
	return understudyTopologyWith(r, nil, replicaArgs...)
}

// understudyTopologyWith is understudyTopology with voterArgs added to
// every voter's flags.
func understudyTopologyWith(r *runner, voterArgs []string, replicaArgs ...string) *topology {
	c := harness.StartCluster(r, harness.ClusterConfig{N: 3, Kinds: []harness.Kind{harness.KindPrimary, harness.KindPrimary, harness.KindPrimary}, ExtraArgs: voterArgs})
	rep := harness.StartReplica(r, c, harness.ReplicaConfig{Name: "replica", Extra: replicaArgs})
	tp := &topology{cluster: c, extraURL: rep.ClientURL, extraPID: rep.PID(), replicaURLs: []string{rep.ClientURL}}
	tp.roles(r)
	return tp
}

// etcdTopology is 3 stock etcd voters and 1 stock etcd learner, joined the
// way etcd documents: member add --learner, then start it as existing.
func etcdTopology(r *runner) *topology {
	kinds := []harness.Kind{harness.KindEtcd, harness.KindEtcd, harness.KindEtcd}
	c := harness.StartCluster(r, harness.ClusterConfig{N: 3, Kinds: kinds})
	client, p := addStockLearner(r, c, "learner")
	tp := &topology{cluster: c, extraURL: client, extraPID: p.PID()}
	tp.roles(r)
	return tp
}

// addStockLearner joins a stock etcd learner named name to c the way etcd
// documents (member add --learner, then start it as existing) and waits
// until it has caught up; it returns its client URL and process.
func addStockLearner(r *runner, c *harness.Cluster, name string) (string, *harness.Proc) {
	client, p, _ := harness.StartStockLearner(r, c, name, false)
	return client, p
}

// clients opens n clients to endpoint, closed when the scenario ends. Many
// connections spread load as the etcd benchmark tool's --conns does.
func clients(r *runner, endpoint string, n int) []*clientv3.Client {
	var out []*clientv3.Client
	for range n {
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			r.Fatalf("client of %s: %v", endpoint, err)
		}
		r.Cleanup(func() { c.Close() })
		out = append(out, c)
	}
	return out
}
