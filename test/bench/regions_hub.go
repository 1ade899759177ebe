package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/understudy-kv/understudy/test/harness"
)

// Strong reads through a hub in region A (issue 29). A replica's own
// rounds go through etcd's one ReadIndex loop: a read arriving while a
// round is in flight waits for it and then for a round of its own, up to
// two RTT at WAN latency. A second replica in region B asks a hub replica
// in region A (beside the voters) for its read indexes; its requests
// overlap (--read-index-via-in-flight), so a read waits about one RTT.

const (
	pathViaStrong = "replica strong via a hub in region A"
	// regionHubInFlight is the via replica's --read-index-via-in-flight
	// in the main rows (the default).
	regionHubInFlight = 16
)

func onVia(ep regionEndpoints) []*clientv3.Client { return ep.via }

// regionKneeInFlight are the caps the knee rows try at the last RTT and
// the most clients, beside the main rows' regionHubInFlight.
var regionKneeInFlight = []int{1, 4, 8}

// regionKneeRowName names a knee row.
func regionKneeRowName(inFlight int, rtt time.Duration, n int) string {
	return regionRowName(fmt.Sprintf("%s, --read-index-via-in-flight %d", pathViaStrong, inFlight), rtt, n)
}

// regionKnee measures strong reads through the hub at rtt with n clients
// for each cap of regionKneeInFlight, restarting the via replica with it:
// overlapping requests save the second RTT and cost the hub (and through
// its rounds, the leader) more rounds. The via replica ends with the
// default again.
func regionKnee(r *runner, g *harness.Regions, tp *topology, p params, ep regionEndpoints, rtt time.Duration, n int) []Row {
	path := regionPath{name: pathViaStrong, op: regionGet(), on: onVia, rounds: true}
	base := slices.Clone(g.ViaReplica.Args())
	restart := func(inFlight int) {
		old := g.ViaReplica.PID()
		g.ViaReplica.Stop()
		g.ViaReplica.RestartWithArgs(r, append(slices.Clone(base), "--read-index-via-in-flight", strconv.Itoa(inFlight)))
		g.ViaReplica.WaitServing(r, 5*time.Minute)
		// The restarted process has a new PID: delay its links again,
		// and measure its CPU.
		g.SetRTT(rtt, jitterAt(rtt))
		for i, pid := range tp.extraPIDs {
			if pid == old {
				tp.extraPIDs[i] = g.ViaReplica.PID()
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := path.op(ctx, ep.via[0], 0); err != nil {
			r.Fatalf("%s after the restart: %v", pathViaStrong, err)
		}
	}
	var rows []Row
	for _, k := range regionKneeInFlight {
		restart(k)
		row, _ := regionRun(r, tp, p, path, ep, rtt, n)
		row.Name = regionKneeRowName(k, rtt, n)
		rows = append(rows, row)
	}
	restart(regionHubInFlight)
	return rows
}

// regionKneeNotes writes on each knee row, and on the main row of the
// via path at the same RTT and clients, its p50 against the remote
// voter's and the leader's ReadIndex rounds per second it cost.
func regionKneeNotes(rows []Row, note func(name, text string), byName map[string]int) {
	last, n := regionRTTs[len(regionRTTs)-1], regionClients[len(regionClients)-1]
	remote, ok := byName[regionRowName(pathRemoteStrong, last, n)]
	if !ok || rows[remote].P50 <= 0 {
		return
	}
	names := []string{}
	for _, k := range regionKneeInFlight {
		names = append(names, regionKneeRowName(k, last, n))
	}
	names = append(names, regionRowName(pathViaStrong, last, n))
	for _, name := range names {
		i, ok := byName[name]
		if !ok || rows[i].Seconds <= 0 {
			continue
		}
		ratio := rows[i].P50.Seconds() / rows[remote].P50.Seconds()
		note(name, fmt.Sprintf("knee: p50 %s× the remote voter's, %.1f leader ReadIndex rounds/s (every replica's own rounds, the hub's included)", ratioText(ratio), rows[i].LeaderRounds/rows[i].Seconds))
	}
}
