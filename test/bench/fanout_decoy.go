package main

import (
	"context"
	"strconv"
	"sync"
	"syscall"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/test/harness"
)

// pairedDecoy is a second cluster beside the fanout-paired rig: 1 primary
// and the same readers as the measured rig's (readerLayout), on the
// CPUs the measured rig's followers use. Its cascaded replicas run
// whenever the measured rig's are stopped and are stopped whenever those
// run, and it takes puts at the same rate in every put window. So both
// arms carry the same processes doing the same work beside the leader —
// its readers following, applying and answering their feeders — and differ
// only in whose readers they are: the measured leader's, or another
// cluster's. Without it the stopped arm left CPU 1 idler, the followers
// answered sooner (put p50 4 ms against 30 ms) and the leader batched
// less, and the idle arms differed by more than the readers could cost
// (0.74×: the leader cheaper with 16 readers than without).
type pairedDecoy struct {
	c   *harness.Cluster
	put *clientv3.Client
	fan *fanoutRig
}

func startPairedDecoy(r *runner, p params, layout readerLayout) *pairedDecoy {
	d := &pairedDecoy{}
	d.c = harness.StartCluster(r, harness.ClusterConfig{N: 1, ExtraArgs: []string{"--election-timeout", "5000"}})
	leader := d.c.WaitLeader(r, pairedLeaderWait)
	populate(r, d.c.Client(r), p.keys, value256)
	d.put = clients(r, leader.ClientURL, 1)[0]
	d.fan = layout(r, d.c, p, "decoy-")
	return d
}

// swap stops the measured rig's cascaded replicas if stopMeasured, else
// the decoy's, and returns what resumes them.
func (g *pairedRig) swap(r *runner, stopMeasured bool) func() {
	pids := g.decoy.fan.pids(g.decoy.fan.cascaded)
	if stopMeasured {
		pids = g.fan.pids(g.fan.cascaded)
	}
	return signalAll(r, pids, syscall.SIGSTOP, syscall.SIGCONT)
}

// replicaURLs are every replica's of both rigs, for waitQuiet.
func (g *pairedRig) replicaURLs() []string {
	var out []string
	for _, f := range []*fanoutRig{g.fan, g.decoy.fan} {
		out = append(out, f.urls(f.replicas)...)
		out = append(out, f.urls(f.cascaded)...)
	}
	return out
}

// putBoth puts at p.pairedPutRate on the measured leader and on the
// decoy's for p.pairedPutWindow, and returns the measured side's result.
func (g *pairedRig) putBoth() Result {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		loadAt(context.Background(), g.p.pairedPutRate, 16, g.p.pairedPutWindow, func(ctx context.Context, w int) error {
			_, err := g.decoy.put.Put(ctx, "bench/paired/"+strconv.Itoa(w), value256)
			return err
		})
	}()
	res := loadAt(context.Background(), g.p.pairedPutRate, 16, g.p.pairedPutWindow, func(ctx context.Context, w int) error {
		_, err := g.put.Put(ctx, "bench/paired/"+strconv.Itoa(w), value256)
		return err
	})
	wg.Wait()
	return res
}
