package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/test/harness"
)

// Rows of the mirror-source scenario's catch-ups.
const (
	mirrorCatchUpLeader  = "source leader, a mirror's watch catching up on the leader"
	mirrorCatchUpReplica = "source leader, a mirror's watch catching up on a replica"
)

// mirrorCatchUpPrefix is the source prefix the catch-up arms mirror.
const mirrorCatchUpPrefix = "mirrorcatch/"

// mirrorCatchUpArm is one source of the catch-up arms: a mirror of its own
// (its --name and destination prefix), restarted each round.
type mirrorCatchUpArm struct {
	row, endpoint, name string
	// perCatchUp is the leader's CPU-s per 10,000 events of each catch-up,
	// less what it spent idle over as long just before.
	perCatchUp       []float64
	cpu, seconds     float64
	events, catchUps int
}

// mirrorCatchUpRows measures what a mirror's watch costs the source's
// leader where it can be told from the puts: a mirror stopped while
// events events were written (transactions of 100 puts of
// p.mirrorSyncValue bytes), then started again, resumes from its
// checkpoint and receives them all from its watch at once — the same
// events a streaming mirror receives one by one, the same work for the
// member it watches (the history read back, every event encoded and
// sent), with no puts beside them. Its source is the leader or the replica;
// the arms alternate, rounds times each, the leader's idle CPU over 2 s
// before each catch-up, scaled to its time, taken off.
func mirrorCatchUpRows(r *runner, tp *topology, p params, dst *harness.Cluster, events, rounds int) []Row {
	dc, dstEndpoint := dst.Client(r), dst.Endpoints()[0]
	put := clients(r, tp.leader.ClientURL, 1)[0]
	arms := []*mirrorCatchUpArm{
		{row: mirrorCatchUpLeader, endpoint: tp.leader.ClientURL, name: "catchup-leader"},
		{row: mirrorCatchUpReplica, endpoint: tp.extraURL, name: "catchup-replica"},
	}
	fill := func(round int) {
		harness.Fill(r, put, events, func(i int) (string, string) {
			return fmt.Sprintf("%s%07d", mirrorCatchUpPrefix, i), fmt.Sprintf("%d-%0*d", round, p.mirrorSyncValue, i)
		})
		if _, err := put.Put(context.Background(), mirrorCatchUpPrefix+"marker", strconv.Itoa(round)); err != nil {
			r.Fatalf("catch-up marker: %v", err)
		}
	}
	// Round 0 is each mirror's initial sync, not counted.
	fill(0)
	for _, a := range arms {
		a.run(r, tp, dc, dstEndpoint, 0)
	}
	for round := 1; round <= rounds; round++ {
		// Each round writes 80 MB per arm into the destination's history.
		compactDest(r, dst)
		fill(round)
		for i := range arms {
			a := arms[i]
			if round%2 == 0 {
				a = arms[len(arms)-1-i]
			}
			idle := idleRate(r, tp.leader.Proc.PID())
			cpu, took := a.run(r, tp, dc, dstEndpoint, round)
			cpu -= idle * took
			a.perCatchUp = append(a.perCatchUp, cpu*10000/float64(events))
			a.cpu += cpu
			a.seconds += took
			a.events += events
			a.catchUps++
			r.Logf("%-60s %d events in %.1f s, leader %.3f CPU-s above idle (%.3f CPU-s/10k events; idle %.2f %% of a core)",
				a.row, events, took, cpu, cpu*10000/float64(events), 100*idle)
		}
	}
	var rows []Row
	for _, a := range arms {
		note := fmt.Sprintf("`replica mirror --source-endpoints` %s's client URL only, stopped while %d events were written (transactions of 100 puts of %d B), then started again: it resumes from its checkpoint and its watch delivers them all; %d catch-ups, alternating with the other source; the leader's idle CPU over as long taken off; leader CPU-s/10k events per catch-up: %s",
			a.endpointName(), events, p.mirrorSyncValue, a.catchUps, windowsText(a.perCatchUp, 3))
		rows = append(rows, Row{Scenario: "mirror-catchup", Name: a.row, Note: note, Windows: a.perCatchUp, WindowsMetric: "leader CPU/10k",
			Result: Result{Ops: a.events, Seconds: a.seconds, Throughput: float64(a.events) / a.seconds, CPU: map[string]float64{"leader": a.cpu}}})
	}
	return rows
}

// endpointName is which member a's mirror watches.
func (a *mirrorCatchUpArm) endpointName() string {
	if a.row == mirrorCatchUpLeader {
		return "the leader"
	}
	return "the replica"
}

// run starts a's mirror, waits until round's marker has reached the
// destination, stops it, and returns the leader's CPU-s meanwhile and how
// long it took.
func (a *mirrorCatchUpArm) run(r *runner, tp *topology, dc *clientv3.Client, dstEndpoint string, round int) (cpu, seconds float64) {
	pid := tp.leader.Proc.PID()
	dstPrefix := a.name + "/"
	cpu0, start := cpuOf(r, pid), time.Now()
	proc := harness.Start(r, harness.ProcConfig{Name: fmt.Sprintf("mirror-%s-%d", a.name, round), Bin: tp.cluster.Bins.Replica, Args: []string{
		"mirror", "--source-endpoints", a.endpoint, "--dest-endpoints", dstEndpoint, "--prefix", mirrorCatchUpPrefix,
		"--dest-prefix", dstPrefix, "--name", a.name, "--no-leases", "--log-level", "warn"}})
	harness.WaitFor(r, 10*time.Minute, fmt.Sprintf("%s round %d caught up", a.name, round), func() (bool, error) {
		resp, err := dc.Get(context.Background(), dstPrefix+"marker")
		return err == nil && len(resp.Kvs) == 1 && string(resp.Kvs[0].Value) == strconv.Itoa(round), err
	})
	seconds = time.Since(start).Seconds()
	cpu = cpuOf(r, pid) - cpu0
	proc.Stop()
	return cpu, seconds
}

// idleRate is pid's CPU-s per second over 2 s.
func idleRate(r *runner, pid int) float64 {
	cpu0, start := cpuOf(r, pid), time.Now()
	time.Sleep(2 * time.Second) // the measurement window of idle CPU, not a synchronisation
	return (cpuOf(r, pid) - cpu0) / time.Since(start).Seconds()
}
