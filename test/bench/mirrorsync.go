package main

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/test/harness"
)

// Rows of the mirror-source scenario's initial syncs.
const (
	mirrorSyncLeader  = "source leader, a mirror's initial sync read from the leader"
	mirrorSyncReplica = "source leader, a mirror's initial sync read from a replica"
)

// mirrorSyncArm is one source of the initial-sync arms and what its syncs
// cost the leader.
type mirrorSyncArm struct {
	row, endpoint, name string
	// perSync is the leader's CPU-s per 10,000 keys of each sync, less
	// what it spent idle over as long just before.
	perSync          []float64
	cpu, seconds     float64
	keys, syncs      int
	idleRate, idleAt float64
}

// mirrorSyncRows measures what a mirror's initial sync of keys keys (values
// of p.mirrorSyncValue bytes) costs the source's leader when the mirror
// reads from the leader and when it reads from the replica: a sync reads
// the whole prefix, pages of ranges, where streaming is one watch. Each
// sync is a fresh `replica mirror` into a destination prefix of its own;
// the arms alternate, rounds times each; no puts run meanwhile, and the
// leader's CPU over an idle window of 2 s just before each sync, scaled to
// the sync's time, is taken off. The destination dst is wiped, compacted
// and defragmented before the syncs and after each round (a sync's copy is
// 40 MB of live keys: 16 rounds of them, beside the put windows' copies,
// passed etcd's 2 GiB quota, and the next sync waited on NOSPACE forever);
// that work is not in any sync's window.
func mirrorSyncRows(r *runner, tp *topology, p params, dst *harness.Cluster, keys, rounds int) []Row {
	dc, dstEndpoint := dst.Client(r), dst.Endpoints()[0]
	clean := func() {
		wipe(r, dst)
		compactDest(r, dst)
	}
	clean()
	put := clients(r, tp.leader.ClientURL, 1)[0]
	harness.Fill(r, put, keys, func(i int) (string, string) {
		return fmt.Sprintf("mirrorsync/%07d", i), fmt.Sprintf("%0*d", p.mirrorSyncValue, i)
	})
	arms := []*mirrorSyncArm{
		{row: mirrorSyncLeader, endpoint: tp.leader.ClientURL, name: "leader"},
		{row: mirrorSyncReplica, endpoint: tp.extraURL, name: "replica"},
	}
	for round := range rounds {
		for i := range arms {
			a := arms[i]
			if round%2 == 1 {
				a = arms[len(arms)-1-i]
			}
			a.sync(r, tp, dc, dstEndpoint, keys, round)
		}
		clean()
	}
	var rows []Row
	for _, a := range arms {
		note := fmt.Sprintf("`replica mirror --source-endpoints` %s's client URL only, a fresh mirror and destination prefix each time: %d syncs of %d keys of %d B, alternating with the other source; the leader's idle CPU over as long taken off (%.2f %% of a core idle); leader CPU-s/10k keys per sync: %s",
			a.name, a.syncs, keys, p.mirrorSyncValue, 100*a.idleRate, windowsText(a.perSync, 3))
		rows = append(rows, Row{Scenario: "mirror-source", Name: a.row, Note: note, Windows: a.perSync, WindowsMetric: "leader CPU/10k",
			Result: Result{Ops: a.keys, Seconds: a.seconds, Throughput: float64(a.keys) / a.seconds, CPU: map[string]float64{"leader": a.cpu}}})
	}
	return rows
}

// sync runs one initial sync from a's source into a prefix of its own and
// adds what it cost the leader.
func (a *mirrorSyncArm) sync(r *runner, tp *topology, dc *clientv3.Client, dstEndpoint string, keys, round int) {
	pid := tp.leader.Proc.PID()
	idle := idleRate(r, pid)

	name := fmt.Sprintf("sync-%s-%d", a.name, round)
	dstPrefix := name + "/"
	cpu0, start := cpuOf(r, pid), time.Now()
	proc := harness.Start(r, harness.ProcConfig{Name: "mirror-" + name, Bin: tp.cluster.Bins.Replica, Args: []string{
		"mirror", "--source-endpoints", a.endpoint, "--dest-endpoints", dstEndpoint, "--prefix", "mirrorsync/",
		"--dest-prefix", dstPrefix, "--name", name, "--no-leases", "--log-level", "warn"}})
	harness.WaitFor(r, 10*time.Minute, name+" initial sync", func() (bool, error) {
		resp, err := dc.Get(context.Background(), dstPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count >= int64(keys), err
	})
	took := time.Since(start).Seconds()
	cpu := cpuOf(r, pid) - cpu0 - idle*took
	proc.Stop()
	a.perSync = append(a.perSync, cpu*10000/float64(keys))
	a.cpu += cpu
	a.seconds += took
	a.keys += keys
	a.syncs++
	a.idleRate = (a.idleRate*float64(a.syncs-1) + idle) / float64(a.syncs)
	r.Logf("%-60s %d keys in %.1f s, leader %.3f CPU-s above idle (%.3f CPU-s/10k keys; idle %.2f %% of a core)", a.row, keys, took, cpu, cpu*10000/float64(keys), 100*idle)
}

func cpuOf(r *runner, pid int) float64 {
	s, err := cpuSeconds(pid)
	if err != nil {
		r.Fatalf("CPU of %d: %v", pid, err)
	}
	return s
}
