package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/test/harness"
)

// grpcProxyID is the grpc-proxy scenario's name (--only) and Row.Scenario.
const grpcProxyID = "grpc-proxy"

// The fronts the grpc-proxy scenario serves watchers and reads through,
// each in front of the same 3 voters.
const (
	frontProxy    = "grpc-proxy"
	frontLearner  = "a learner replica"
	frontCascaded = "a cascaded replica"
	// frontFollower is a voter that is not the leader: reads only (what a
	// follower's linearizable read costs is issue 58's partner for a
	// cascaded replica's strong read).
	frontFollower = "a follower"
)

// proxyFronts are the fronts in the order a round begins with; rounds
// rotate it.
var proxyFronts = []string{frontProxy, frontLearner, frontCascaded}

// proxyReadFronts are the fronts the read windows go through: the
// watchers' and a follower.
var proxyReadFronts = append(slices.Clone(proxyFronts), frontFollower)

// proxyLeaderWait bounds the wait for the rig's first leader.
const proxyLeaderWait = 30 * time.Second

// proxyFront is one front: its client URL, its process, and the process
// that feeds it where that is not the leader (a cascaded replica's
// learner replica), whose CPU is counted beside it.
type proxyFront struct {
	name   string
	url    string
	pid    int
	feeder int
}

// proxyRig is the grpc-proxy scenario's cluster: 3 primaries (the leader
// stays put: a 5 s election timeout), a learner replica r1, a cascaded
// replica c1 fed by r1, and `etcd grpc-proxy start` of the stock v3.7.3
// binary with the 3 voters as its endpoints; and for reads, a follower.
type proxyRig struct {
	p      params
	c      *harness.Cluster
	leader *harness.Member
	put    *clientv3.Client
	// acks are every put through put, acknowledged.
	acks   *ackLog
	fronts map[string]proxyFront
	// fresh is each front's RSS (MiB) before any watcher, the base of its
	// RSS per 10,000 watchers.
	fresh map[string]float64
}

// grpcProxyScenario measures the read tier beside what users would run
// instead (issue 58): etcd's grpc-proxy, a learner replica and a cascaded
// replica fed by it, each in front of the same 3 voters in one run. Reads
// at a fixed rate in each mode through each front, beside a window of the
// puts alone, in rounds; then, for each number of watchers, watchers over
// 1,000 keys and over 100 prefixes through each front, beside a window with
// no watchers, in rounds, at a fixed put rate through the leader. Last,
// on a cluster of its own with auth on, what grpc-proxy and a cascaded
// replica answer where etcd's issues say grpc-proxy differs from a voter
// (proxyChecks).
func grpcProxyScenario(p params) ([]Row, error) {
	var rows []Row
	err := scenario(grpcProxyID, func(r *runner) {
		g := startProxyRig(r, p)
		rows = append(rows, g.reads(r)...)
		g.fresh = map[string]float64{}
		for _, f := range proxyFronts {
			g.fresh[f] = rssMiB(g.fronts[f].pid)
		}
		for _, n := range p.proxyWatchers {
			rows = append(rows, g.watchers(r, n)...)
		}
		if l := g.c.Leader(r); l != g.leader {
			r.Fatalf("the leader moved from %s to %s: its CPU is no longer one process's", g.leader.Name, l.Name)
		}
		rows = append(rows, proxyChecks(r, p)...)
	})
	return rows, err
}

func startProxyRig(r *runner, p params) *proxyRig {
	g := &proxyRig{p: p, fronts: map[string]proxyFront{}, acks: newAckLog()}
	g.c = harness.StartCluster(r, harness.ClusterConfig{N: 3, ExtraArgs: []string{"--election-timeout", "5000"}})
	g.leader = g.c.WaitLeader(r, proxyLeaderWait)
	g.put = clients(r, g.leader.ClientURL, 1)[0]
	g.fill(r)
	r1 := harness.StartReplica(r, g.c, harness.ReplicaConfig{Name: "r1", Extra: p.replicaArgs})
	c1 := harness.StartReplica(r, g.c, harness.ReplicaConfig{Name: "c1", Upstream: []string{r1.ClientURL}, Extra: p.replicaArgs})
	proxy, url := harness.StartGRPCProxy(r, g.c.Endpoints())
	g.fronts[frontProxy] = proxyFront{name: frontProxy, url: url, pid: proxy.PID()}
	g.fronts[frontLearner] = proxyFront{name: frontLearner, url: r1.ClientURL, pid: r1.PID()}
	g.fronts[frontCascaded] = proxyFront{name: frontCascaded, url: c1.ClientURL, pid: c1.PID(), feeder: r1.PID()}
	for _, m := range g.c.Members {
		if m != g.leader {
			g.fronts[frontFollower] = proxyFront{name: frontFollower, url: m.ClientURL, pid: m.Proc.PID()}
			break
		}
	}
	for _, f := range g.fronts {
		g.waitRevision(r, f)
	}
	// Let the joins' traffic settle, as idle.go does.
	<-time.After(p.dur / 2)
	return g
}

// waitRevision waits until front f's reads see the revision of a put
// through the leader: it serves the cluster's data.
func (g *proxyRig) waitRevision(r *runner, f proxyFront) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rev, err := g.acks.putKey(ctx, g.put, "bench/gp-ready")
	if err != nil {
		r.Fatalf("%s: put: %v", f.name, err)
	}
	cli := clients(r, f.url, 1)[0]
	harness.WaitFor(r, time.Minute, f.name+" serves the cluster's revision", func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		// Linearizable: grpc-proxy would answer a serializable read of a
		// key it cached at once; a replica waits until it holds the
		// revision.
		got, err := cli.Get(ctx, "bench/gp-ready")
		if err != nil {
			return false, err
		}
		return got.Header.Revision >= rev, fmt.Errorf("at revision %d, want %d", got.Header.Revision, rev)
	})
}

// The keyspace of the scenario: proxyKeys keys of 256 B in proxyPrefixes
// prefixes (key k in prefix k mod proxyPrefixes).
const (
	proxyKeys     = 1000
	proxyPrefixes = 100
)

func proxyKey(k int) string    { return fmt.Sprintf("bench/gp/%02d/%04d", k%proxyPrefixes, k%proxyKeys) }
func proxyPrefix(k int) string { return fmt.Sprintf("bench/gp/%02d/", k%proxyPrefixes) }

// fill puts every key once, in order.
func (g *proxyRig) fill(r *runner) {
	for range proxyKeys {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := g.acks.put(ctx, g.put)
		cancel()
		if err != nil {
			r.Fatalf("fill: %v", err)
		}
	}
}

// parseWatchers reads --proxy-watchers: "" (the mode's counts) or
// comma-separated multiples of proxyKeys, so that every key has as many
// watchers.
func parseWatchers(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var ns []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 || n%proxyKeys != 0 {
			return nil, fmt.Errorf("--proxy-watchers %q: %q is not a positive multiple of %d (every key watched as often)", s, f, proxyKeys)
		}
		ns = append(ns, n)
	}
	return ns, nil
}
